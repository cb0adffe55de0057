"""`lnbench report --out DIR`: a static HTML dashboard of the store, one page that works offline (no script, no
CDN: inline SVG charts, lnbench.history.svg and templates/chart.svg.j2), top to bottom:

1. what changed: every change point of a valued series, slowdowns first, then speed-ups, then other changes
   (newest first in each), with its commit range, size and p, linked to its series; and how many checks fail;
2. each machine's timed series (perf), those with change points first: a chart with axes, noise bands and the
   change points marked, and a table of its runs (an anchor a series);
3. the checks (verify, selftest) per machine: failing checks first (since which commit), then the counts per
   backend × dtype × case (one line when all pass);
4. abi-compare, 5. the modelled floors (`perf --device emu`, the profile kind: never among measured times),
6. the latest compare and 7. other series (inspect), each in a section of its own.

A series with no value (an abi-compare pair that could not run) is counted in a line, not drawn; one with a
single value is listed in its section's table, not drawn (one dot shows no trend)."""
from __future__ import annotations

import datetime as _dt
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import jinja2
import numpy as np
import pandas as pd

from lnbench.history.gate import direction
from lnbench.history.significance import METHOD_TEXT
from lnbench.history.summary import BAD, CHECK_KINDS, EXACT_KINDS, Series, changes_text, noise_text, shifts_text
from lnbench.history.svg import Chart, Run, chart, value_text
from lnbench.results import HistoryRow, missing

TEMPLATES = Path(__file__).with_name("templates")
#: the sections of valued series after the checks: (id, short name, heading, which kinds)
SECTIONS: tuple[tuple[str, str, str, Callable[[str], bool]], ...] = (
    ("abi-compare", "abi-compare", "abi-compare: Tensor vs Pointer ABI", lambda kind: kind == "abi-compare"),
    ("modelled", "Modelled floors", "Modelled floors (perf --device emu): lower bounds, not measurements",
     lambda kind: kind in EXACT_KINDS),
)
#: the kinds of timed series (perf; flydsl: FlyDSL's CI dashboard, imported)
_TIMED = ("perf", "flydsl")
_OTHER_EXCLUDED = (*_TIMED, *CHECK_KINDS, "compare", "abi-compare", *EXACT_KINDS)
#: the fewest values a chart is drawn for
MIN_CHARTED = 2


@dataclass
class SeriesView:
    """One series as the page shows it: its name and anchor, latest value, change points, chart and runs."""

    row: HistoryRow
    series: Series
    title: str
    anchor: str
    latest: str
    changes: str
    noise: str
    runs: list[Run]
    chart: Chart | None


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def _num(value: Any) -> str:
    return "" if missing(value) else value_text(float(value))


def series_title(row: HistoryRow) -> str:
    """A series' name: kind backend op dtype shape mode case."""
    return " ".join(str(row.value(k)) for k in ("kind", "backend", "op", "dtype", "shape", "mode", "case_name")
                    if row.value(k))


def _interval(values: Any) -> tuple[float | None, float | None]:
    """A run's interval: the range of its worker medians (a JSON list), when it has two or more."""
    if not isinstance(values, str) or not values:
        return None, None
    try:
        workers = [float(v) for v in json.loads(values)]
    except (TypeError, ValueError):
        return None, None
    return (min(workers), max(workers)) if len(workers) > 1 else (None, None)


def _runs(group: pd.DataFrame) -> list[Run]:
    """The valued runs of one series, oldest first: the same values lnbench.history.summary searched."""
    have = group[group["value"].notna()]
    intervals = [_interval(v) for v in have["values"]] if "values" in have else [(None, None)] * len(have)
    return [Run(f"{c}-dirty" if d else c, str(t), float(v), lo, hi, str(flag or ""), str(status))
            for c, d, t, v, (lo, hi), flag, status in zip(have["commit"], have["dirty"], have["timestamp"],
                                                          have["value"], intervals, have["load_flag"], have["status"])]


