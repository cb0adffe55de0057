#!/usr/bin/env python3
"""Issue 57's table, one row per command, measured as a user runs it: the up-front estimate against the time the
run took, and the live "~Y left" of the progress lines against the time really left.

    python scripts/estimate_table.py NAME -- lnbench verify --dtype bf16        (from the repo root)

runs the command with its stderr and stdout captured (a log: the progress prints a line at least every 2 s),
stamps each line with the seconds since the start, writes them to $OUT/NAME.log (OUT defaults to
results/estimate-table) and prints one markdown row:

    | NAME | load at start / end | printed | actual (wall) | estimate vs actual | live at 25% of the time |
      live from 25% of the work: within 1.25× | worst |

actual: seconds from the estimate line to the exit (wall: the whole command); estimate vs actual: the point over
the actual time, or whether the actual time is inside the printed range; live at 25% of the time: the first
"~Y left" printed at or after 25% of the actual time, against the time really left then (the earlier table's
column); live from 25% of the work: of the progress lines whose count says 25% or more of the units are done and
where at least MIN_LEFT_S seconds were really left (below that the whole-second rounding of "~Y" alone is 1.25×
off), how many showed a time left within 1.25× of the truth, and the farthest, either way. The load averages are
/proc/loadavg's 1-minute figure when the command starts and ends.

    python scripts/estimate_table.py --log NAME.log      the row again from a log this script wrote
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

#: live points with less time really left than this are not judged (the "~Y s" shown is rounded to whole seconds)
MIN_LEFT_S = 4.0


def seconds(value: str, unit: str) -> float:
    return float(value) * (60 if unit == "min" else 3600 if unit == "h" else 1)


def load1() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def run(cmd: list[str]) -> tuple[list[tuple[float, str]], float, int, str]:
    """The command's output lines with their times, its wall seconds, its exit status and the loads."""
    start_load = load1()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"})
    assert proc.stdout is not None
    lines = [(time.monotonic() - t0, line.rstrip()) for line in proc.stdout]
    proc.wait()
    return lines, time.monotonic() - t0, proc.returncode, f"{start_load} / {load1()}"


def row(name: str, lines: list[tuple[float, str]], end: float, code: int, loads: str) -> str:
    at, text = next(((t, line) for t, line in lines if "estimated time" in line or "estimated to take" in line),
                    (None, ""))
    if at is None:
        return f"| {name} | {loads} | (no estimate line) | {end:.1f} s (exit {code}) | | | |"
    actual = end - at
    printed = text.split("estimated time: ", 1)[-1].split(" (")[0]
    span = re.search(r"(\d+) (s|min) – (\d+) (s|min)", printed)
    point = re.search(r"~(\d+) (s|min)", printed)
    if span:
        low, high = seconds(*span.groups()[:2]), seconds(*span.groups()[2:])
        verdict = ("inside" if low <= actual <= high else f"OUTSIDE: {actual / high:.2f}× its top" if actual > high
                   else f"OUTSIDE: {low / actual:.2f}× below its low end")
    elif point:
        verdict = f"{seconds(*point.groups()) / actual:.2f}"
    else:
        verdict = "?"
    live = []
    for t, line in lines:
        left = re.search(r"~(\d+) (s|min|h)(?: (\d+) min)? left", line)
        if left and t - at >= 0.25 * actual:
            shown = seconds(left.group(1), left.group(2)) + (float(left.group(3)) * 60 if left.group(3) else 0)
            live.append((100 * (t - at) / actual, shown, end - t))
    first = next(((p, s, truth) for p, s, truth in live), None)
    work = []                   # (% of the units done, shown, truth) from 25% of the work
    for t, line in lines:
        count = re.match(r"\[\d+/\d+ (\d+)%\]", line)
        left = re.search(r"~(\d+) (s|min|h)(?: (\d+) min)? left", line)
        if count and left and int(count.group(1)) >= 25 and end - t >= MIN_LEFT_S:
            shown = seconds(left.group(1), left.group(2)) + (float(left.group(3)) * 60 if left.group(3) else 0)
            work.append((float(count.group(1)), shown, end - t))
    off = [max(s / truth, truth / max(s, 0.5)) for _, s, truth in work]
    within = sum(o <= 1.25 for o in off)
    worst = work[off.index(max(off))] if off else None

    def fmt(point: tuple[float, float, float] | None) -> str:
        return "" if point is None else f"{point[0]:.0f}%: ~{point[1]:.0f} s for {point[2]:.1f} s ({point[1] / point[2]:.2f})"
    return (f"| {name} | {loads} | {printed} | {actual:.1f} s ({end:.1f} s) | {verdict} | {fmt(first)} "
            f"| {within}/{len(work)} | {fmt(worst)} |")


def from_log(path: Path) -> str:
    """The row again from a log this script wrote (its first line: `# load L / L, exit N, wall W s`)."""
    text = path.read_text().splitlines()
    head = re.match(r"# load (.*), exit (-?\d+), wall ([\d.]+) s", text[0]) if text else None
    loads, code, end = (head.group(1), int(head.group(2)), float(head.group(3))) if head else ("?", 0, 0.0)
    lines = [(float(line[:8]), line[9:]) for line in text[1 if head else 0:] if line[:8].strip()]
    return row(path.stem, lines, end or (lines[-1][0] if lines else 0.0), code, loads)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--log"]:
        for log in argv[1:]:
            print(from_log(Path(log)))
        return 0
    if "--" not in argv or argv.index("--") != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    name, cmd = argv[0], argv[2:]
    out = Path(os.environ.get("OUT", "results/estimate-table"))
    out.mkdir(parents=True, exist_ok=True)
    lines, end, code, loads = run(cmd)
    (out / f"{name}.log").write_text(f"# load {loads}, exit {code}, wall {end:.2f} s\n"
                                     + "".join(f"{t:8.2f} {line}\n" for t, line in lines))
    print(row(name, lines, end, code, loads), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
