#!/usr/bin/env bash
# Issue 31 item 7 on an NVIDIA GPU: the counters the floors need (DRAM bytes, warp-instructions in all and on
# the busiest SM, grid, block) and the kernel time, from Nsight Compute, for torch's and Liger's LayerNorm over
# the sweep set (scripts/ncu_floors_workload.py). Caches are flushed before every profiled launch (cold, like
# the floors' memory term) and the clocks are left alone (--clock-control none).
#   OUT=/folder bash scripts/device_ncu_floors.sh        (PYTHONPATH must import this checkout)
# Writes ncu.csv, ncu.err and cases.txt; scripts/ncu_floors_table.py OUT turns them into the table.
set -uo pipefail
OUT_DIR="${OUT:-results/device-ncu-floors}"; mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
BACKENDS="${BACKENDS:-torch,liger}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$OUT_DIR/gpu.txt"
ncu --version | tail -1 | tee -a "$OUT_DIR/gpu.txt"
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum
METRICS=$METRICS,sm__inst_executed.max,launch__grid_size,launch__block_size,launch__registers_per_thread
METRICS=$METRICS,sm__cycles_elapsed.avg.per_second,launch__waves_per_multiprocessor
timeout 420 ncu --profile-from-start off --clock-control none --cache-control all --print-units base --metrics "$METRICS" --csv \
  "$PY" scripts/ncu_floors_workload.py "$BACKENDS" >"$OUT_DIR/ncu.raw" 2>"$OUT_DIR/ncu.err"
echo "ncu exit $?"
grep '^case ' "$OUT_DIR/ncu.raw" >"$OUT_DIR/cases.txt"
grep -v '^case ' "$OUT_DIR/ncu.raw" | grep -v '^==' >"$OUT_DIR/ncu.csv"
wc -l "$OUT_DIR/cases.txt" "$OUT_DIR/ncu.csv"
tail -3 "$OUT_DIR/ncu.err"
