#!/usr/bin/env bash
# H200 proof of the `lnbench abi-compare` runtime machinery (issue 5), with the torch stand-in pairs.
# FlyDSL is not installed there (and it is not an AMD GPU), so:
#   1. torch-entry: the same ATen LayerNorm kernel through two Python entry points (OpOverload vs C
#      binding), default shapes, fwd / fwd-nostats / bwd, P=3 × R=5, direct + wrapper + device.
#      Expect: forward outputs bitwise identical (checks pass), a host-overhead difference in `direct`
#      and `wrapper` on small shapes, `same` for `device` and at 4096x4096.
#   2. planted-slow: the "pointer" side spins 20 µs extra per call; must come out `slower`, and
#      --fail-if-slower 5 must exit 1 (the gate works on a real GPU).
#   3. the static part degrades to "not run (flydsl not installed)" rows, exit 0.
# Run from the repository root: bash scripts/device_abi_proof.sh   (writes CSV/JSON under $OUT, else results/)
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS="${COLUMNS:-220}"
OUT_DIR="${OUT:-results}"
mkdir -p "$OUT_DIR"

LNB=(python3 -m lnbench.cli abi-compare)

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>/dev/null || true
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name())"

status=0
echo "=== 1/3 torch-entry pair: P=3 x R=5, default shapes, fwd,fwd-nostats,bwd"
start=$(date +%s)
"${LNB[@]}" --pair torch-entry --runtime-only --op fwd,fwd-nostats,bwd -P 3 -R 5 \
  --csv "$OUT_DIR/abi-torch-entry.csv" --json "$OUT_DIR/abi-torch-entry.json"
rc=$?; echo "exit=$rc (expect 0) in $(( $(date +%s) - start )) s"; [ "$rc" -eq 0 ] || status=1

echo "=== 2/3 planted-slow pair with --fail-if-slower 5 (expect verdict slower, exit 1)"
start=$(date +%s)
"${LNB[@]}" --pair planted-slow --runtime-only --op fwd --shapes 32x1024,4096x4096 -P 2 -R 5 \
  --planted-delay-us 20 --fail-if-slower 5 \
  --csv "$OUT_DIR/abi-planted-slow.csv" --json "$OUT_DIR/abi-planted-slow.json"
rc=$?; echo "exit=$rc (expect 1) in $(( $(date +%s) - start )) s"; [ "$rc" -eq 1 ] || status=1

echo "=== 3/3 static part without flydsl (expect 'not run (flydsl not installed)' rows, exit 0)"
"${LNB[@]}" --pair flydsl --static-only --arch gfx942,gfx950 --dtype bf16 --shapes 1x1024,1x4096,1x8192 \
  --csv "$OUT_DIR/abi-static.csv"
rc=$?; echo "exit=$rc (expect 0)"; [ "$rc" -eq 0 ] || status=1

echo "proof status: $status (0 = every step behaved as expected)"
exit "$status"