def series_view(series: Series, group: pd.DataFrame) -> SeriesView:
    """One series' view; its chart when it has MIN_CHARTED values or more."""
    runs, row = _runs(group), series.row
    title = series_title(row)
    drawn = chart(runs, series.changes, title, str(row.unit), str(row.machine)) if len(runs) >= MIN_CHARTED else None
    shifts = shifts_text(series.shifts or [])
    changes = "; ".join(filter(None, (changes_text(series.changes), f"machine shifts: {shifts}" if shifts else "")))
    return SeriesView(row, series, title, f"s{row.series_id}-{_anchor(title)}", _num(row.latest), changes,
                      noise_text(row), runs, drawn)


def _newest_change(view: SeriesView) -> str:
    """The date of a series' newest change point ('' when it has none)."""
    changes = view.series.changes
    return view.runs[changes[-1]["index"]].timestamp if changes else ""


def _changes_first(views: Iterable[SeriesView]) -> list[SeriesView]:
    """Series with change points first (the newest change first), then the rest, each by name."""
    return sorted(sorted(views, key=lambda v: v.title), key=_newest_change, reverse=True)


def _medians(values: list[float], changes: list[dict[str, Any]], k: int) -> tuple[float, float]:
    """The medians of the stretches before and after change point `k` (the size's two sides)."""
    bounds = [0, *(c["index"] for c in changes), len(values)]
    return float(np.median(values[bounds[k]:bounds[k + 1]])), float(np.median(values[bounds[k + 1]:bounds[k + 2]]))


def _p_text(change: dict[str, Any]) -> str:
    """A change's p, its adjusted p, and whose it is when its peers moved too."""
    text = f"{change['p']:.2g} (adj {change['p_adj']:.2g})" if change.get("p_adj") is not None else f"{change['p']:.3f}"
    return text + ("; machine: its peers moved too" if change.get("cause") == "machine" else "")


def changes_rows(views: Iterable[SeriesView]) -> list[dict[str, Any]]:
    """Every change point of the charted series: slower first, then faster, then other changes; newest first."""
    out = []
    for view in views:
        values = [run.value for run in view.runs]
        for k, change in enumerate(view.series.changes):
            before, after = _medians(values, view.series.changes, k)
            out.append({"direction": direction(str(view.row.unit), change["size_pct"]), "title": view.title,
                        "anchor": view.anchor, "machine": view.row.machine, "from": change["from_commit"],
                        "to": change["to_commit"], "date": view.runs[change["index"]].timestamp[:10],
                        "size": f"{change['size_pct']:+.1f}%", "unit": view.row.unit,
                        "medians": f"{value_text(before)} → {value_text(after)} {view.row.unit}",
                        "p": "exact" if change.get("exact") else _p_text(change)})
    order = {"slower": 0, "faster": 1, "changed": 2}
    out.sort(key=lambda r: r["date"], reverse=True)
    return sorted(out, key=lambda r: order[r["direction"]])


def _by_machine(views: list[SeriesView]) -> list[dict[str, Any]]:
    """Views grouped per machine: charts (changes first), one-value series, and no-value series by status."""
    machines = []
    for machine in sorted({str(v.row.machine) for v in views}):
        mine = _changes_first(v for v in views if str(v.row.machine) == machine)
        empty = Counter(v.row.latest_status or "no status" for v in mine if not v.runs)
        machines.append({"name": machine, "anchor": _anchor(machine), "charts": [v for v in mine if v.chart],
                         "single": [v for v in mine if v.runs and not v.chart],
                         "empty": sum(empty.values()), "empty_statuses": sorted(empty.items())})
    return machines


