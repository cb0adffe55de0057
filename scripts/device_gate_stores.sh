#!/usr/bin/env bash
# Issue 53's real data: an A/A series (one unchanged tree, RUNS runs) and a planted code slowdown (the same tree
# with the torch backward copying a quarter of dx again: more device work, the same values) of
#   lnbench perf --backend torch,liger --shapes 4096x4096,64x256 --dtype bf16
# on a GPU, each run's JSON kept for `lnbench store` (tests/data/gate-*.sqlite are built from them).
#   PHASE=aa|planted FIRST=1 RUNS=11 LIMIT_S=520 bash scripts/device_gate_stores.sh
# The code that runs is TREE (default .aa-tree: `git archive HEAD lnbench pyproject.toml`), committed into a
# fresh git repository with fixed dates, so commit A (and B, its planted child) has the same hash in every call.
# Writes $OUT/PHASE-FIRST.tgz (PHASE-NN.json) and $OUT/PHASE-FIRST.log; stops starting runs after LIMIT_S seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE="${PHASE:-aa}"; FIRST="${FIRST:-1}"; RUNS="${RUNS:-11}"; LIMIT_S="${LIMIT_S:-520}"; PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-results/gate-stores}"; TREE="${TREE:-.aa-tree}"
mkdir -p "$OUT_DIR"
WORK="$(mktemp -d)"; cp -r "$TREE" "$WORK/tree"; cd "$WORK/tree" || exit 1
export GIT_AUTHOR_NAME=lnbench GIT_AUTHOR_EMAIL=ci@lnbench GIT_COMMITTER_NAME=lnbench GIT_COMMITTER_EMAIL=ci@lnbench
export GIT_AUTHOR_DATE="2026-12-07T12:00:00Z" GIT_COMMITTER_DATE="2026-12-07T12:00:00Z"
git init -q -b main . && git add -A && git commit -qm "A: the tree as it is"
if [ "$PHASE" = planted ]; then
  "$PY" - <<'EOF'
from pathlib import Path
p = Path("lnbench/backends/torch_native.py")
src = p.read_text()
old = "        return dx, dw.to(weight.dtype), db.to(weight.dtype)\n"
new = ("        quarter = dx.shape[0] // 4                      # planted: a quarter of dx copied again\n"
       "        dx[:quarter].copy_(dx[:quarter].clone())\n" + old)
assert src.count(old) == 1
p.write_text(src.replace(old, new))
EOF
  export GIT_AUTHOR_DATE="2026-12-07T13:00:00Z" GIT_COMMITTER_DATE="2026-12-07T13:00:00Z"
  git commit -qam "B: planted slowdown of the torch backward"
fi
echo "commit $(git rev-parse --short HEAD) ($PHASE)" | tee "$OUT_DIR/$PHASE-$FIRST.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=200
export LNBENCH_RESULTS_DIR="$WORK/results"
RUN_DIR="$WORK/runs"; mkdir -p "$RUN_DIR"
start=$(date +%s)
for ((i = FIRST; i < FIRST + RUNS; i++)); do
  if (( $(date +%s) - start > LIMIT_S )); then echo "stopped before run $i (LIMIT_S)"; break; fi
  name=$(printf '%s-%02d.json' "$PHASE" "$i")
  t0=$(date +%s)
  "$PY" -m lnbench.cli perf --backend torch,liger --shapes 4096x4096,64x256 --dtype bf16 --quiet --no-csv \
    --json "$RUN_DIR/$name" 2>&1 | tail -1
  echo "$name: $(( $(date +%s) - t0 )) s"
done 2>&1 | tee -a "$OUT_DIR/$PHASE-$FIRST.log"
tar -C "$RUN_DIR" -czf "$OUT_DIR/$PHASE-$FIRST.tgz" $(cd "$RUN_DIR" && ls)
