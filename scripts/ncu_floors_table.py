"""Issue 31 item 7: lnbench's floor method checked on a GPU that runs. Reads what scripts/device_ncu_floors.sh
wrote (ncu.csv, cases.txt) and computes, for every kernel launch of torch's and Liger's LayerNorm over the sweep
set, the same floors lnbench.modelled.floors computes from an emulated launch, from Nsight Compute's counters and
the H200's published figures (H200 below; docs/targets.md names the sources):

    memory  DRAM bytes read + written (ncu, caches flushed before the launch) / HBM peak; per op also from
            lnbench's byte model (the compulsory bytes the emulated floors use)
    issue   the same busiest-CU arithmetic as the emulated VALU floor (lnbench.modelled.floors.floors): the grid's
            blocks over the SMs, each block's warps over the SM's 4 schedulers, every warp-instruction holding its
            scheduler one clock (a wave64 instruction on a 64-lane SIMD in the AMD model), at the peak clock; and
            from the counter of the busiest SM (sm__inst_executed.max / 4 schedulers / clock)

A floor above the kernel's measured time (gpu__time_duration) is a bug in the floors. Exit 1 when there is one.
    python scripts/ncu_floors_table.py FOLDER [--markdown FILE]
"""
from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from lnbench.modelled.floors import Launch, floors
from lnbench.modelled.targets import Target
from lnbench.perf.bytes_model import op_bytes

#: NVIDIA H200 SXM, published figures: 132 SMs of 4 schedulers (H100 SXM5 whitepaper), 1,980 MHz peak boost
#: clock, 4.8 TB/s HBM3e (H200 datasheet). wave_slots / vgprs / sgprs / lds only size occupancy, unused here.
H200 = Target(name="H200", arch="sm_90", cus=132, clock_mhz=1980.0, hbm_gbps=4800.0, lds_kib=228.0, simds=4,
              wave_slots=16, vgprs=65536, sgprs=1, simd_lanes=64, l2_mib=50.0)
SCHEDULERS = 4
WARP = 32


def read_launches(folder: Path) -> list[dict]:
    """One dict a launch, in launch order: kernel name, grid, block and its metrics (base units)."""
    launches: dict[int, dict] = {}
    with open(folder / "ncu.csv", newline="") as f:
        lines = [line for line in f if not line.startswith("==")]       # ncu's ==WARNING== / ==PROF== lines
        for row in csv.DictReader(lines):
            if not row.get("ID", "").strip().isdigit():
                continue
            entry = launches.setdefault(int(row["ID"]), {"kernel": row["Kernel Name"], "metrics": {}})
            value = row["Metric Value"].replace(",", "")
            try:
                entry["metrics"][row["Metric Name"]] = float(value)
            except ValueError:
                pass
    return [launches[i] for i in sorted(launches)]


def split_cases(launches: list[dict], cases: list[tuple[int, str, str, int, int]]) -> dict[int, list[dict]]:
    """The launches after each marker (an int32 fill), by case index, marker left out."""
    out: dict[int, list[dict]] = {}
    current = -1
    for launch in launches:
        if "FillFunctor<int>" in launch["kernel"]:
            current += 1
            out[cases[current][0]] = []
        elif current >= 0:
            out[cases[current][0]].append(launch)
    return out


def short(kernel: str) -> str:
    name = kernel.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "").split("(")[0].split("<")[0].strip()
    return name.rsplit("::", 1)[-1][:40]


def kernel_floors(metrics: dict[str, float]) -> dict[str, float]:
    """µs: measured time and the floors of one launch (medians of its repetitions' metrics)."""
    grid, block = int(metrics["launch__grid_size"]), int(metrics["launch__block_size"])
    warps = math.ceil(block / WARP)
    dram = metrics["dram__bytes_read.sum"] + metrics["dram__bytes_write.sum"]
    launch = Launch(workgroups=grid, waves_per_group=warps,
                    wave_instructions={"valu": int(metrics["smsp__inst_executed.sum"])},
                    unique_bytes=int(dram), lds_bank_cycles=0)
    f = floors(launch, H200, "cold")
    return {"measured": metrics["gpu__time_duration.sum"] / 1e3, "memory": f.memory_us,
            "issue": f.issue_us.get("valu", 0.0),
            "issue_counter": metrics["sm__inst_executed.max"] / SCHEDULERS / H200.clock_hz * 1e6,
            "clock_mhz": metrics.get("sm__cycles_elapsed.avg.per_second", 0.0) / 1e6, "grid": grid, "block": block}


