"""scripts/ncu_floors_table.py (issue 31 item 7): Nsight Compute's counters of each launch, split into cases by the
marker launches, turned into lnbench's floors with the H200's figures; a floor above a measured time fails."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ncu_floors_table.py"
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
MARKER = "void at::vectorized_elementwise_kernel<4, at::FillFunctor<int>, std::array<char *, 1>>(int, T2, T3)"
FWD = "void at::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, 0>(int, T2, const T1 *)"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("ncu_floors_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _metrics(time_ns: float, dram: float, inst: float, busiest: float, grid: int, block: int) -> dict[str, float]:
    return {"gpu__time_duration.sum": time_ns, "dram__bytes_read.sum": dram / 2, "dram__bytes_write.sum": dram / 2,
            "smsp__inst_executed.sum": inst, "sm__inst_executed.max": busiest, "launch__grid_size": grid,
            "launch__block_size": block, "sm__cycles_elapsed.avg.per_second": 1.95e9}


def _write(folder: Path, launches: list[tuple[str, dict[str, float]]]) -> None:
    (folder / "cases.txt").write_text("case 0 torch fwd 4096 4096\n")
    with open(folder / "ncu.csv", "w", newline="") as f:
        f.write("==WARNING== Note: Running with unmodified GPU clocks.\n")      # ncu's lines before the header
        out = csv.writer(f, quoting=csv.QUOTE_ALL)
        out.writerow(HEADER)
        for i, (name, metrics) in enumerate(launches):
            for key, value in metrics.items():
                out.writerow([i, 1, "python3", "host", name, 1, 7, "(128, 1, 1)", "(1, 1, 1)", 0, "9.0",
                              "Command line profiler metrics", key, "", f"{value:,.0f}"])


def test_floors_below_the_measured_time_pass_and_use_the_floor_arithmetic(table, tmp_path, capsys):
    # 4096 blocks of 4 warps on 132 SMs: ceil(4096/132) = 32 blocks → 128 warps on the busiest SM, 32 a scheduler
    inst = 4096 * 4 * 100.0                                          # 100 warp-instructions a warp
    fwd = _metrics(60_000, 2 * 4096 * 4096 * 2, inst, 32 * 4 * 100, 4096, 128)
    _write(tmp_path, [(MARKER, _metrics(2000, 0, 10, 1, 1, 128))] + [(FWD, fwd)] * 3)
    assert table.main(tmp_path, tmp_path / "t.md") == 0
    out = capsys.readouterr().out
    assert "floors above a measured time: 0" in out
    row = next(line for line in (tmp_path / "t.md").read_text().splitlines() if line.startswith("| torch"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "1" and cells[5] == "60.0"                    # one kernel (the marker left out), 60 µs
    assert float(cells[7]) == pytest.approx(2 * 4096 * 4096 * 2 / 4.8e12 * 1e6, abs=0.1)
    assert float(cells[8]) == pytest.approx(32 * 100 / 1.98e9 * 1e6, abs=0.1)      # the grid model's issue floor
    assert "vectorized_layer_norm_kernel" in cells[-1]


def test_a_floor_above_the_measured_time_fails_naming_it(table, tmp_path, capsys):
    fast = _metrics(5_000, 2 * 4096 * 4096 * 2, 1e6, 1e4, 4096, 128)     # 5 µs for 67 MB: faster than HBM
    _write(tmp_path, [(MARKER, _metrics(2000, 0, 10, 1, 1, 128)), (FWD, fast)])
    assert table.main(tmp_path, None) == 1
    assert "vectorized_layer_norm_kernel: memory" in capsys.readouterr().out
