"""Per series, what history reports: the latest value and status, a sparkline, the change points (with the
commit range each happened in, its size and p), and for checks (verify, selftest) since which commit a case
FAILs or errors. The change points of a deterministic series (modelled floors, the profile kind) are exact: every
change of value (lnbench.history.changes.exact_changes), marked `exact`, found from 2 runs on."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from lnbench.history.cache import cache_key
from lnbench.history.candidates import CANDIDATE
from lnbench.history.changes import MIN_VALUES, ChangePoint, change_points, exact_changes, sparkline
from lnbench.store.points import MODELLED_UNIT

#: kinds whose series are checks: their history is the status, not the value
CHECK_KINDS = ("verify", "selftest")
BAD = ("FAIL", "error")
#: kinds whose values are deterministic (modelled floors): any change is real, no statistics
EXACT_KINDS = ("profile",)
#: units where a larger value is slower (the only ones --fail-on-regression reads)
TIME_UNITS = ("us", MODELLED_UNIT)
#: the columns that name a series
_IDENTITY = ("kind", "backend", "op", "dtype", "shape", "mode", "case_name", "machine", "unit")


def _label(commit: str, dirty: bool) -> str:
    return f"{commit}-dirty" if dirty else commit


def _failing_since(statuses: list[str], labels: list[str]) -> str:
    """The commit of the first run of the newest unbroken stretch of FAIL/error ('' when the latest passes)."""
    if not statuses or statuses[-1] not in BAD:
        return ""
    start = len(statuses) - 1
    while start > 0 and statuses[start - 1] in BAD:
        start -= 1
    return labels[start]


def _search_each(wanted: dict[str, list[float]]) -> dict[str, list[ChangePoint]]:
    return {key: change_points(values) for key, values in wanted.items()}


def summarize(points: pd.DataFrame, changes_of: Callable[[dict[str, list[float]]], dict[str, list[ChangePoint]]]
              | None = None) -> list[dict[str, Any]]:
    """One row per series (module docstring), in series order. `changes_of` finds the change points of many
    series at once (cache key -> values; lnbench.history.cache keeps them in the store; None: searched here, no
    cache). `points` is sorted by
    series, then time (lnbench.history.query); each series is read as a slice of plain lists (not a pandas group
    per series: 200 groups of pandas cost a quarter of a second)."""
    if not len(points):
        return []
    col = {name: points[name].tolist() for name in ("series_id", "run_id", "status", "value", *_IDENTITY)}
    value = points["value"].to_numpy(dtype=float, na_value=np.nan)
    labels = [_label(c, bool(d)) for c, d in zip(points["commit"].tolist(), points["dirty"].tolist())]
    ids = points["series_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    spans = list(zip(starts.tolist(), [*starts[1:].tolist(), len(ids)]))
    valued = {}                  # first point of a timed series -> (cache key, the indexes of its values)
    for a, b in spans:
        if col["kind"][a] not in CHECK_KINDS:
            have = [i for i in range(a, b) if value[i] == value[i]]
            valued[a] = (cache_key(col["series_id"][a], [col["run_id"][i] for i in have]), have)
    exact = {a for a in valued if col["kind"][a] in EXACT_KINDS}
    found = (changes_of or _search_each)({key: value[have].tolist() for a, (key, have) in valued.items()
                                          if a not in exact})
    found.update({valued[a][0]: exact_changes(value[valued[a][1]].tolist()) for a in exact})
    out = []
    for a, b in spans:
        row = {k: col[k][a] for k in _IDENTITY}
        row.update(series_id=int(col["series_id"][a]), runs=b - a, latest=col["value"][b - 1],
                   latest_status=col["status"][b - 1], latest_commit=labels[b - 1], since="", trend="", changes=[],
                   newest_change_pct=None)
        if row["kind"] in CHECK_KINDS:
            row["since"] = _failing_since(col["status"][a:b], labels[a:b])
        else:
            key, have = valued[a]
            row["trend"] = sparkline(value[have].tolist())
            for cp in found[key]:
                row["changes"].append({"from_commit": labels[have[cp.index - 1]], "to_commit": labels[have[cp.index]],
                                       "run": int(col["run_id"][have[cp.index]]), "index": cp.index,
                                       "size_pct": round(cp.size_pct, 3), "p": round(float(cp.p), 4),
                                       "exact": a in exact})
            if row["changes"]:
                row["newest_change_pct"] = row["changes"][-1]["size_pct"]
        out.append(row)
    return out


def regressions(rows: list[dict[str, Any]], pct: float, candidates_only: bool = False) -> list[dict[str, Any]]:
    """Series of a time unit whose newest change point is a slowdown of at least `pct` % (`candidates_only`:
    one at a run of a `history --with` file, whose run ids are negative: the newest stored run is not judged)."""
    return [r for r in rows if r["unit"] in TIME_UNITS and r["newest_change_pct"] is not None
            and r["newest_change_pct"] >= pct and (not candidates_only or r["changes"][-1]["run"] < 0)]


def unjudged(points: pd.DataFrame, candidates_only: bool = False) -> int:
    """Timed series with fewer values than e-divisive needs to split (MIN_VALUES; a deterministic series: 2): no
    change point can be found in them, so --fail-on-regression passes them unjudged (`candidates_only`: of the
    series a --with file has)."""
    if not len(points):
        return 0
    timed = points[points["unit"].isin(TIME_UNITS) & ~points["kind"].isin(CHECK_KINDS) & points["value"].notna()]
    if candidates_only:
        timed = timed[timed["series_id"].isin(timed.loc[timed[CANDIDATE], "series_id"])]
    sizes = timed.groupby("series_id").agg(values=("value", "size"), kind=("kind", "first"))
    needed = sizes["kind"].map(lambda kind: 2 if kind in EXACT_KINDS else MIN_VALUES)
    return int((sizes["values"] < needed).sum())


def changes_text(changes: list[dict[str, Any]]) -> str:
    """FROM..TO size (p, or `exact` for a deterministic series' change), each change point."""
    def how(c: dict[str, Any]) -> str:
        return "exact" if c.get("exact") else f"p {c['p']:.3f}"
    return "; ".join(f"{c['from_commit']}..{c['to_commit']} {c['size_pct']:+.1f}% ({how(c)})" for c in changes)
