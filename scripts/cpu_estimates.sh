#!/usr/bin/env bash
# Issue 57 on this CPU machine: the up-front estimate and the live "~left" against the time each run took, as a
# user runs them: a fresh HOME (cold: FlyDSL's cache, the emulator's build and trace caches empty) and an empty
# calibration file, then warm; one core (taskset -c 0); two busy processes beside it; held-out shapes that no fit
# was made on. From the repo root:
#   OUT=/folder bash scripts/cpu_estimates.sh           (about 6 minutes on an idle 2-core machine)
# Writes $OUT/estimates.txt (the table) and each run's log, timestamped, as $OUT/NAME.log.
set -uo pipefail
OUT_DIR="${OUT:-results/cpu-estimates}"; mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
export HOME="$(mktemp -d)" LNBENCH_RESULTS_DIR="$OUT_DIR/results" COLUMNS=200 PYTHONUNBUFFERED=1
unset FLYDSL_RUNTIME_CACHE_DIR XDG_CACHE_HOME
PY="${PYTHON:-python3}"
TABLE="$OUT_DIR/estimates.txt"
HERE="$(cd "$(dirname "$0")" && pwd)"
{ echo "# $(date -u +%FT%TZ) $(nproc) cores, HOME=$HOME (fresh), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "| run | load (1 min) start / end | printed | actual (wall) | estimate vs actual | live at 25% of the time" \
       "| live from 25% of the work: within 1.25x | worst |"
  echo "|---|---|---|---|---|---|---|---|"; } > "$TABLE"
timed() {  # timed NAME [taskset ...] -- ARGS... : one lnbench command, its row of the table
  local name="$1"; shift
  OUT="$OUT_DIR" "$PY" "$HERE/estimate_table.py" "$name" -- "$@" --no-csv >> "$TABLE"
  tail -1 "$TABLE"
}
LN=("$PY" -m lnbench.cli)
timed main-cold "${LN[@]}" verify --dtype bf16
timed main-warm-1 "${LN[@]}" verify --dtype bf16
timed main-warm-2 "${LN[@]}" verify --dtype bf16
timed main-one-core taskset -c 0 "${LN[@]}" verify --dtype bf16
timed main-one-core-2 taskset -c 0 "${LN[@]}" verify --dtype bf16
"$PY" -c 'while 1: pass' & SPIN1=$!; "$PY" -c 'while 1: pass' & SPIN2=$!; sleep 20
timed main-2-busy "${LN[@]}" verify --dtype bf16
timed main-2-busy-2 "${LN[@]}" verify --dtype bf16
kill $SPIN1 $SPIN2; sleep 5
timed held-out-emu "${LN[@]}" verify --device emu --backend flydsl --shapes 48x3000,200x640
timed held-out-emu-2 "${LN[@]}" verify --device emu --backend flydsl --shapes 48x3000,200x640
timed held-out-perf-cpu "${LN[@]}" perf --device cpu --backend torch --shapes 384x1536,48x320
timed held-out-perf-cpu-2 "${LN[@]}" perf --device cpu --backend torch --shapes 384x1536,48x320
echo "table: $TABLE"
