#!/usr/bin/env bash
# Issue 57 on a GPU: the up-front estimate (a point from this machine's earlier runs of the kind, else a range
# with the compiles pending) against the time each run took, on a fresh HOME (empty Triton, FlyDSL and lnbench
# caches) and an empty calibration file, then warm; plus held-out shapes. From the repo root:
#   PYTHONPATH=$PWD OUT=/folder bash scripts/device_estimates.sh      (about 4 minutes on an H100)
# Needs python3 with torch, triton, liger-kernel and the wheels sqlalchemy, alembic, mako. Writes
# $OUT/estimates.txt (the table) and each run's log, timestamped, as $OUT/NAME.log.
set -uo pipefail
OUT_DIR="${OUT:-results/device-estimates}"; mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
export HOME="$(mktemp -d)" LNBENCH_RESULTS_DIR="$OUT_DIR/results" COLUMNS=200 PYTHONUNBUFFERED=1
unset TRITON_CACHE_DIR FLYDSL_RUNTIME_CACHE_DIR XDG_CACHE_HOME
PY="${PYTHON:-python3}"
TABLE="$OUT_DIR/estimates.txt"
{ echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
       "$(nproc) cores, HOME=$HOME (fresh), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "| run | command | printed | actual (from the line) | wall | estimate vs actual | live at >=25% |"
  echo "|---|---|---|---|---|---|---|"; } > "$TABLE"
timed() {  # timed NAME ARGS... : one lnbench command, its line of the table
  local name="$1"; shift
  "$PY" - "$OUT_DIR/$name.log" "$name" "$PY" -m lnbench.cli "$@" --no-csv >> "$TABLE" <<'PYEOF'
import re, subprocess, sys, time
log, name, *cmd = sys.argv[1:]
t0 = time.monotonic()
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
lines = [(time.monotonic() - t0, line.rstrip()) for line in proc.stdout]
proc.wait()
end = time.monotonic() - t0
with open(log, "w") as out:
    out.writelines(f"{t:8.2f} {line}\n" for t, line in lines)
at, text = next(((t, l) for t, l in lines if "estimated time" in l or "estimated to take" in l), (None, ""))
def seconds(value, unit):
    return float(value) * (60 if unit == "min" else 1)
actual = end - at if at is not None else float("nan")
shown = text.split("(")[0]
span = re.search(r"(\d+) (s|min) – (\d+) (s|min)", shown)
point = re.search(r"~(\d+) (s|min)", shown)
if span:
    low, high = seconds(*span.groups()[:2]), seconds(*span.groups()[2:])
    verdict = f"range {low:.0f}-{high:.0f} s: {'inside' if low <= actual <= high else 'OUTSIDE'}"
elif point:
    verdict = f"{seconds(*point.groups()) / actual:.2f}x"
else:
    verdict = "no estimate line"
live = ""
for t, line in lines:
    left = re.search(r"~(\d+) (s|min) left", line)
    if at is not None and t - at >= 0.25 * actual and left:
        truth = max(end - t, 0.5)
        live = f"{100 * (t - at) / actual:.0f}%: ~{seconds(*left.groups()):.0f} s for {truth:.1f} s ({seconds(*left.groups()) / truth:.2f}x)"
        break
printed = text.split(": ", 1)[1] if ": " in text else text
print(f"| {name} | `lnbench {' '.join(cmd[3:-1])}` | {printed} | {actual:.1f} s | {end:.1f} s (exit {proc.returncode}) "
      f"| {verdict} | {live} |", flush=True)
PYEOF
  tail -1 "$TABLE"
}
timed verify-1 verify --dtype bf16
timed verify-2 verify --dtype bf16
timed perf-1 perf --backend torch,liger --shapes 4096x4096,64x256
timed perf-2 perf --backend torch,liger --shapes 4096x4096,64x256
timed held-out-perf perf --backend torch,liger --shapes 2048x6144,128x1000
timed held-out-verify verify --dtype bf16 --shapes 96x384,1536x3072
echo "table: $TABLE"
