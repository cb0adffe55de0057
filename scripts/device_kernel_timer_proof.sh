#!/usr/bin/env bash
# Issue 12's proof on a real GPU: kernel time from the profiler next to stream time.
# Run from the repository root:  OUT=/some/folder bash scripts/device_kernel_timer_proof.sh
# Needs PYTHONPATH such that `python3 -m lnbench.cli` imports this checkout, torch with a GPU (CUPTI on CUDA,
# roctracer on ROCm) and, if present, liger-kernel (without it only torch is timed).
# Writes into $OUT when set (else results/device-kernel-timer-proof), 7 files:
#   records.txt  the raw device records torch's profiler gives for one torch LayerNorm fwd and bwd (names,
#                activity types, durations) and one lnbench KernelTimer run with the stream held (spin excluded)
#   kt.csv kt.json   `lnbench perf ... --mode cold` with the kernel timer (default): stream, kernel, gap µs
#   nokt.json        the same command with --no-kernel-timer: stream-time medians must agree with kt.json's
#   abi.json         abi-compare --pair torch-entry --metric device: the device metric's kernel columns
#   summary.txt proof.log
# Expected run time on an H200: about 4-5 minutes.
set -uo pipefail

OUT_DIR="${OUT:-results/device-kernel-timer-proof}"
mkdir -p "$OUT_DIR"
TMP_DIR="$(mktemp -d)"
export LNBENCH_RESULTS_DIR="$TMP_DIR" PYTHONUNBUFFERED=1 COLUMNS=220
PY="${PYTHON:-python3}"
LOG="$OUT_DIR/proof.log"
SUMMARY="$OUT_DIR/summary.txt"
: >"$LOG"; : >"$SUMMARY"
CLI=("$PY" -m lnbench.cli)

{
  echo "== environment"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 || echo "nvidia-smi unavailable"
  "$PY" "$(dirname "$0")/device_env.py"
} 2>&1 | tee -a "$LOG"

step() {  # step NAME COMMAND... : run, log, record exit status and wall time
  local name="$1"; shift
  echo "== $name: $*" | tee -a "$LOG"
  local t0 t1 rc ms
  t0=$(date +%s%N)
  "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  printf '%-8s exit %s  wall %d.%03d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$SUMMARY"
}

records() {  # what the profiler records on this machine, and one KernelTimer run with the stream held
  $PY - <<'EOF'
import torch
from torch.profiler import ProfilerActivity, profile
from lnbench.measure.kernel_timer import KernelTimer, activities_from_events, device_activities
if not torch.cuda.is_available():
    raise SystemExit("no GPU: nothing to record")
dev = torch.device("cuda")
x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
w, b = torch.randn(4096, device=dev, dtype=torch.bfloat16), torch.randn(4096, device=dev, dtype=torch.bfloat16)
y, mean, rstd = torch.native_layer_norm(x, [4096], w, b, 1e-5)
dy = torch.randn_like(y)
bwd = lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [4096], mean, rstd, w, b, [True, True, True])
bwd(); torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    torch.native_layer_norm(x, [4096], w, b, 1e-5)
    bwd()
raw = prof.profiler.kineto_results.events()
print(f"{len(raw)} raw records (device_type | activity_type | µs | name):")
for e in raw:
    kind = e.activity_type() if hasattr(e, "activity_type") else "-"
    print(f"  {str(e.device_type()):18} {str(kind):14} {e.duration_ns() / 1e3:9.2f}  {e.name()[:150]}")
