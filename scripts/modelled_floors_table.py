"""Markdown tables of modelled floors from `lnbench perf --device emu ... --json` results (docs/measurements.md).

    python scripts/modelled_floors_table.py sweep-gfx942.json sweep-gfx950.json [--mode cold]

One table per op and arch: a row per N, per target and backend the case's bound_us (summed over its launches),
what bounds it (the largest launch's bound_by) and the largest other floor over the memory floor (the worst
launch): the issue's goal for lnbench's kernels is `memory` with that ratio at most 0.5.
"""
from __future__ import annotations

import argparse

import pandas as pd

from lnbench import markdown
from lnbench.results import FLOOR_COLUMNS, load_result
from lnbench.tables import Column

OTHER = [c for c in FLOOR_COLUMNS if c not in ("memory_us", "bound_us")]


def case_table(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["other_over_memory"] = frame[[c for c in OTHER if c in frame]].max(axis=1) / frame["memory_us"]
    worst = frame.sort_values("bound_us").groupby(["backend", "op", "target", "N"], sort=False)
    return worst.agg(bound_us=("bound_us", "sum"), bound_by=("bound_by", "last"),
                     ratio=("other_over_memory", "max")).reset_index()


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
            cells = group.assign(cell=[f"{b:.3g} {by.replace('issue_', '')} ({r:.2f})" for b, by, r in
                                       zip(group.bound_us, group.bound_by, group.ratio)])
            table = cells.pivot_table(index="N", columns=["target", "backend"], values="cell", aggfunc="first")
            keys = [f"{t} {b}" for t, b in table.columns]
            rows = [{"N": int(n), **dict(zip(keys, values))} for n, values in zip(table.index, table.values)]
            print(f"\n**{op}, {arch}, {args.mode}**: bound_us (µs), what bounds it, (largest other floor / memory)\n")
            print("\n".join(markdown.table([Column("N", "N"), *(Column(k, k) for k in keys)], rows, 1000)))


if __name__ == "__main__":
    main()
