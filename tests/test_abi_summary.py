"""`lnbench abi-compare` output: a summary that fits an 80-column terminal by default, every row with --details,
and a default run short enough for 2 cores (the full shape set behind `--shape-set full`)."""
from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from lnbench import settings as cfg
from lnbench.abi.summary import runtime_summary, static_summary
from lnbench.results import AbiRow


def _lnbench(args: list[str], tmp_path, columns: int = 80,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "LNBENCH_CONFIG"}, "COLUMNS": str(columns),
           "LNBENCH_RESULTS_DIR": str(tmp_path / "results"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)


def test_runtime_summary_spans_shapes_and_folds_a_measurement_no_worker_takes():
    rows = [AbiRow(op="fwd", metric="direct", status="ok", speedup=s, verdict=v)
            for s, v in ((1.70, "faster"), (1.85, "faster"), (1.01, "same"))]
    rows += [AbiRow(op="fwd", metric="device", status="not run (null device: no device time)")] * 3
    summary, lines = runtime_summary(rows)
    assert summary == [{"op": "fwd", "metric": "direct", "rows": "3", "speedup": "1.01–1.85×",
                        "outcome": "2 faster, 1 same"}]
    assert lines == ["device: not run (null device: no device time) (3 rows)"]


def test_static_summary_is_one_row_per_arch_op_kernel():
    rows = [AbiRow(arch="gfx942", op="fwd", kernel="ln_fwd", status="ok", kernarg_ratio=0.46, instr_ratio=r,
                   exec_status="ok", exec_ratio=r) for r in (0.97, 0.98)]
    rows.append(AbiRow(arch="gfx942", op="fwd", kernel="ln_fwd", status="error"))
    (row,) = static_summary(rows)
    assert row["rows"] == "3" and row["instr"] == "0.97–0.98" and row["kernarg"] == "0.46"
    assert row["status"] == "2 ok, 1 error"


def test_the_default_shapes_are_short_and_the_full_set_is_named():
    table = cfg.section(cfg.load_config(None), "abi_compare")
    assert len(table["shapes"]) == 2 and len(table["shape_sets"]["full"]) == 4


def test_details_prints_every_row_and_the_summary_fewer(tmp_path):
    args = ["abi-compare", "--static-only", "--no-execute", "--arch", "gfx942", "--shapes", "1x1024,1x2048",
            "--op", "fwd,bwd", "--dtype", "bf16"]
    full = _lnbench([*args, "--details", "--csv", str(tmp_path / "d.csv")], tmp_path, columns=250)   # unwrapped
    assert full.returncode == 0, full.stderr
    frame = pd.read_csv(tmp_path / "d.csv")
    assert len(frame) == 6                              # 2 widths × (fwd, bwd main, bwd reduce)
    text = full.stdout.replace("│", " ")
    for n, kernel in zip(frame["N"], frame["kernel"]):  # every row: its width and kernel, side by side
        assert any(str(n) in line and str(kernel)[:6] in line for line in text.splitlines()), (n, kernel, text)
    short = _lnbench(args, tmp_path, columns=250)
    assert short.returncode == 0 and "every row: --details" in short.stdout
    rows = [line for line in short.stdout.splitlines() if "gfx942" in line]
    assert len(rows) == 3 and len([line for line in full.stdout.splitlines() if "gfx942" in line]) == 6   # per kernel


def test_abi_compare_without_flags_prints_at_most_40_lines_at_80_columns(tmp_path):
    """The default run's output: its lines come from the default's counts (shapes, dtypes, ops, measurements,
    arches), not from its shapes' sizes or its timings. The run is made cheap by a config that keeps every count
    and swaps the shapes for small ones of the same number, with a short protocol (the default shapes execute
    4096x4096 on the emulator for minutes)."""
    defaults = cfg.section(cfg.load_config(None), "abi_compare")
    small = ["32x64", "16x128", "8x256", "4x512"][:len(defaults["shapes"])]
    config = tmp_path / "small.toml"
    config.write_text("[abi_compare]\nshapes = [%s]\nprocesses = 2\nruns = 2\nwarmup_s = 0.0\n"
                      "min_warmup_calls = 1\ntarget_run_s = 0.0\nmin_iters = 2\nmax_iters = 4\nbootstrap = 200\n"
                      % ", ".join(f'"{shape}"' for shape in small))
    result = _lnbench(["abi-compare"], tmp_path, env={"LNBENCH_CONFIG": str(config)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 80, result.stdout
    assert "abi-compare runtime" in result.stdout and "abi-compare static" in result.stdout, result.stdout