print("counted by lnbench:", [(a.kind, round(a.duration_ns / 1e3, 2), a.name[:80]) for a in device_activities(prof)])
timer = KernelTimer(dev)
print("helper (spin, flush) kernel names:", sorted(timer.helper_names()))
fwd = lambda: torch.native_layer_norm(x, [4096], w, b, 1e-5)
for name, fn in (("fwd", fwd), ("bwd", bwd)):
    rec = timer.run(fn, 100, clean=True, host_us_per_call=20.0)
    calls = rec["iters"]
    per_call = {k: (v["count"] / calls, round(v["ns"] / 1e3 / calls, 2)) for k, v in rec["names"].items()}
    print(f"KernelTimer {name} 4096x4096 bf16, {calls} isolated clean calls: {rec['total_ns'] / 1e3 / calls:.2f} µs/call "
          f"kernel, call window {rec['window_us']:.2f} µs traced / {rec['bare_window_us']:.2f} untraced, "
          f"{rec['count']} records, overlap {rec['overlap_ns']} ns, spin short {rec['spin_short']}; "
          f"per name (per call, µs): {per_call}")
EOF
}

# PROOF_SHAPES / PROOF_EXTRA let a CPU smoke test shrink the run; the H200 run uses neither.
SHAPES="${PROOF_SHAPES:-4096x4096,32768x8192}"
read -r -a EXTRA <<<"${PROOF_EXTRA:-}"
BACKENDS=torch
if $PY -c "import liger_kernel" 2>/dev/null; then BACKENDS=torch,liger; fi
echo "backends: $BACKENDS" | tee -a "$LOG" "$SUMMARY"
COLD=(perf --backend "$BACKENDS" --shapes "$SHAPES" --dtype bf16 --op fwd,bwd --mode cold --kernel-timer "${EXTRA[@]}")

step records records >"$OUT_DIR/records.txt"
step kt    "${CLI[@]}" "${COLD[@]}" --csv "$OUT_DIR/kt.csv" --json "$OUT_DIR/kt.json"
step nokt  "${CLI[@]}" "${COLD[@]}" --no-kernel-timer --csv "$TMP_DIR/nokt.csv" --json "$OUT_DIR/nokt.json"
step abi   "${CLI[@]}" abi-compare --pair torch-entry --runtime-only --metric device --op fwd,bwd --dtype bf16 \
           --shapes 32x1024,4096x4096 -P 3 -R 5 "${EXTRA[@]}" --csv "$TMP_DIR/abi.csv" --json "$OUT_DIR/abi.json"

# Summary: stream, kernel and gap µs per case against the ncu figures of issue 12, and the stream-time
# medians with and without the kernel timer (item 2: profiling must not move them).
$PY - "$OUT_DIR" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, math, sys
from pathlib import Path

out = Path(sys.argv[1])
# issue 12's figures, plus Liger fwd 32768x8192 from ncu on the H200 (2026-11-30, --clock-control none,
# --cache-control all; scripts/device_kernel_isolation_probe.sh)
NCU = {("torch", "fwd", "4096x4096"): 29.8, ("torch", "bwd", "4096x4096"): 60.3, ("liger", "fwd", "4096x4096"): 18.5,
       ("torch", "fwd", "32768x8192"): 434.3, ("liger", "fwd", "32768x8192"): 349.8}
SINGLE = {("torch", "fwd"), ("liger", "fwd")}   # issue 12: kernel time within 3 % of ncu for single-kernel ops
# ncu's gpu__time_duration is the activity record's duration plus a fixed ~1 µs per kernel (spin kernels of known
# cycle counts on the H200, scripts/device_ncu_offset_probe.sh: 1.61 µs + cycles/f under ncu, 0.62 µs + cycles/f
# in the records); "vs ncu-1" compares with ncu less that intercept per kernel
NCU_INTERCEPT_US = 0.99


def rows(name):
    path = out / f"{name}.json"
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text())
    return ({(r["backend"], r["op"], r["shape"]): r for r in data["rows"] if r["row_kind"] == "aggregate"},
            data.get("metadata", {}))


def num(value, fmt="8.2f"):
    if isinstance(value, (int, float)) and math.isfinite(value):
        return format(value, fmt)
    return "-".rjust(int(fmt.split(".")[0] or 1))


