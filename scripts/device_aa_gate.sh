#!/usr/bin/env bash
# The A/A gate on an NVIDIA GPU: the same `lnbench perf` command RUNS times in a row (default 11, so 10
# consecutive pairs), then every consecutive pair compared case by case with `lnbench compare`'s statistics
# (scripts/aa_gate.py). Nothing changes between the runs, so every SLOWER / FASTER is a false flag; the gate
# is honest when at most 5 % of the comparisons are flagged.
#   cases: torch and liger (liger only where liger-kernel is installed), fwd and bwd, bf16,
#          4096x4096 (bandwidth-bound) and 64x256 (launch-bound), hot and cold: 16 per run
# Run from the repository root on a machine with a CUDA GPU and torch:
#   bash scripts/device_aa_gate.sh                 # results in results/aa-gate
#   OUT=/some/folder RUNS=21 bash scripts/device_aa_gate.sh
#   PERF_ARGS="--shapes 1024x1024" RUNS=21 bash scripts/device_aa_gate.sh   # the CPU protocol: default perf
# OUT (the output folder), RUNS and PERF_ARGS (the perf options, replacing the GPU set above) are optional
# environment variables; FIRST numbers the first run (to continue a series in a later call) and DEADLINE_S
# starts no run after that many seconds of the script (a lease's end), so a series can span several calls. Writes into the output folder:
#   aa.json   every comparison, the false-flag rate per shape × mode and overall, the load of each run
#   aa.log    the perf summaries and the rate table, as printed
#   runs.tgz  the perf JSON of every run (aa_gate.py re-reads them: python scripts/aa_gate.py FOLDER)
# Exit status: aa_gate.py's (0: rate ≤ 5 %, 1: above, 2: too few runs). About 50 s per run on an NVIDIA H200.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS="${COLUMNS:-200}"
OUT_DIR="${OUT:-results/aa-gate}"
RUNS="${RUNS:-11}"
FIRST="${FIRST:-1}"
DEADLINE_S="${DEADLINE_S:-0}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
TMP_DIR="$(mktemp -d)"
trap 'rm -rf "$TMP_DIR"' EXIT
export LNBENCH_RESULTS_DIR="$TMP_DIR"        # the peak cache and unasked-for CSVs stay out of the output folder
LOG="$OUT_DIR/aa.log"
: >"$LOG"

BACKENDS=torch
if "$PY" -c "import liger_kernel" 2>/dev/null; then BACKENDS=torch,liger; else echo "liger-kernel not installed: torch only" | tee -a "$LOG"; fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 || echo "nvidia-smi unavailable"; nproc; } | tee -a "$LOG"
"$PY" -m lnbench.cli peak 2>&1 | tail -3 | tee -a "$LOG"
mkdir -p "$TMP_DIR/runs"
for i in $(seq -f %02g "$FIRST" $((FIRST + RUNS - 1))); do
  if [ "$DEADLINE_S" != 0 ] && [ "$SECONDS" -ge "$DEADLINE_S" ]; then echo "deadline: no run $i" | tee -a "$LOG"; break; fi
  echo "== run $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
  start_ns=$(date +%s%N)
  # not -q: the line with perf's estimate is kept (issue 33 item 1: the estimate against the run's wall time)
  # shellcheck disable=SC2086  # PERF_ARGS is a list of options
  "$PY" -m lnbench.cli perf ${PERF_ARGS:---backend $BACKENDS --shapes 4096x4096,64x256 --dtype bf16} \
    --json "$TMP_DIR/runs/run-$i.json" --csv "$TMP_DIR/runs/run-$i.csv" >"$TMP_DIR/runs/run-$i.log" 2>&1
  grep -h "estimated time" "$TMP_DIR/runs/run-$i.log" | tee -a "$LOG"
  tail -2 "$TMP_DIR/runs/run-$i.log" | tee -a "$LOG"
  echo "wall $(( ($(date +%s%N) - start_ns) / 1000000 )) ms" | tee -a "$LOG"
  tar czf "$OUT_DIR/runs.tgz" -C "$TMP_DIR/runs" .      # after every run: a run cut short keeps what finished
done
"$PY" scripts/aa_gate.py "$TMP_DIR/runs" --out "$OUT_DIR/aa.json" 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