def _check_counts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per backend × dtype × case: how many checks, and how many of each latest status."""
    counts: dict[tuple[str, str, str], Counter] = {}
    for r in rows:
        counts.setdefault((r["backend"], r["dtype"], r["case_name"]), Counter())[r["latest_status"]] += 1
    return [{"backend": b, "dtype": d, "case": c, "checks": sum(n.values()), "pass": n["PASS"],
             "fail": sum(n[s] for s in BAD), "other": sum(v for s, v in n.items() if s != "PASS" and s not in BAD)}
            for (b, d, c), n in sorted(counts.items())]


def _check_line(kind: str, rows: list[dict[str, Any]], failing: int) -> str:
    """A kind's checks on a machine in a line: how many pass, fail, other; over what; at which commit."""
    passed = sum(r["latest_status"] == "PASS" for r in rows)
    other = len(rows) - passed - failing
    commits = sorted({r["latest_commit"] for r in rows})
    counts = ", ".join(filter(None, (f"{passed} of {len(rows)} checks PASS",
                                      f"{failing} FAIL or error" if failing else "",
                                      f"{other} other" if other else "")))
    spread = " × ".join(f"{len({r[key] for r in rows})} {what}" for key, what in
                        (("backend", "backends"), ("dtype", "dtypes"), ("case_name", "cases")))
    at = commits[0] if len(commits) == 1 else f"{len(commits)} commits"
    return f"{kind}: {counts} ({spread}; latest at {at})"


def check_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per machine and check kind: the failing checks (those failing longest first), the counts, and a line."""
    groups = []
    for machine, kind in sorted({(r["machine"], r["kind"]) for r in rows if r["kind"] in CHECK_KINDS}):
        mine = [r for r in rows if r["machine"] == machine and r["kind"] == kind]
        failing = sorted((dict(r, latest_text=_num(r["latest"])) for r in mine if r["latest_status"] in BAD),
                         key=lambda r: (r["since"], r["backend"], r["case_name"], r["shape"]))
        groups.append({"machine": machine, "kind": kind, "line": _check_line(kind, mine, len(failing)),
                       "all_pass": all(r["latest_status"] == "PASS" for r in mine), "failing": failing,
                       "counts": _check_counts(mine)})
    return groups


def _latest_compare(points: pd.DataFrame, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The series of each machine's newest compare run, with their verdicts."""
    if not len(points):
        return []
    compares = points[points["kind"] == "compare"].sort_values(["timestamp", "run_id"])
    newest = set(compares.groupby("machine")["run_id"].last())
    wanted = set(compares.loc[compares["run_id"].isin(newest), "series_id"])
    return [dict(r, latest_text=_num(r["latest"])) for r in rows if r["series_id"] in wanted]


def _summary(rows: list[dict[str, Any]], timed: list[SeriesView]) -> str:
    kinds = Counter(r["kind"] for r in rows)
    machines = len({r["machine"] for r in rows})
    parts = [f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: (kv[0] not in _TIMED, kv[0]))]
    changed = sum(bool(v.series.changes) for v in timed)
    return (f"{len(rows)} series on {machines} machine(s) ({', '.join(parts)}); {changed} timed series with change "
            f"points; {sum(bool(r['since']) for r in rows)} checks failing. Change points: {METHOD_TEXT}")


def context(points: pd.DataFrame, series: list[Series], store: str) -> dict[str, Any]:
    """What the template shows (module docstring)."""
    by_series = {int(sid): g for sid, g in points.groupby("series_id")} if len(points) else {}
    valued = [series_view(s, by_series[int(s.row.series_id or 0)]) for s in series
              if s.row.kind not in CHECK_KINDS and s.row.kind != "compare"]
    rows = [s.row.cells() for s in series]          # the checks' and compare's tables: display dicts
    timed = [v for v in valued if v.row.kind in _TIMED]
    sections = [{"id": sid, "name": name, "heading": heading,
                 "machines": _by_machine([v for v in valued if wanted(str(v.row.kind))])}
                for sid, name, heading, wanted in SECTIONS]
    other = [v for v in valued if v.row.kind not in _OTHER_EXCLUDED]
    if other:
        sections.append({"id": "other", "name": "Other series", "heading": "Other series (inspect, ...)",
                         "machines": _by_machine(other)})
    checks = check_groups(rows)
    return {"summary": _summary(rows, timed), "store": store, "changes": changes_rows(valued),
            "timed": _by_machine(timed), "timed_count": len(timed), "checks": checks,
            "failing": sum(len(g["failing"]) for g in checks), "sections": sections,
            "compare": _latest_compare(points, rows),
            "generated": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()}


def render_html(points: pd.DataFrame, rows: list[Series], store: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("report.html.j2").render(**context(points, rows, store))
