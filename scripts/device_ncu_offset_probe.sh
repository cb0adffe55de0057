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
  $PY - "$OUT_DIR/ncu-cache-$cc.csv" <<'PYEOF'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no ncu rows"); raise SystemExit
head = rows[0]; idx = {k: i for i, k in enumerate(head)}
by_id = {}
for r in rows[1:]:
    entry = by_id.setdefault(int(r[idx["ID"]]), {"name": r[idx["Kernel Name"]][:60], "grid": r[idx["Grid Size"]]})
    entry[r[idx["Metric Name"]]] = (float(r[idx["Metric Value"]].replace(",", "")), r[idx["Metric Unit"]])
groups = []   # consecutive launches of one kernel name + grid = one workload (13 calls)
for i in sorted(by_id):
    e = by_id[i]
    key = (e["name"], e["grid"])
    if not groups or groups[-1][0] != key or len(groups[-1][1]) >= 13:
        groups.append((key, []))
    groups[-1][1].append(e)
for key, items in groups:
    tail = items[1:] if len(items) > 2 else items
    def med(metric):
        vals = [it[metric][0] for it in tail if metric in it]
        return (statistics.median(vals), tail[0][metric][1]) if vals else (float("nan"), "")
    t, tu = med("gpu__time_duration.sum"); f, fu = med("sm__cycles_elapsed.avg.per_second")
    d, du = med("dram__cycles_elapsed.avg.per_second")
    times = [it["gpu__time_duration.sum"][0] for it in tail if "gpu__time_duration.sum" in it]
    print(f"{key[0][:50]:50} {key[1]:14} n={len(tail):2} time {t:10.1f} {tu} (min {min(times):.1f} max {max(times):.1f})"
          f"  sm clock {f:8.1f} {fu}  dram clock {d:8.1f} {du}")
PYEOF
  tail -3 "$OUT_DIR/ncu-cache-$cc.err"
done
$PY scripts/device_ncu_offset_probe.py --mode cupti 2>&1 | tee "$OUT_DIR/cupti.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
