"""How close lnbench's printed run-time estimate comes to the wall time, on this machine (issue 38 item 2).

    python scripts/estimate_accuracy.py                          # every default command that can run here
    python scripts/estimate_accuracy.py --commands cpu-verify,cpu-perf-hot
    python scripts/estimate_accuracy.py --list                   # the commands, and which can run here
    python scripts/estimate_accuracy.py --calibration results/calibration.json --runs 1 --csv out.csv

Each command runs as a subprocess (`python -m lnbench.cli ...`), `--runs` times (default 2), in a temporary results
folder, against one calibration file: by default a fresh one, so that the first run is a machine that has never
run lnbench (its estimate the first guess) and the second the same machine calibrated by the first. From each run's
stderr it takes the printed estimate (`estimated time: ~N s`, or verify's `estimated to take ~N min` warning) and
the seconds from that line to the exit, and prints a Markdown table (command, run, estimate, actual, ratio, the busy
threads the estimate counted, the 1-minute load average before and after) and writes it as CSV.

FlyDSL's compile cache: `emu-*-cold` commands get a fresh FLYDSL_RUNTIME_CACHE_DIR each run (every kernel compiles),
`emu-*-warm` ones share one for the whole script (its first run fills it). The emulated commands run where the
emulator can and there is no CUDA GPU (a GPU machine times its GPU: name them in --commands to run them anyway);
the GPU ones where torch sees a CUDA GPU, `--devices` where it sees two. A command that cannot run here gets a
`not run` row with the reason.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: the printed estimate: `estimated time: ~42 s (...)` or `... estimated to take ~1 h 05 min on the emulated device`
ESTIMATE = re.compile(r"estimated (?:time: |to take )~(?:(\d+) h (\d+) min|(\d+) min|(\d+) s)")
#: the busy threads the estimate counted: `(...; 3 other busy threads on 2 cores)`
OTHERS = re.compile(r"(\d+) other busy threads on (\d+) cores")


@dataclass(frozen=True)
class Command:
    """One lnbench command line: its name, arguments, what it needs (cpu, emu, cuda, gpus), its FlyDSL cache."""

    name: str
    args: tuple[str, ...]
    needs: str = "cpu"
    cache: str = ""                 # "fresh": a new FlyDSL cache each run; "shared": one for the whole script


COMMANDS = [
    Command("cpu-verify", ("verify", "--device", "cpu", "--shapes", "64x256,1024x4096", "--dtype", "bf16",
                           "--backend", "torch")),
    Command("cpu-perf-hot", ("perf", "--device", "cpu", "--shapes", "64x256", "--op", "fwd", "--mode", "hot",
                             "-P", "2", "-R", "3")),
    Command("cpu-perf", ("perf", "--device", "cpu", "--shapes", "1024x1024", "--op", "fwd")),
    Command("emu-verify-cold", ("verify", "--device", "emu", "--shapes", "8x64,256x1024", "--dtype", "f32",
                                "--backend", "flydsl"), "emu", "fresh"),
    Command("emu-verify-warm", ("verify", "--device", "emu", "--shapes", "8x64,256x1024", "--dtype", "f32",
                                "--backend", "flydsl"), "emu", "shared"),
    Command("emu-perf-cold", ("perf", "--device", "emu", "--shapes", "64x256", "--op", "fwd"), "emu", "fresh"),
    Command("emu-perf-warm", ("perf", "--device", "emu", "--shapes", "64x256,1024x1024", "--op", "fwd,bwd"), "emu",
            "shared"),
    Command("main-job", ("verify", "--dtype", "bf16"), "emu", "shared"),
    Command("cuda-aa", ("perf", "--backend", "torch,liger", "--shapes", "4096x4096,64x256", "--dtype", "bf16"),
            "cuda"),
    Command("cuda-verify", ("verify", "--device", "cuda", "--shapes", "64x256,4096x4096", "--dtype", "bf16",
                            "--backend", "torch"), "cuda"),
    Command("cuda-devices", ("perf", "--devices", "all", "--backend", "torch", "--shapes", "4096x4096,64x256",
                             "--dtype", "bf16"), "gpus"),
]


def why_not(command: Command, named: bool) -> str:
    """'' when `command` can run on this machine, else why not (`named`: the user asked for it by name)."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() and torch.version.cuda else 0
    if command.needs == "emu":
        from lnbench.run.device import emulator_status

        ok, reason = emulator_status()
        if not ok:
            return f"no emulated device here ({reason})"
        return "" if named or not gpus else "a CUDA GPU machine: name it in --commands to run it"
    if command.needs == "cuda":
        return "" if gpus else "no CUDA GPU"
    if command.needs == "gpus":
        return "" if gpus >= 2 else f"--devices needs two CUDA GPUs ({gpus} here)"
    return ""