def main(folder: Path, markdown: Path | None) -> int:
    cases = []
    for line in (folder / "cases.txt").read_text().splitlines():
        _, index, backend, op, m, n = line.split()
        cases.append((int(index), backend, op, int(m), int(n)))
    by_case = split_cases(read_launches(folder), cases)
    rows, above, clocks = [], [], []
    for index, backend, op, m, n in cases:
        launches = by_case.get(index, [])
        groups: dict[str, list[dict]] = defaultdict(list)
        order: list[str] = []
        for launch in launches:
            key = f"{short(launch['kernel'])} {int(launch['metrics'].get('launch__grid_size', 0))}"
            if key not in groups:
                order.append(key)
            groups[key].append(launch["metrics"])
        kernels = []
        for key in order:
            reps = groups[key]
            med = {k: statistics.median(r[k] for r in reps if k in r) for k in reps[0]}
            k = kernel_floors(med)
            k["name"] = key.split()[0]
            kernels.append(k)
            clocks.append(k["clock_mhz"])
            for floor in ("memory", "issue", "issue_counter"):
                if k[floor] > k["measured"]:
                    above.append(f"{backend} {op} N={n} {k['name']}: {floor} {k[floor]:.2f} µs > measured "
                                 f"{k['measured']:.2f} µs")
        if not kernels:
            rows.append((backend, op, n, m, 0, "no launches captured", *([""] * 7)))
            continue
        measured = sum(k["measured"] for k in kernels)
        extra = 2 * (2 * H200.cus * n * 4) if backend == "liger" and op == "bwd" else 0
        model_bytes = op_bytes(op, m, n, 2, workspace_bytes=extra)
        model_memory = model_bytes / (H200.hbm_gbps * 1e9) * 1e6
        bound = sum(max(k["memory"], k["issue"], k["issue_counter"]) for k in kernels)
        worst = max(kernels, key=lambda k: max(k["memory"], k["issue"], k["issue_counter"]) / k["measured"])
        worst_ratio = max(worst["memory"], worst["issue"], worst["issue_counter"]) / worst["measured"]
        if model_memory > measured:
            above.append(f"{backend} {op} N={n}: byte-model memory floor {model_memory:.2f} µs > measured "
                         f"{measured:.2f} µs")
        main_k = max(kernels, key=lambda k: k["measured"])
        by = "memory" if main_k["memory"] >= max(main_k["issue"], main_k["issue_counter"]) else "issue"
        rows.append((backend, op, n, m, len(kernels), f"{measured:.1f}", f"{model_memory:.1f}",
                     f"{sum(k['memory'] for k in kernels):.1f}", f"{sum(k['issue'] for k in kernels):.1f}",
                     f"{sum(k['issue_counter'] for k in kernels):.1f}", f"{bound / measured:.2f}", by,
                     f"{worst_ratio:.2f} ({worst['name']})"))
    header = ("backend", "op", "N", "M", "kernels", "measured µs", "memory floor µs (byte model)",
              "memory floor µs (DRAM counters)", "issue floor µs (grid model)", "issue floor µs (busiest-SM counter)",
              "Σ bound / measured", "main kernel bound by", "largest floor / measured, one kernel")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    text = "\n".join(lines)
    print(text)
    print()
    if clocks:
        print(f"SM clock under ncu (MHz): min {min(clocks):.0f}, median {statistics.median(clocks):.0f}, "
              f"max {max(clocks):.0f}; the floors use the peak {H200.clock_mhz:.0f}")
    print(f"floors above a measured time: {len(above)}")
    for a in above:
        print("  " + a)
    if markdown:
        markdown.write_text(text + "\n")
    return 1 if above else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    md = Path(args[args.index("--markdown") + 1]) if "--markdown" in args else None
    sys.exit(main(Path(args[0]), md))