kt, meta = rows("kt")
nokt, _ = rows("nokt")
print(f"device {meta.get('device_name')}  driver {meta.get('driver')}  torch {meta.get('torch_version')}  "
      f"kernel timer {meta.get('kernel_timer')}")
print(f"clocks before {meta.get('clocks_before')}\nclocks after  {meta.get('clocks_after')}")
print(f"{'backend':7} {'op':3} {'shape':10} {'stream':>8} {'kernel':>8} {'gap':>7} {'k/call':>6} {'ncu':>7} "
      f"{'k-ncu %':>7} {'check':>5} {'vs ncu-1':>8} | {'no-kt':>8} {'diff %':>6} {'target':>6} {'check':>5} | {'k spread':>13} "
      f"{'prof. ev':>8}  kernel status / names")
for key, r in kt.items():
    stream, kernel = r.get("median_us"), r.get("kernel_us")
    ref = NCU.get(key)
    dk = (kernel - ref) / ref * 100 if ref and isinstance(kernel, (int, float)) else float("nan")
    kcheck = "" if (key[0], key[1]) not in SINGLE or not math.isfinite(dk) else ("ok" if abs(dk) <= 3 else "OVER")
    ncu_less = ref - NCU_INTERCEPT_US * (r.get("kernels_per_call") or 1) if ref else float("nan")
    adj = (kernel - ncu_less) / ncu_less * 100 if math.isfinite(dk) else float("nan")
    other = nokt.get(key, {}).get("median_us")
    ok = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (stream, other))
    diff = (stream - other) / other * 100 if ok else float("nan")
    target = 1.0 if key[2] == "32768x8192" else 3.0
    scheck = "" if not ok else ("ok" if abs(diff) <= target else "OVER")
    spread = f"{num(r.get('kernel_min_us'), '.2f')}-{num(r.get('kernel_max_us'), '.2f')}"
    names = json.loads(r.get("kernel_names") or "{}")
    short = "; ".join(f"{v['per_call']:g}x {v['us']:.2f} µs {n[:60]}" for n, v in names.items())
    print(f"{key[0]:7} {key[1]:3} {key[2]:10} {num(stream)} {num(kernel)} {num(r.get('gap_us'), '7.2f')} "
          f"{num(r.get('kernels_per_call'), '6.2g')} {num(ref, '7.1f')} {num(dk, '7.2f')} {kcheck:>5} {num(adj, '8.2f')} | "
          f"{num(other)} {num(diff, '6.2f')} {target:6.0f} {scheck:>5} | {spread:>13} "
          f"{num(r.get('kernel_window_us'))}  {r.get('kernel_status')} {r.get('status')}; {short}")
    if r.get("kernel_note"):
        print(f"    note: {r['kernel_note']}")
abi = out / "abi.json"
if abi.exists():
    print("abi-compare torch-entry, device metric (µs: event time / kernel time / gap; kernel speed-up [CI]):")
    for r in json.loads(abi.read_text())["rows"]:
        if r.get("metric") != "device":
            continue
        print(f"  {r['op']:3} {r['shape']:10} tensor {num(r.get('tensor_us'))} / {num(r.get('tensor_kernel_us'))} / "
              f"{num(r.get('tensor_gap_us'), '6.2f')}  pointer {num(r.get('pointer_us'))} / "
              f"{num(r.get('pointer_kernel_us'))} / {num(r.get('pointer_gap_us'), '6.2f')}  "
              f"kernel {num(r.get('kernel_speedup'), '.3f')} [{num(r.get('kernel_ci_low'), '.3f')}, "
              f"{num(r.get('kernel_ci_high'), '.3f')}] {r.get('kernel_verdict')}  "
              f"{r.get('status')} / {r.get('tensor_kernel_status')}")
EOF
echo "== summary" | tee -a "$LOG"
cat "$SUMMARY" >>"$LOG"
rm -rf "$TMP_DIR"
