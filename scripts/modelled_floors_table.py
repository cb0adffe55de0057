"""Markdown tables of modelled floors from `lnbench perf --device emu ... --json` results (docs/measurements.md).

    python scripts/modelled_floors_table.py sweep-gfx942.json sweep-gfx950.json [--mode cold]

One table per op and arch: a row per N, per target and backend the case's bound_us (summed over its launches),
what bounds it (the largest launch's bound_by) and the largest other floor over the memory floor, per launch
(the worst launch) and, for an op of several launches (lnbench's backward: main + partial reduce), op-level too:
each floor class summed over the op's launches, the largest other sum over the memory sum. The issue's goal for
lnbench's kernels is `memory` with that ratio at most 0.5.
"""
from __future__ import annotations

import argparse

import pandas as pd

from lnbench.output import markdown
from lnbench.results import FLOOR_COLUMNS, load_result
from lnbench.output.tables import Column

OTHER = [c for c in FLOOR_COLUMNS if c not in ("memory_us", "bound_us")]


KEYS = ["backend", "op", "target", "N"]


def case_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A row per case: bound_us summed over its launches, bound_by of the largest launch, `ratio` (the worst
    launch's largest other floor / its memory floor), `op_ratio` (Σ over the launches of each other floor class,
    the largest, / Σ memory floors) and `launches`."""
    frame = frame.copy()
    other = [c for c in OTHER if c in frame]
    frame["other_over_memory"] = frame[other].max(axis=1) / frame["memory_us"]
    sums = frame.groupby(KEYS, sort=False)[["memory_us", *other]].sum(min_count=1)
    op_ratio = (sums[other].max(axis=1) / sums["memory_us"]).rename("op_ratio").reset_index()
    worst = frame.sort_values("bound_us").groupby(KEYS, sort=False)
    cases = worst.agg(bound_us=("bound_us", "sum"), bound_by=("bound_by", "last"),
                      ratio=("other_over_memory", "max"), launches=("bound_us", "size")).reset_index()
    return cases.merge(op_ratio, on=KEYS)


def cell(row) -> str:
    """`13.1 memory (2.67)`, with `; op 0.43` after the worst launch's ratio for an op of several launches."""
    ratio = f"{row.ratio:.2f}" + (f"; op {row.op_ratio:.2f}" if row.launches > 1 else "")
    return f"{row.bound_us:.3g} {row.bound_by.replace('issue_', '')} ({ratio})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--mode", default="cold")
    args = parser.parse_args()
    for path in args.files:
        result = load_result(path, ("profile",))
        rows = result.rows[(result.rows.status == "ok") & (result.rows["mode"] == args.mode)]
        cases = case_table(rows)
        arch = result.run.get("device")
        for op, group in cases.groupby("op", sort=False):
            cells = group.assign(cell=[cell(row) for row in group.itertuples()])
            table = cells.pivot_table(index="N", columns=["target", "backend"], values="cell", aggfunc="first")
            keys = [f"{t} {b}" for t, b in table.columns]
            rows = [{"N": int(n), **dict(zip(keys, values))} for n, values in zip(table.index, table.values)]
            print(f"\n**{op}, {arch}, {args.mode}**: bound_us (µs), what bounds it, (largest other floor / memory: "
                  "the worst launch; op: Σ over the launches)\n")
            print("\n".join(markdown.table([Column("N", "N"), *(Column(k, k) for k in keys)], rows, 1000)))


if __name__ == "__main__":
    main()
