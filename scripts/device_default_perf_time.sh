#!/usr/bin/env bash
# Issue 10 item 10 on a GPU: wall time of the default `lnbench perf --shapes 4096x4096` (kernel timer off) and
# with --kernel-timer, whether the kernel timer moves stream times (4096x4096; launch-bound 64x256 hot, twice
# each, interleaved: this also shows how much launch-bound hot times vary between invocations).
# OUT=/folder bash scripts/device_default_perf_time.sh   (about 2-3 minutes on an H200)
set -uo pipefail
OUT_DIR="${OUT:-results/device-default-perf-time}"; mkdir -p "$OUT_DIR"
export LNBENCH_RESULTS_DIR="$OUT_DIR" COLUMNS=200 PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
timed() {  # timed NAME COMMAND...
  local name="$1"; shift; local t0 t1
  t0=$(date +%s%N); "$@" >"$OUT_DIR/$name.txt" 2>&1; local rc=$?; t1=$(date +%s%N)
  printf '%-12s exit %s wall %6.2f s | %s\n' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))e-3" "$(tail -1 "$OUT_DIR/$name.txt")"
}
timed default-kt   $PY -m lnbench.cli perf --shapes 4096x4096 --kernel-timer --json "$OUT_DIR/default-kt.json"
timed default      $PY -m lnbench.cli perf --shapes 4096x4096 --json "$OUT_DIR/default.json"
# the same where Python may keep compiled bytecode: if this machine forbids writing it
# (PYTHONDONTWRITEBYTECODE) and torch ships without it, every process compiles ~1,600 modules (~3 s)
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-<unset>}"
( unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX="$(mktemp -d)"
  $PY -c "import torch, torch.profiler, pandas, rich, click, lnbench.cli, lnbench.perf.worker_main" 2>/dev/null
  timed default-pyc $PY -m lnbench.cli perf --shapes 4096x4096 --kernel-timer --json "$OUT_DIR/default-pyc.json" )
# launch-bound hot calls with the profiler set up at start-up (kt) or never (nokt), twice each, interleaved
for rep in 1 2; do
  timed small-kt$rep   $PY -m lnbench.cli perf --shapes 64x256 --op fwd,bwd --mode hot --kernel-timer --json "$OUT_DIR/small-kt$rep.json"
  timed small-nokt$rep $PY -m lnbench.cli perf --shapes 64x256 --op fwd,bwd --mode hot --json "$OUT_DIR/small-nokt$rep.json"
done
$PY - "$OUT_DIR" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def agg(name):
    d = json.loads((out / f"{name}.json").read_text())
    return {(r["op"], r["shape"], r["mode"]): r for r in d["rows"] if r["row_kind"] == "aggregate"}, d["workers"]
for a, b in (("default-kt", "default"), ("default-pyc", "default"), ("small-kt1", "small-nokt1"),
             ("small-kt2", "small-nokt2"), ("small-kt1", "small-kt2"), ("small-nokt1", "small-nokt2")):
    ra, wa = agg(a); rb, wb = agg(b)
    print(f"{a} vs {b}: stream median µs (kt / no kt / diff %), kernel µs")
    for key in ra:
        x, y = ra[key]["median_us"], rb[key]["median_us"]
        print(f"  {key}: {x:.3f} / {y:.3f} / {100 * (x - y) / y:+.2f}%  kernel {ra[key].get('kernel_us')}")
    for w in wa:
        print("   worker", w["index"], {k: w.get(k) for k in ("startup_s", "stream_s", "kernel_s", "duration_s")})
PYEOF
