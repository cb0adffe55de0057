#!/usr/bin/env bash
# Issue 11's proof on a GPU: `lnbench compare` and `lnbench plot` on real perf results.
#   1. lnbench peak (cached in a temp folder, so perf's % peak is filled in)
#   2. two honest runs of the same cold perf command (torch, + liger when liger-kernel is installed)
#   3. compare run 1 → run 2 with --fail-if-slower 5          expect: SAME everywhere, exit 0
#   4. run 2 with a planted 10% slowdown on torch bwd (the largest shape), compared to run 1
#                                                               expect: that case SLOWER, exit 1
#   5. lnbench plot: GB/s by shape of run 1, the honest ratios, the planted ratios (needs matplotlib;
#      without it the step says so and the PNGs can be drawn later from the JSON files)
# Run from the repository root on a CUDA box:  OUT=/some/folder bash scripts/device_compare_proof.sh
# Writes these 8 files into $OUT (else results/compare-proof):
#   perf1.json perf2.json compare.json compare.md perf1-bf16-cold.png compare-ratios.png planted-ratios.png proof.log
# The script's exit status is 0 when every step behaved as expected.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 COLUMNS="${COLUMNS:-200}"

OUT_DIR="${OUT:-results/compare-proof}"
mkdir -p "$OUT_DIR"
TMP_DIR="$(mktemp -d)"
trap 'rm -rf "$TMP_DIR"' EXIT
export LNBENCH_RESULTS_DIR="$TMP_DIR"        # peak.json and the CSVs nobody asked for stay out of $OUT
PY="${PYTHON:-python3}"
CLI=("$PY" -m lnbench.cli)
LOG="$OUT_DIR/proof.log"
: >"$LOG"
status=0

# PROOF_SHAPES / PROOF_EXTRA shrink the run for a CPU smoke test; the GPU run uses neither.
SHAPES="${PROOF_SHAPES:-4096x4096,32768x8192}"
read -r -a EXTRA <<<"${PROOF_EXTRA:-}"
PLANT_SHAPE="${SHAPES##*,}"
PLANT_CASE="torch bwd bf16 $PLANT_SHAPE cold"

log() { echo "$*" | tee -a "$LOG"; }

step() {  # step NAME EXPECTED_EXIT COMMAND... : run, log, compare the exit status with the expected one
  local name="$1" want="$2"; shift 2
  log "== $name: $*"
  local t0 rc
  t0=$(date +%s)
  "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  log "-- $name: exit $rc (expect $want) in $(( $(date +%s) - t0 )) s"
  [ "$rc" -eq "$want" ] || status=1
  return 0
}

{
  echo "== environment"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 \
    || echo "nvidia-smi unavailable"
  "$PY" scripts/device_env.py
} 2>&1 | tee -a "$LOG"

BACKENDS=torch
if "$PY" -c "import liger_kernel" 2>/dev/null; then BACKENDS=torch,liger; else log "liger-kernel not installed: torch only"; fi
PERF=(perf --backend "$BACKENDS" --shapes "$SHAPES" --dtype bf16 --op fwd,bwd --mode cold "${EXTRA[@]}")

step peak 0 "${CLI[@]}" peak
step perf1 0 "${CLI[@]}" "${PERF[@]}" --csv "$TMP_DIR/perf1.csv" --json "$OUT_DIR/perf1.json"
step perf2 0 "${CLI[@]}" "${PERF[@]}" --csv "$TMP_DIR/perf2.csv" --json "$OUT_DIR/perf2.json"
step honest 0 "${CLI[@]}" compare "$OUT_DIR/perf1.json" "$OUT_DIR/perf2.json" --fail-if-slower 5 \
  --md "$OUT_DIR/compare.md" --csv "$TMP_DIR/compare.csv" --json "$OUT_DIR/compare.json"
step plant 0 "$PY" -m lnbench.compare.planted "$OUT_DIR/perf2.json" "$TMP_DIR/perf2-planted.json" \
  --factor 1.10 --case "$PLANT_CASE"
step planted 1 "${CLI[@]}" compare "$OUT_DIR/perf1.json" "$TMP_DIR/perf2-planted.json" --fail-if-slower 5 \
  --md "$TMP_DIR/planted.md" --csv "$TMP_DIR/planted.csv" --json "$TMP_DIR/planted.json"
if "$PY" -c "import matplotlib" 2>/dev/null; then
  step plot 0 "${CLI[@]}" plot "$OUT_DIR/perf1.json" "$OUT_DIR/compare.json" "$TMP_DIR/planted.json" --out "$OUT_DIR"
else
  log "== plot: matplotlib not installed here; draw the PNGs elsewhere from the JSON files:"
  log "   lnbench plot perf1.json compare.json   (and a planted compare rerun from perf2.json)"
fi

# What the issue's closing note needs: the verdicts of both comparisons, per case.
"$PY" - "$OUT_DIR/compare.json" "$TMP_DIR/planted.json" "$PLANT_CASE" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
from pathlib import Path
honest, planted, plant_case = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
for title, path in (("honest run1 -> run2", honest), ("planted 10% on " + plant_case, planted)):
    if not path.exists():
        print(f"== {title}: no result"); continue
    rows = json.loads(path.read_text())["rows"]
    print(f"== {title}")
    for r in rows:
        case = " ".join(str(r[k]) for k in ("backend", "op", "dtype", "shape", "mode"))
        ratio = f"{r['ratio']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]" if r.get("ratio") is not None else "-"
        print(f"  {case:40} {ratio:28} {r['verdict']}")
rows = json.loads(honest.read_text())["rows"] if honest.exists() else []
verdicts = {r["verdict"] for r in rows if r["verdict"] in ("SAME", "SLOWER", "FASTER")}
print("honest comparison SAME everywhere:", verdicts == {"SAME"})
sys.exit(0 if verdicts == {"SAME"} else 1)
EOF
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
log "proof status: $status (0 = every step exited as expected)"
ls -la "$OUT_DIR" | tee -a "$LOG"
exit "$status"
