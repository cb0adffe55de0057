#!/usr/bin/env bash
# Issue 57 on a GPU: the up-front estimate (a point from this machine's earlier runs of the kind, else a range
# with the compiles pending) against the time each run took, on a fresh HOME (empty Triton, FlyDSL and lnbench
# caches) and an empty calibration file, then warm; plus held-out shapes. From the repo root:
#   PYTHONPATH=$PWD OUT=/folder bash scripts/device_estimates.sh      (about 4 minutes on an H100)
# Needs python3 with torch, triton, liger-kernel and the wheels sqlalchemy, alembic, mako. Writes
# $OUT/estimates.txt (the table), each run's log, timestamped, as $OUT/NAME.log, and its estimate's trace
# ($LNBENCH_ETA_TRACE) as $OUT/NAME.eta.jsonl.
set -uo pipefail
OUT_DIR="${OUT:-results/device-estimates}"; mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
export HOME="$(mktemp -d)" LNBENCH_RESULTS_DIR="$OUT_DIR/results" COLUMNS=200 PYTHONUNBUFFERED=1
unset TRITON_CACHE_DIR FLYDSL_RUNTIME_CACHE_DIR XDG_CACHE_HOME
PY="${PYTHON:-python3}"
TABLE="$OUT_DIR/estimates.txt"
HERE="$(cd "$(dirname "$0")" && pwd)"
{ echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
       "$(nproc) cores, HOME=$HOME (fresh), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "| run | load (1 min) start / end | printed | actual (wall) | estimate vs actual | live at 25% of the time" \
       "| live from 25% of the work: within 1.25x | worst |"
  echo "|---|---|---|---|---|---|---|---|"; } > "$TABLE"
timed() {  # timed NAME ARGS... : one lnbench command, its row of the table (scripts/estimate_table.py)
  local name="$1"; shift
  LNBENCH_ETA_TRACE="$OUT_DIR/$name.eta.jsonl" OUT="$OUT_DIR" "$PY" "$HERE/estimate_table.py" "$name" -- \
      "$PY" -m lnbench.cli "$@" --no-csv >> "$TABLE"
  tail -1 "$TABLE"
}
timed verify-1 verify --dtype bf16
timed verify-2 verify --dtype bf16
timed perf-1 perf --backend torch,liger --shapes 4096x4096,64x256
timed perf-2 perf --backend torch,liger --shapes 4096x4096,64x256
timed held-out-perf perf --backend torch,liger --shapes 2048x6144,128x1000
timed held-out-verify verify --dtype bf16 --shapes 96x384,1536x3072
echo "table: $TABLE"
