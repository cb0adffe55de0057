"""Per series, what history reports: the latest value and status, a sparkline, the change points (with the
commit range each happened in, its size as a ratio with an interval, its own p and the p adjusted over every
series read; lnbench.history.steps), the shifts of the machine between runs of one commit, the series' noise and
the smallest step it lets the gate find; for checks (verify, selftest) since which commit a case FAILs or errors.
The change points of a deterministic series (modelled floors, the profile kind) are exact: every change of value
(lnbench.history.changes.exact_changes), marked `exact`, found from 2 runs on."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from lnbench.history.cache import searched_here
from lnbench.history.changes import ChangePoint, Search, exact_changes, sparkline
from lnbench.history.significance import FDR_Q, worker_values
from lnbench.history.steps import SeriesData, judge, reference_detectable
from lnbench.results.rows import HistoryRow
from lnbench.store import flydsl
from lnbench.store.points import MODELLED_UNIT

#: kinds whose series are checks: their history is the status, not the value
CHECK_KINDS = ("verify", "selftest")
BAD = ("FAIL", "error")
#: kinds whose values are deterministic (modelled floors): any change is real, no statistics
EXACT_KINDS = ("profile",)
#: units where a larger value is slower (times)
TIME_UNITS = ("us", "ms", "s", MODELLED_UNIT)
#: units where a smaller value is slower (throughputs, speed-ups)
FASTER_UP_UNITS = ("TB/s", "GB/s", "TFLOPS", "speedup", "modelled speedup")
#: the columns that name a series
_IDENTITY = ("kind", "backend", "op", "dtype", "shape", "mode", "case_name", "machine", "unit")
#: what a series shares with its peers (the same case on the same machine, another backend)
_PEER_GROUP = ("kind", "op", "dtype", "shape", "mode", "case_name", "machine", "unit")


@dataclass
class Series:
    """One series summarized: its HistoryRow (the table's and the files' columns, less the text ones render
    derives) and the change points and machine shifts behind them (the JSON's `series` holds them as lists)."""

    row: HistoryRow
    changes: list[dict[str, Any]] = field(default_factory=list)
    shifts: list[dict[str, Any]] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        """The series as the JSON's `series` lists it: the row's cells with the change points and shifts after
        `trend`, and the gate's note last."""
        out: dict[str, Any] = {}
        cells = self.row.cells()
        for name, value in cells.items():
            if name != "gate":
                out[name] = value
            if name == "trend":
                out.update(changes=self.changes, shifts=self.shifts)
        if "gate" in cells:
            out["gate"] = cells["gate"]
        return out


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


def _workers(points: pd.DataFrame) -> list[list[float]]:
    """Each point's worker medians (none where the store kept none, or history read without them)."""
    if "values" not in points:
        return [[] for _ in range(len(points))]
    return [worker_values(v) for v in points["values"].tolist()]


def summarize(points: pd.DataFrame, changes_of: Callable[[list[Search]], dict[Search, list[ChangePoint]]]
              | None = None) -> list[Series]:
    """One row per series (module docstring), in series order. `changes_of` runs many e-divisive searches at
    once (lnbench.history.cache keeps them in the store; None: searched here, no cache). `points` is sorted by
    series, then time (lnbench.history.query); each series is read as a slice of plain lists (not a pandas group
    per series: 200 groups of pandas cost a quarter of a second)."""
    if not len(points):
        return []
    col = {name: points[name].tolist() for name in ("series_id", "run_id", "status", "value", "detail", *_IDENTITY)}
    value = points["value"].to_numpy(dtype=float, na_value=np.nan)
    workers = _workers(points)
    labels = [_label(c, bool(d)) for c, d in zip(points["commit"].tolist(), points["dirty"].tolist())]
    ids = points["series_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    spans = list(zip(starts.tolist(), [*starts[1:].tolist(), len(ids)]))
    have = {a: [i for i in range(a, b) if value[i] == value[i]] for a, b in spans if col["kind"][a] not in CHECK_KINDS}
    measured = {a: SeriesData(int(col["series_id"][a]), tuple(col[k][a] for k in _PEER_GROUP),
                              value[idx].tolist(), [labels[i] for i in idx], [int(col["run_id"][i]) for i in idx],
                              [workers[i] for i in idx])
                for a, idx in have.items() if col["kind"][a] not in EXACT_KINDS and len(idx) and min(value[idx]) > 0}
    judged = judge(list(measured.values()), changes_of or searched_here)
    alpha = FDR_Q / max(len(measured), 1)
    out = []
    for a, b in spans:
        row = HistoryRow(**{k: col[k][a] for k in _IDENTITY}, series_id=int(col["series_id"][a]), runs=b - a,
                         latest=col["value"][b - 1], latest_status=col["status"][b - 1], latest_commit=labels[b - 1],
                         since="", trend="", newest_change_pct=None, noise_pct=None, detectable_pct=None,
                         commits=len({labels[i] for i in range(a, b)}))
        series = Series(row)
        if row.kind == flydsl.KIND:                  # FlyDSL's own verdict of the newest run, beside lnbench's
            row.set(flydsl_flag=flydsl.flag_text(col["detail"][b - 1]), **flydsl.flag_fields(col["detail"][b - 1]))
        if row.kind in CHECK_KINDS:
            row.since = _failing_since(col["status"][a:b], labels[a:b])
        else:
            idx = have[a]
            row.trend = sparkline(value[idx].tolist())
            if a in measured:
                data = measured[a]
                series.changes, series.shifts = judged[data.series_id]
                row.noise_pct = round(data.noise.pct, 2)
                detectable = reference_detectable(data, alpha)
                row.detectable_pct = round(detectable, 2) if math.isfinite(detectable) else None
            elif row.kind in EXACT_KINDS:
                series.changes = _exact(value[idx].tolist(), [labels[i] for i in idx],
                                        [int(col["run_id"][i]) for i in idx])
                row.noise_pct = row.detectable_pct = 0.0
            if series.changes:
                row.newest_change_pct = series.changes[-1]["size_pct"]
        out.append(series)
    return out


def _exact(values: list[float], labels: list[str], run_ids: list[int]) -> list[dict[str, Any]]:
    """A deterministic series' changes (every change of value), in history's change-point form."""
    return [{"from_commit": labels[cp.index - 1], "to_commit": labels[cp.index], "run": run_ids[cp.index],
             "index": cp.index, "size_pct": round(cp.size_pct, 3), "p": 0.0, "p_adj": 0.0, "exact": True,
             "cause": "code", "detectable_pct": 0.0} for cp in exact_changes(values)]


def changes_text(changes: list[dict[str, Any]]) -> str:
    """FROM..TO size (p, adjusted p; `exact` for a deterministic series' change; the machine's when its peers
    moved too), each change point."""
    def how(c: dict[str, Any]) -> str:
        if c.get("exact"):
            return "exact"
        text = f"p {c['p']:.1g}" + (f", adj {c['p_adj']:.1g}" if c.get("p_adj") is not None else "")
        return text + (", machine: peers moved too" if c.get("cause") == "machine" else "")
    return "; ".join(f"{c['from_commit']}..{c['to_commit']} {c['size_pct']:+.1f}% ({how(c)})" for c in changes)


def shifts_text(shifts: list[dict[str, Any]]) -> str:
    """The machine's shifts between runs of one commit (never gated)."""
    return "; ".join(f"{s['commit']} run {s['run']} {s['size_pct']:+.1f}%" for s in shifts)


def noise_text(row: HistoryRow) -> str:
    """±noise (≥ the step the gate can find with 2 new runs), for a measured series."""
    if row.noise_pct is None or row.kind in CHECK_KINDS:
        return ""
    detects = row.detectable_pct
    return f"±{row.noise_pct:.1f}% (≥{detects:.1f}%)" if detects is not None else f"±{row.noise_pct:.1f}%"
