"""`lnbench report --out DIR`: a static HTML dashboard of the store, one page that works offline (no script, no
CDN: inline SVG charts, lnbench.history.svg): per machine the latest verify (failures first), the latest compare,
a trend chart per timed series with its change points and busy runs marked, and the modelled floors (`perf
--device emu`, the profile kind) charted in a section of their own, never among the measured trends."""
from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from lnbench.history.summary import CHECK_KINDS, EXACT_KINDS, changes_text
from lnbench.history.svg import chart

TEMPLATES = Path(__file__).with_name("templates")


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def _num(value: Any) -> str:
    return "" if value is None or value != value else f"{float(value):.4g}"


def _latest_run(points: pd.DataFrame, kind: str) -> pd.DataFrame:
    of = points[points["kind"] == kind]
    if of.empty:
        return of
    newest = of.sort_values(["timestamp", "run_id"]).iloc[-1]["run_id"]
    return of[of["run_id"] == newest]


def _chart(machine: str, r: dict[str, Any], group: pd.DataFrame) -> dict[str, Any]:
    """One series' trend chart and its caption."""
    have = group[group["value"].notna()]
    title = " ".join(filter(None, (r["kind"], r["backend"], r["op"], r["dtype"], r["shape"], r["mode"],
                                   r["case_name"])))
    commits = [f"{c}-dirty" if d else c for c, d in zip(have["commit"], have["dirty"])]
    return {"anchor": _anchor(f"{machine}-{title}"), "title": title, "unit": r["unit"],
            "latest": _num(r["latest"]), "changes": changes_text(r["changes"]), "modelled": r["kind"] in EXACT_KINDS,
            "svg": chart(have["value"].astype(float).tolist(), commits, [bool(f) for f in have["load_flag"]],
                         r["changes"], title)}


def context(points: pd.DataFrame, rows: list[dict[str, Any]], store: str) -> dict[str, Any]:
    """What the template shows (module docstring)."""
    machines = []
    by_series = {int(sid): g for sid, g in points.groupby("series_id")} if len(points) else {}
    for machine in sorted({r["machine"] for r in rows}):
        mine = [(r["series_id"], r) for r in rows if r["machine"] == machine]
        here = points[points["machine"] == machine]
        latest_verify = set(_latest_run(here, "verify")["series_id"])
        verify = [dict(r, latest_text=_num(r["latest"]), allowed_text=_num(by_series[sid]["value2"].iloc[-1]))
                  for sid, r in mine if sid in latest_verify]
        verify.sort(key=lambda r: (r["latest_status"] not in ("FAIL", "error"), r["backend"], r["case_name"]))
        latest_compare = set(_latest_run(here, "compare")["series_id"])
        compare = [dict(r, latest_text=_num(r["latest"])) for sid, r in mine if sid in latest_compare]
        charts = [_chart(machine, r, by_series[sid]) for sid, r in mine
                  if r["kind"] not in CHECK_KINDS and r["kind"] != "compare"]
        machines.append({"name": machine, "anchor": _anchor(machine), "verify": verify, "compare": compare,
                         "charts": [c for c in charts if not c["modelled"]],
                         "modelled": [c for c in charts if c["modelled"]],
                         "verify_commit": verify[0]["latest_commit"] if verify else ""})
    summary = (f"{len(rows)} series on {len(machines)} machine(s), {sum(bool(r['changes']) for r in rows)} with "
               f"change points, {sum(bool(r['since']) for r in rows)} failing")
    return {"machines": machines, "summary": summary, "store": store,
            "generated": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()}


def render_html(points: pd.DataFrame, rows: list[dict[str, Any]], store: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("report.html.j2").render(**context(points, rows, store))
