#!/usr/bin/env bash
# Issue 12 probe on the H200: the same workloads under ncu (caches flushed by ncu, then by lnbench's flush
# alone) and under torch's profiler, to tell a fixed ncu offset from an SM-clock difference.
# OUT=/folder bash scripts/device_ncu_offset_probe.sh   (PYTHONPATH must import this checkout)
set -uo pipefail
OUT_DIR="${OUT:-results/device-ncu-offset-probe}"; mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,persistence_mode --format=csv
$PY "$(dirname "$0")/device_env.py"
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__cycles_elapsed.avg.per_second
for cc in all none; do
  timeout 200 ncu --clock-control none --cache-control "$cc" -k 'regex:layer_norm|FillFunctor|copy_kernel|spin_kernel' \
    --metrics "$METRICS" --csv $PY scripts/device_ncu_offset_probe.py --mode ncu \
    >"$OUT_DIR/ncu-cache-$cc.csv" 2>"$OUT_DIR/ncu-cache-$cc.err"
  echo "ncu cache-control $cc exit $?"
  $PY scripts/ncu_csv_summary.py "$OUT_DIR/ncu-cache-$cc.csv" --group 13
  tail -3 "$OUT_DIR/ncu-cache-$cc.err"
done
$PY scripts/device_ncu_offset_probe.py --mode cupti 2>&1 | tee "$OUT_DIR/cupti.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
