#!/usr/bin/env bash
# Issue 32 item 6 on a GPU: the same default `lnbench perf --shapes 4096x4096` RUNS times in a row (default 30),
# each run's JSON kept, for `lnbench store` + `lnbench history` on this machine: nothing changes between the runs,
# so every change point history finds in them is a false one (and a planted step in a copy must be found).
#   OUT=/folder RUNS=30 LIMIT_S=540 bash scripts/device_aa_history.sh     (about 15 s a run on an NVIDIA H200)
# Writes OUT/aa-runs.tgz (run-NN.json) and OUT/aa.log; stops starting runs after LIMIT_S seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=200
OUT_DIR="${OUT:-results/aa-history}"; RUNS="${RUNS:-30}"; LIMIT_S="${LIMIT_S:-540}"; PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"; RUN_DIR="$(mktemp -d)"
export LNBENCH_RESULTS_DIR="$RUN_DIR/results"
start=$(date +%s)
for i in $(seq -w 1 "$RUNS"); do
  if (( $(date +%s) - start > LIMIT_S )); then echo "stopped after $((10#$i - 1)) runs (LIMIT_S)"; break; fi
  $PY -m lnbench.cli perf --shapes 4096x4096 --quiet --no-csv --json "$RUN_DIR/run-$i.json" 2>&1 | tail -1
done | tee "$OUT_DIR/aa.log"
tar -C "$RUN_DIR" -czf "$OUT_DIR/aa-runs.tgz" $(cd "$RUN_DIR" && ls run-*.json)
ls "$RUN_DIR" | grep -c run- | sed 's/^/runs kept: /' | tee -a "$OUT_DIR/aa.log"