def estimate_s(line: str) -> float | None:
    """The seconds of the estimate printed on `line`, None when it prints none."""
    found = ESTIMATE.search(line)
    if not found:
        return None
    hours, minutes_h, minutes, seconds = found.groups()
    if hours is not None:
        return 3600.0 * int(hours) + 60.0 * int(minutes_h)
    return 60.0 * int(minutes) if minutes is not None else float(seconds)


def run_once(command: Command, env: dict[str, str], timeout_s: float, log: Path | None = None) -> dict[str, object]:
    """One run: (estimate, actual seconds from the estimate line to the exit, busy threads counted, exit code);
    its standard output goes to `log` when given (the table and perf's summary line: where the time went)."""
    load_before = os.getloadavg()[0]
    out = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "lnbench.cli", *command.args], env=env, text=True,
                            stdout=out, stderr=subprocess.PIPE, errors="replace")
    estimate, seen, others, tail = None, None, None, []
    deadline = time.monotonic() + timeout_s
    assert proc.stderr is not None
    for line in proc.stderr:
        tail = (tail + [line.rstrip()])[-5:]
        if estimate is None and estimate_s(line) is not None:
            estimate, seen = estimate_s(line), time.monotonic()
            counted = OTHERS.search(line)
            others = int(counted.group(1)) if counted else None
        if time.monotonic() > deadline:
            proc.kill()
            break
    code = proc.wait()
    if log:
        out.close()
    actual = time.monotonic() - seen if seen is not None else None
    note = "" if code == 0 else f"exit {code}: {tail[-1] if tail else ''}"
    if estimate is None:
        note = note or "no estimate printed"
    return {"estimate_s": estimate, "actual_s": None if actual is None else round(actual, 2),
            "ratio": round(estimate / actual, 2) if estimate is not None and actual else None,
            "others": others, "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "exit": code, "note": note}


def markdown(frame: pd.DataFrame) -> str:
    """The rows as a Markdown table (blank cells for what a row has not)."""
    columns = ["command", "run", "estimate_s", "actual_s", "ratio", "others", "load_before", "load_after", "note"]
    header = ["command", "run", "estimate (s)", "actual (s)", "estimate/actual", "others", "load before",
              "load after", "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame[columns].itertuples(index=False):
        cells = ["" if pd.isna(v) else f"`{v}`" if i == 0 else str(v) for i, v in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", help="comma list of command names (default: all that can run here)")
    parser.add_argument("--list", action="store_true", help="list the commands and whether they can run here")
    parser.add_argument("--runs", type=int, default=2, help="runs of each command (default 2)")
    parser.add_argument("--calibration", type=Path, help="calibration file to use (default: a fresh one)")
    parser.add_argument("--csv", type=Path, default=Path("estimate_accuracy.csv"), help="CSV written (pandas)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a run may take")
    parser.add_argument("--logs", type=Path, help="folder for each run's standard output (NAME-RUN.log)")
    args = parser.parse_args()
    named = [n.strip() for n in (args.commands or "").split(",") if n.strip()]
    unknown = set(named) - {c.name for c in COMMANDS}
    if unknown:
        parser.error(f"unknown command(s) {', '.join(sorted(unknown))}; --list shows them")
    chosen = [c for c in COMMANDS if not named or c.name in named]
    if args.list:
        for command in COMMANDS:
            print(f"{command.name:16} {why_not(command, True) or 'runs here':40} lnbench {' '.join(command.args)}")
        return 0
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lnbench-estimates-") as tmp:
        folder = Path(tmp)
        base = {**os.environ, "COLUMNS": "200", "LNBENCH_RESULTS_DIR": str(folder / "results"),
                "LNBENCH_CALIBRATION": str(args.calibration or folder / "calibration.json")}
        for command in chosen:
            reason = why_not(command, bool(named))
            for run in range(1, args.runs + 1):
                row: dict[str, object] = {"command": " ".join(("lnbench", *command.args)), "name": command.name,
                                          "run": run, "cache": command.cache}
                if reason:
                    rows.append({**row, "note": f"not run: {reason}"})
                    break
                env = dict(base)
                if command.cache:
                    cache = folder / (f"flydsl-{command.name}-{run}" if command.cache == "fresh" else "flydsl")
                    env["FLYDSL_RUNTIME_CACHE_DIR"] = str(cache)
                log = args.logs / f"{command.name}-{row['run']}.log" if args.logs else None
                rows.append({**row, **run_once(command, env, args.timeout, log)})
                print(f"{command.name} run {run}: {rows[-1]}", file=sys.stderr)
    frame = pd.DataFrame(rows)
    for column in ("estimate_s", "actual_s", "ratio", "others", "load_before", "load_after", "note"):
        if column not in frame:
            frame[column] = None
    print(f"Machine: {os.cpu_count()} CPUs; 1-minute load average at the end {os.getloadavg()[0]:.2f}\n")
    print(markdown(frame))
    frame.to_csv(args.csv, index=False)
    print(f"\nwritten: {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
