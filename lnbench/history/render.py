"""history's output: a table of the series (and of the regressions --fail-on-regression found), CSV, JSON and the
Markdown summary (--md, and $GITHUB_STEP_SUMMARY)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from lnbench import markdown
from lnbench.cli_common import console, err_console
from lnbench.history.summary import changes_text
from lnbench.outputs import atomic_write_all, json_writer
from lnbench.tables import SHOWN, Column, fmt_number, render_table, silent_console, styled_status

COLUMNS = [Column("kind", "kind", justify="left"), Column("backend", "backend", justify="left"),
           Column("op", "op"), Column("dtype", "dtype"), Column("shape", "shape"), Column("mode", "mode"),
           Column("case_name", "case"), Column("runs", "runs"), Column("latest", "latest", fmt_number(4)),
           Column("unit", "unit"), Column("latest_status", "status", styled_status), Column("trend", "trend"),
           Column("changes_text", "change points (commits, size, p)", justify="left"),
           Column("since", "failing since")]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in row.items() if k != "changes"}, "changes_text": changes_text(row["changes"])}


def render(rows: list[dict[str, Any]], slower: list[dict[str, Any]], pct: float | None, csv_path: Path | None,
           json_path: Path | None, md_path: Path | None, quiet: bool) -> None:
    flat = [_flat(r) for r in rows]
    machines = sorted({r["machine"] for r in rows})
    summary = (f"{len(rows)} series on {len(machines)} machine(s); {sum(bool(r['changes']) for r in rows)} with "
               f"change points; {sum(bool(r['since']) for r in rows)} failing")
    render_table(silent_console() if quiet else console, "History", COLUMNS, flat)
    if slower:
        render_table(console, f"Slowdowns of at least {pct}% (the newest change point)", COLUMNS,
                     [_flat(r) for r in slower])
    console.print(summary, markup=False, highlight=False)
    writes = []
    if csv_path:
        frame = pd.DataFrame(flat)
        writes.append((csv_path, lambda tmp: frame.to_csv(tmp, index=False)))
    if json_path:
        writes.append((json_path, json_writer({"series": rows})))
    text = markdown.document("lnbench history", summary, SHOWN) if md_path or markdown.step_summary_path() else None
    if md_path and text:
        writes.append((md_path, markdown.writer(text)))
    for path in atomic_write_all(writes):
        console.print(f"written to {path}", markup=False, highlight=False)
    if text and markdown.step_summary_path():
        problem = markdown.append_step_summary(text)
        if problem:
            err_console.print(f"lnbench: warning: the step summary could not be appended: {problem}", markup=False)
