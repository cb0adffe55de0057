"""How good the run-time estimates are per machine (issue 57): the stored runs' up-front estimate against their
actual seconds (store migration 0004: runs.estimate_s, estimate_range, actual_s; lnbench.run.upfront).

    estimate_rows(store)          one row per machine × kind: runs with an estimate, how many were a point and how
                                  many a range, the points within 1.5× of their time, the ranges holding it, and the
                                  median and worst estimate/actual of the points
    print_estimates(console, rows)  the table
"""
from __future__ import annotations

import re
import statistics
from typing import Any, Iterable, Mapping

import sqlalchemy as sa
from rich.console import Console

from lnbench.output.tables import Column, fmt_float, render_table
from lnbench.store import schema as S
from lnbench.store.db import Store

#: a point estimate counts as good within this factor of the run's time (the issue's bar)
WITHIN = 1.5
_SPAN = re.compile(r"(\d+(?:\.\d+)?) (s|min)\s*[–-]\s*(\d+(?:\.\d+)?) (s|min)")


def range_seconds(text: str) -> tuple[float, float] | None:
    """(low, high) seconds of a printed range `20 s – 2 min`; None for anything else."""
    found = _SPAN.search(text or "")
    if not found:
        return None
    low, low_unit, high, high_unit = found.groups()
    return float(low) * (60 if low_unit == "min" else 1), float(high) * (60 if high_unit == "min" else 1)


def _judged(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One group's counts and ratios (module docstring)."""
    points, ranges = [], []
    for run in runs:
        span = range_seconds(str(run["estimate_range"] or ""))
        if span:
            ranges.append(span[0] <= run["actual_s"] <= span[1])
        elif run["actual_s"] > 0:
            points.append(run["estimate_s"] / run["actual_s"])
    within = sum(1 for r in points if 1 / WITHIN <= r <= WITHIN)
    return {"runs": len(points) + len(ranges), "points": len(points), "within": within, "ranges": len(ranges),
            "inside": sum(ranges), "median": statistics.median(points) if points else None,
            "worst": max(points, key=lambda r: max(r, 1 / r)) if points else None}


def estimate_rows(store: Store) -> list[dict[str, Any]]:
    """Per machine and kind, how the stored runs' estimates compare with their time (runs without one left out)."""
    r = S.runs
    query = (sa.select(r.c.machine, r.c.kind, r.c.estimate_s, r.c.estimate_range, r.c.actual_s)
             .where(r.c.estimate_s.is_not(None), r.c.actual_s.is_not(None)).order_by(r.c.machine, r.c.kind))
    with store.engine.connect() as conn:
        found = [dict(row._mapping) for row in conn.execute(query)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in found:
        groups.setdefault((run["machine"], run["kind"]), []).append(run)
    return [{"machine": machine, "kind": kind, **_judged(runs)} for (machine, kind), runs in groups.items()]


COLUMNS = [Column("machine", "machine", justify="left"), Column("kind", "kind", justify="left"),
           Column("runs", "runs"), Column("points", "points"), Column("within", f"within {WITHIN}×"),
           Column("ranges", "ranges"), Column("inside", "inside"),
           Column("median", "median est/actual", fmt_float(3)), Column("worst", "worst est/actual", fmt_float(3))]


def print_estimates(console: Console, rows: list[dict[str, Any]]) -> None:
    """The table of estimate_rows."""
    render_table(console, "run-time estimates against the runs' time, per machine", COLUMNS, rows)
