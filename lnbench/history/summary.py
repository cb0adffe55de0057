"""Per series, what history reports: the latest value and status, a sparkline, the change points (with the
commit range each happened in, its size and p), and for checks (verify, selftest) since which commit a case
FAILs or errors."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from lnbench.history.cache import cache_key
from lnbench.history.changes import ChangePoint, change_points, sparkline

#: kinds whose series are checks: their history is the status, not the value
CHECK_KINDS = ("verify", "selftest")
BAD = ("FAIL", "error")
#: units where a larger value is slower (the only ones --fail-on-regression reads)
TIME_UNITS = ("us",)


def _label(commit: str, dirty: bool) -> str:
    return f"{commit}-dirty" if dirty else commit


def _failing_since(group: pd.DataFrame) -> str:
    """The commit of the first run of the newest unbroken stretch of FAIL/error ('' when the latest passes)."""
    bad = group["status"].isin(BAD).to_numpy()
    if not len(bad) or not bad[-1]:
        return ""
    start = len(bad) - 1
    while start > 0 and bad[start - 1]:
        start -= 1
    row = group.iloc[start]
    return _label(row["commit"], bool(row["dirty"]))


def summarize(points: pd.DataFrame, changes_of: Callable[[dict[str, list[float]]], dict[str, list[ChangePoint]]]
              = lambda wanted: {k: change_points(v) for k, v in wanted.items()}) -> list[dict[str, Any]]:
    """One row per series (module docstring), in series order. `changes_of` finds the change points of many
    series at once (cache key -> values; lnbench.history.cache keeps them in the store)."""
    groups = [group for _, group in points.groupby("series_id", sort=True)] if len(points) else []
    valued = {}
    for group in groups:
        if group["kind"].iloc[0] not in CHECK_KINDS:
            have = group[group["value"].notna()]
            valued[int(group["series_id"].iloc[0])] = (cache_key(int(group["series_id"].iloc[0]), have["run_id"]), have)
    found = changes_of({key: have["value"].astype(float).tolist() for key, have in valued.values()})
    out = []
    for group in groups:
        first, last = group.iloc[0], group.iloc[-1]
        row = {k: first[k] for k in ("kind", "backend", "op", "dtype", "shape", "mode", "case_name", "machine", "unit")}
        row.update(series_id=int(first["series_id"]), runs=len(group), latest=last["value"], latest_status=last["status"],
                   latest_commit=_label(last["commit"], bool(last["dirty"])), since="", trend="", changes=[],
                   newest_change_pct=None)
        if first["kind"] in CHECK_KINDS:
            row["since"] = _failing_since(group)
        else:
            key, have = valued[int(first["series_id"])]
            row["trend"] = sparkline(have["value"].astype(float).tolist())
            commits = [_label(c, bool(d)) for c, d in zip(have["commit"], have["dirty"])]
            for cp in found[key]:
                row["changes"].append({"from_commit": commits[cp.index - 1], "to_commit": commits[cp.index],
                                       "run": int(have["run_id"].iloc[cp.index]), "index": cp.index,
                                       "size_pct": round(cp.size_pct, 3), "p": round(cp.p, 4)})
            if row["changes"]:
                row["newest_change_pct"] = row["changes"][-1]["size_pct"]
        out.append(row)
    return out


def regressions(rows: list[dict[str, Any]], pct: float) -> list[dict[str, Any]]:
    """Series of a time unit whose newest change point is a slowdown of at least `pct` %."""
    return [r for r in rows if r["unit"] in TIME_UNITS and r["newest_change_pct"] is not None
            and r["newest_change_pct"] >= pct]


def changes_text(changes: list[dict[str, Any]]) -> str:
    return "; ".join(f"{c['from_commit']}..{c['to_commit']} {c['size_pct']:+.1f}% (p {c['p']:.3f})" for c in changes)
