"""verify's default output: one summary row per backend × dtype × case kind, then only the rows worth a look
(FAIL, error, and values within NEAR_BAR of their bar); `--details` shows every row.

FAIL means a value outside its bar; error means no verdict (the case raised: no value to judge).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from lnbench.results import Cells, Record, missing
from lnbench.output.tables import Column, fmt_float, styled_status

#: statuses of a case that executed (a verdict, or an error while executing)
EXECUTED = ("PASS", "FAIL", "error")
#: a row whose error uses at least this fraction of its bar is shown by default, passing or not
NEAR_BAR = 0.9

SUMMARY_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("dtype", "dtype", justify="left"),
    Column("case", "case", justify="left"), Column("checks", "checks"), Column("PASS", "passed"),
    Column("FAIL", "FAIL"), Column("error", "error"), Column("other", "not run / compiled"),
    Column("worst", "worst err/allowed", fmt_float(2)), Column("where", "where (shape tensor eps)", justify="left"),
    Column("status", "status", styled_status, justify="left", markup=True),
]


def status_word(row: Cells) -> str:
    """PASS, FAIL, error, or the other statuses as they read before any parenthesis (not run, compiled, ...), of a
    verify row or its display dict."""
    return str(row.value("status") if isinstance(row, Record) else row.get("status")).split(" (")[0]


def summary_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (backend, dtype, case kind), in first-seen order; rows carry `_used` (err/allowed)."""
    groups: dict[tuple[Any, Any, Any], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row.get("backend"), row.get("dtype"), row.get("case")), []).append(row)
    out = []
    for (backend, dtype, kind), members in groups.items():
        words = [status_word(r) for r in members]
        used = [r for r in members if not missing(r.get("_used"))]
        worst = max(used, key=lambda r: r["_used"], default=None)
        counts = {word: words.count(word) for word in ("PASS", "FAIL", "error")}
        other = len(words) - sum(counts.values())
        status = ("error" if counts["error"] else "FAIL" if counts["FAIL"] else "PASS" if counts["PASS"] and not other
                  else next(w for w in words if w not in ("PASS",)))
        out.append({"backend": backend, "dtype": dtype, "case": kind, "checks": len(members), **counts,
                    "other": other, "worst": worst["_used"] if worst else None,
                    "where": f"{worst['shape']} {worst['tensor']} eps={worst['eps']:g}" if worst else "",
                    "status": status})
    return out


def worth_a_look(row: Mapping[str, Any]) -> bool:
    """FAIL and error rows, and rows using at least NEAR_BAR of their bar."""
    used = row.get("_used")
    return status_word(row) in ("FAIL", "error") or (used is not None and used >= NEAR_BAR)
