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
  $PY - "$OUT_DIR/ncu-$cc.csv" <<'PYEOF'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no ncu rows"); raise SystemExit
head = rows[0]; idx = {k: i for i, k in enumerate(head)}
groups = {}
for r in rows[1:]:
    if r[idx["Metric Name"]] != "gpu__time_duration.sum":
        continue
    key = (r[idx["Kernel Name"]][:40], r[idx["Grid Size"]], r[idx["Metric Unit"]])
    groups.setdefault(key, []).append(float(r[idx["Metric Value"]].replace(",", "")))
for key, vals in groups.items():
    print(key, "n", len(vals), "median", statistics.median(vals[2:] or vals), "all", vals)
PYEOF
done
$PY scripts/device_kernel_isolation_probe.py --calls 60 2>&1 | tee "$OUT_DIR/probe.txt"
