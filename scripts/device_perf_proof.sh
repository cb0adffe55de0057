#!/usr/bin/env bash
# Issue 4's "proof on a real GPU": lnbench peak, then the same cold perf run twice, then one default run.
# Run from the repository root:  bash scripts/device_perf_proof.sh
# Needs PYTHONPATH such that `python3 -m lnbench.cli` imports this checkout, torch with a GPU, triton, and
# liger-kernel (carried as a wheel). Writes into $OUT when set (else results/device-proof):
#   peak.json perf1.csv perf1.json perf2.json default.json summary.txt proof.log   (7 files)
# Expected run time on an H200: about 3-4 minutes.
set -uo pipefail

OUT_DIR="${OUT:-results/device-proof}"
mkdir -p "$OUT_DIR"
TMP_DIR="$(mktemp -d)"
export LNBENCH_RESULTS_DIR="$OUT_DIR"   # peak.json is cached (and read back by perf) here
export PYTHONUNBUFFERED=1 COLUMNS=200
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
  local t0 t1 rc
  t0=$(date +%s%N)
  "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  printf '%-8s exit %s  wall %d.%03d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$SUMMARY"
}

# PROOF_SHAPES / PROOF_DEFAULT_SHAPES / PROOF_EXTRA let a CPU smoke test shrink the run; the H200 run uses none.
SHAPES="${PROOF_SHAPES:-4096x4096,32768x8192}"
DEFAULT_SHAPES="${PROOF_DEFAULT_SHAPES:-4096x4096}"
read -r -a EXTRA <<<"${PROOF_EXTRA:-}"
COLD=(perf --backend torch,compile,liger --shapes "$SHAPES" --dtype bf16 --op fwd,bwd --mode cold "${EXTRA[@]}")
step peak    "${CLI[@]}" peak
step perf1   "${CLI[@]}" "${COLD[@]}" --csv "$OUT_DIR/perf1.csv" --json "$OUT_DIR/perf1.json"
step perf2   "${CLI[@]}" "${COLD[@]}" --csv "$TMP_DIR/perf2.csv" --json "$OUT_DIR/perf2.json"
step default "${CLI[@]}" perf --shapes "$DEFAULT_SHAPES" "${EXTRA[@]}" --csv "$TMP_DIR/default.csv" --json "$OUT_DIR/default.json"

# Compact comparison: headline medians of the two identical invocations, GB/s and % of measured peak.
$PY - "$OUT_DIR" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, math, sys
from pathlib import Path

out = Path(sys.argv[1])

def agg(name):
    path = out / f"{name}.json"
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text())
    rows = {(r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]): r
            for r in data["rows"] if r["row_kind"] == "aggregate"}
    return rows, data.get("metadata", {})

def num(value, fmt):
    if isinstance(value, (int, float)) and math.isfinite(value):
        return format(value, fmt)
    width = "".join(ch for ch in fmt.split(".")[0] if ch.isdigit())
    return "-".rjust(int(width or 1))

peak = {}
if (out / "peak.json").exists():
    peak = json.loads((out / "peak.json").read_text())
for device, rec in peak.items():
    print(f"peak {device}: {rec['gbps']:.1f} GB/s (copy of {rec['copy_bytes'] / 2**20:.0f} MiB)")
one, meta = agg("perf1")
two, _ = agg("perf2")
print(f"device {meta.get('device_name')}  driver {meta.get('driver')}  clocks {meta.get('clocks_before')}")
print(f"{'backend':8} {'op':4} {'shape':11} {'run1 µs':>10} {'run2 µs':>10} {'diff %':>7} {'target':>6} "
      f"{'GB/s':>8} {'% peak':>7} {'x torch':>7} {'w-spread%':>9}  status")
for key, a in one.items():
    b = two.get(key, {})
    m1, m2 = a.get("median_us"), b.get("median_us")
    ok = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (m1, m2))
    diff = abs(m2 - m1) / m1 * 100 if ok else float("nan")
    target = 1.0 if key[3] == "32768x8192" else 3.0  # issue 4: <= 1 % at 32768x8192, <= 3 % at 4096x4096
    verdict = "" if not ok else ("ok" if diff <= target else "OVER")
    print(f"{key[0]:8} {key[1]:4} {key[3]:11} {num(m1, '10.2f')} {num(m2, '10.2f')} {num(diff, '7.2f')} "
          f"{target:6.0f} {num(a.get('gbps'), '8.1f')} {num(a.get('pct_peak'), '7.1f')} "
          f"{num(a.get('speedup'), '7.3f')} {num(a.get('spread_pct'), '9.2f')}  {a.get('status')} {verdict}")
default, dmeta = agg("default")
if default:
    print(f"default perf: {len(default)} cases, {dmeta.get('wall_s')} s in workers (whole command: see 'default' above)")
    for key, r in default.items():
        print(f"  {' '.join(key)}: {num(r.get('median_us'), '.2f')} µs, {num(r.get('gbps'), '.1f')} GB/s, "
              f"{num(r.get('pct_peak'), '.1f')} % peak, {r.get('status')}")
EOF
echo "== summary" | tee -a "$LOG"
cat "$SUMMARY" >>"$LOG"
rm -rf "$TMP_DIR"
