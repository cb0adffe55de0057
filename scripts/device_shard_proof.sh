#!/usr/bin/env bash
# Issue 21's proofs on an NVIDIA GPU host (torch and Liger, bf16, fwd and bwd, cold and hot):
#   STEP=shards   one unsharded perf run, then --shard 1/2 and 2/2, merged, and the merged result compared with
#                 the unsharded one (same case set; every case SAME is the goal)
#   STEP=devices  --devices 0 (the spread path: workers that see only their GPU through CUDA_VISIBLE_DEVICES)
#                 compared with the unsharded run; then the same run with the host loaded by CPU work (two
#                 `lnbench perf --device cpu` loops, standing in for the host side of other GPUs' timing)
#                 compared with it: which cases the host moves, by bytes per call (the alone threshold)
#   STEP=host     one idle run (each case's host_fraction), then the host-loaded run compared with it
#   STEP=gpus     on a host with two or more GPUs: the set on one GPU vs on all (--devices all), wall time and
#                 compare (issue 21's two-GPU proof; SHAPES defaults to the `sweep` set plus two launch-bound
#                 shapes there). STEP=gpus-one and STEP=gpus-all run its two halves in separate calls
#                 (compare the two JSON files afterwards: lnbench compare one-gpu.json all-gpus.json); a second
#                 gpus-one with NAME=one-gpu-2 is the A/A control (how often two one-GPU runs differ)
# Run from the repository root:  STEP=shards bash scripts/device_shard_proof.sh   (OUT: the output folder)
# STEP=devices and STEP=gpus compare with $BASE (default: $OUT/whole.json from STEP=shards).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS="${COLUMNS:-200}"
OUT_DIR="${OUT:-results/shard-proof}"
STEP="${STEP:-shards}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
TMP_DIR="$(mktemp -d)"
trap 'rm -rf "$TMP_DIR"; kill $(jobs -p) 2>/dev/null' EXIT
export LNBENCH_RESULTS_DIR="$TMP_DIR"
LOG="$OUT_DIR/$STEP.log"
: >"$LOG"
BACKENDS=torch
if "$PY" -c "import liger_kernel" 2>/dev/null; then BACKENDS=torch,liger; fi
# launch-bound (64x256, 37x1000, 256x4096: 2^14..2^20 elements) and M·N = 2^24 sweep shapes across the widths
SHAPES="${SHAPES:-64x256,37x1000,256x4096,65536x256,16384x1024,4096x4096,1024x16384,256x65536,21845x768}"
case "$STEP" in gpus*) SHAPES="${GPU_SHAPES:-64x256,37x1000,65536x256,32768x512,16384x1024,8192x2048,4096x4096,2048x8192,1024x16384,512x32768,256x65536,21845x768,16777x1000,3277x5120,1365x12288}" ;; esac
PERF=("$PY" -m lnbench.cli perf --backend "$BACKENDS" --dtype bf16 --op fwd,bwd --mode cold,hot --shapes "$SHAPES" -q)
BASE="${BASE:-$OUT_DIR/whole.json}"

step() {  # step NAME COMMAND...: run it, log it, record its exit status and wall time
  local name="$1"; shift
  local t0 t1
  t0=$(date +%s%N)
  { echo "== $name: $*"; "$@" 2>&1; echo "exit $?"; } | tee -a "$LOG" | tail -4
  t1=$(date +%s%N)
  echo "$name wall $(( (t1 - t0) / 1000000 )) ms" | tee -a "$LOG"
}

{ nvidia-smi --query-gpu=index,name,driver_version --format=csv 2>&1; nproc; echo "backends $BACKENDS"; } | tee -a "$LOG"
step peak "$PY" -m lnbench.cli peak
case "$STEP" in
  shards)
    step whole "${PERF[@]}" --json "$OUT_DIR/whole.json"
    step shard1 "${PERF[@]}" --shard 1/2 --json "$TMP_DIR/s1.json"
    step shard2 "${PERF[@]}" --shard 2/2 --json "$TMP_DIR/s2.json"
    step merge "$PY" -m lnbench.cli merge "$TMP_DIR/s1.json" "$TMP_DIR/s2.json" --json "$OUT_DIR/merged.json"
    step compare "$PY" -m lnbench.cli compare "$BASE" "$OUT_DIR/merged.json" --json "$OUT_DIR/compare-merged.json" ;;
  devices|host)
    if [ "$STEP" = devices ]; then
      step devices0 "${PERF[@]}" --devices 0 --json "$OUT_DIR/devices0.json"
      step compare0 "$PY" -m lnbench.cli compare "$BASE" "$OUT_DIR/devices0.json" --json "$OUT_DIR/compare-devices0.json"
    else     # host: each case's host_fraction on an idle host, the base of the loaded run
      step idle "${PERF[@]}" --json "$OUT_DIR/idle.json"
      BASE="$OUT_DIR/idle.json"
    fi
    for i in 1 2; do   # host load: CPU LayerNorm timing loops, as long as the loaded run lasts
      ( while true; do "$PY" -m lnbench.cli perf --device cpu --backend torch --shapes 2048x2048 --mode hot \
          --op fwd -P 1 -q --no-csv --if-loaded warn >/dev/null 2>&1; done ) &
    done
    sleep 5
    step loaded "${PERF[@]}" --json "$OUT_DIR/loaded.json" --if-loaded warn
    kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
    step compare-loaded "$PY" -m lnbench.cli compare "$BASE" "$OUT_DIR/loaded.json" --json "$OUT_DIR/compare-loaded.json" ;;
  gpus|gpus-one|gpus-all)
    [ "$STEP" != gpus-all ] && step one-gpu "${PERF[@]}" --devices 0 --json "$OUT_DIR/${NAME:-one-gpu}.json"
    [ "$STEP" != gpus-one ] && step all-gpus "${PERF[@]}" --devices all --json "$OUT_DIR/all-gpus.json"
    if [ "$STEP" = gpus ]; then
      step compare-gpus "$PY" -m lnbench.cli compare "$OUT_DIR/one-gpu.json" "$OUT_DIR/all-gpus.json" \
        --json "$OUT_DIR/compare-gpus.json"
      step verify-gpus "$PY" -m lnbench.cli verify --devices all --backend torch --dtype bf16,f32 \
        --shapes 64x256,3x257,4096x1024 -q --json "$OUT_DIR/verify-gpus.json"
    fi ;;
  *) echo "unknown STEP $STEP (shards, devices, gpus)"; exit 2 ;;
esac
