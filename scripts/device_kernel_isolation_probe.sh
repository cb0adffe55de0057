#!/usr/bin/env bash
# Issue 12 probe on the H200: ncu (clocks left alone, caches flushed) next to the profiler variants of
# scripts/device_kernel_isolation_probe.py. OUT=/folder bash scripts/device_kernel_isolation_probe.sh
set -uo pipefail
OUT_DIR="${OUT:-results/device-kernel-isolation-probe}"; mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv
$PY "$(dirname "$0")/device_env.py"
for cc in none base; do
  timeout 240 ncu --clock-control "$cc" --cache-control all -k regex:layer_norm --metrics gpu__time_duration.sum \
    --csv $PY scripts/ncu_layernorm_fwd.py >"$OUT_DIR/ncu-$cc.csv" 2>"$OUT_DIR/ncu-$cc.err"
  echo "ncu clock-control $cc exit $?"
  $PY scripts/ncu_csv_summary.py "$OUT_DIR/ncu-$cc.csv"
done
$PY scripts/device_kernel_isolation_probe.py --calls 60 2>&1 | tee "$OUT_DIR/probe.txt"
