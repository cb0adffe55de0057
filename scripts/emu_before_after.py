"""The emulator before and after a change, on this machine, in one run (issue 42's table; not a timed test).

    git worktree add /tmp/emu-before <commit>
    python scripts/emu_before_after.py --before /tmp/emu-before --kernel-src /tmp/flydsl-src --rounds 2

Runs each workload with the earlier tree (PYTHONPATH=--before, the same venv; each command started outside the
repository, so the earlier tree's lnbench is the one imported) and with this one, alternating the
order round by round (before, after; then after, before), and prints a Markdown table: the best of the rounds for
each side and the factor. Workloads: `scripts/emu_speed.py` (bf16 64x4096 on emu:gfx942, one core: `taskset -c 0`)
for lnbench's and FlyDSL's forward and backward with all checks and with none (CPU time per call ->
wave-instructions/s); the main job `lnbench verify --dtype bf16 --quiet --no-csv`, warm and cold (cold: an empty
FlyDSL compile cache, no stored decoded kernels, access records or trace index); `verify --device emu --backend flydsl --dtype bf16 --shapes
4096x4096`; with --sweep, `perf --device emu:gfx950 --backend flydsl --shape-set sweep --op fwd,bwd --dtype bf16`
once per side (minutes). Wall times: time.monotonic around each child process.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEED = re.compile(r"^\s+(fwd|bwd \(main \+ reduce\))\s.*?(\d+) wave-instructions\s+([\d.]+) M/s wall,\s+([\d.]+) M/s CPU",
                   re.M)


def _env(tree: Path | None, cold: bool) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    env.setdefault("LNBENCH_RESULTS_DIR", tempfile.mkdtemp(prefix="emu-ab-results-"))
    if cold:
        env["FLYDSL_RUNTIME_CACHE_DIR"] = tempfile.mkdtemp(prefix="emu-ab-flydsl-")
        from lnbench.emu.hip import emu_dir
        from lnbench.machine.cache_dirs import lnbench_cache_dir
        # everything a warm run reuses: decoded kernels, register-access records, the trace index
        for stored in (emu_dir() / "decoded", emu_dir() / "access", lnbench_cache_dir() / "flydsl-traces"):
            shutil.rmtree(stored, ignore_errors=True)
    return env


def _run(cmd: list[str], tree: Path | None, cold: bool = False) -> tuple[float, str]:
    """(wall seconds, output) of one command; a failure stops the script (a broken side measures nothing)."""
    start = time.monotonic()
    # run from a folder of its own: from the repository root, `python -c` would import this tree's lnbench first
    proc = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=_env(tree, cold), capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _cli(*args: str) -> list[str]:
    """lnbench's CLI through the interpreter, so PYTHONPATH picks the tree (the console script would not). argv[0]
    is `lnbench` before lnbench.cli is imported: it then runs as the command line does (lnbench.cli.COMMAND_LINE:
    verify's early workers, the start-up signal handlers)."""
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'lnbench'; from lnbench.cli import main; main()", *args]


def workloads(kernel_src: str, sweep: bool) -> dict[str, tuple[list[str], bool, str]]:
    """label -> (command, cold, what is read: 'speed' (M/s CPU per op) or 'wall' (seconds))."""
    speed = ["taskset", "-c", "0", sys.executable, str(ROOT / "scripts" / "emu_speed.py"), "--repeats", "5"]
    out: dict[str, tuple[list[str], bool, str]] = {
        "lnbench, all checks": (speed, False, "speed"),
        "lnbench, no checks": (speed + ["--emu-checks", "none"], False, "speed"),
    }
    if kernel_src:
        out["FlyDSL, all checks"] = (speed + ["--kernel-src", kernel_src], False, "speed")
        out["FlyDSL, no checks"] = (speed + ["--kernel-src", kernel_src, "--emu-checks", "none"], False, "speed")
    main_job = _cli("verify", "--dtype", "bf16", "--quiet", "--no-csv")
    out["main job, warm"] = (main_job, False, "wall")
    out["main job, cold"] = (main_job, True, "wall")
    out["verify 4096x4096 flydsl bf16"] = (_cli("verify", "--device", "emu", "--backend", "flydsl", "--dtype", "bf16",
                                                "--shapes", "4096x4096", "--no-csv", "-q"), False, "wall")
    if sweep:
        out["perf emu:gfx950 sweep (fwd, bwd)"] = (_cli("perf", "--device", "emu:gfx950", "--backend", "flydsl",
                                                        "--shape-set", "sweep", "--op", "fwd,bwd", "--dtype", "bf16",
                                                        "--no-csv", "-q"), False, "wall")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="the earlier tree (a git worktree)")
    ap.add_argument("--kernel-src", default="", help="a FlyDSL checkout: FlyDSL's LayerNorm rows too")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sweep", action="store_true", help="the gfx950 perf sweep too (once per side)")
    ap.add_argument("--only", default="", help="a comma list of workload labels' first words (e.g. main,verify)")
    args = ap.parse_args()
    best: dict[tuple[str, str, str], float] = {}
    for label, (cmd, cold, kind) in workloads(args.kernel_src, args.sweep).items():
        if args.only and label.split()[0].rstrip(",") not in args.only.split(","):
            continue
        rounds = 1 if label.startswith("perf") else args.rounds
        for r in range(rounds):
            order = [("before", args.before), ("after", None)]
            for side, tree in order if r % 2 == 0 else order[::-1]:
                wall, text = _run(cmd, tree, cold)
                if kind == "wall":
                    key = (label, "", side)
                    best[key] = min(best.get(key, float("inf")), wall)
                    print(f"{label} [{side}] {wall:.1f} s", file=sys.stderr, flush=True)
                    continue
                for op, _instrs, _wall_rate, cpu_rate in SPEED.findall(text):
                    key = (label, op.split()[0], side)
                    best[key] = max(best.get(key, 0.0), float(cpu_rate))   # a rate: the best is the highest
                    print(f"{label} {op} [{side}] {cpu_rate} M/s CPU", file=sys.stderr, flush=True)
    print("| workload | before | after | factor |\n|---|---|---|---|")
    for (label, op, side), value in best.items():
        if side != "before" or (label, op, "after") not in best:
            continue
        after = best[(label, op, "after")]
        if op:
            print(f"| {label}, {op}: M wave-instructions/s (CPU) | {value:.2f} | {after:.2f} | {after / value:.2f}x |")
        else:
            print(f"| {label}: s wall | {value:.1f} | {after:.1f} | {value / after:.2f}x |")


if __name__ == "__main__":
    main()
