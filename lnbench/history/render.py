"""history's output: a table of the series (and of the regressions --fail-on-regression found), and the result
files every command writes (cli_common.emit_outputs): CSV and JSON of the `history` kind (lnbench.results: one
HistoryRow a series, a HistoryRun naming the store, filters and method; load_result reads them back) and the
Markdown summary (--md, and $GITHUB_STEP_SUMMARY)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import lnbench
from lnbench.checkout import git_commit, timestamp
from lnbench.cli_common import console, emit_outputs
from lnbench.history.cache import METHOD
from lnbench.history.changes import MIN_VALUES
from lnbench.history.summary import changes_text
from lnbench.processes import command_line
from lnbench.results import HISTORY, HistoryRow, HistoryRun
from lnbench.tables import Column, fmt_number, render_table, silent_console, styled_status

COLUMNS = [Column("kind", "kind", justify="left"), Column("backend", "backend", justify="left"),
           Column("op", "op"), Column("dtype", "dtype"), Column("shape", "shape"), Column("mode", "mode"),
           Column("case_name", "case"), Column("runs", "runs"), Column("latest", "latest", fmt_number(4)),
           Column("unit", "unit"), Column("latest_status", "status", styled_status), Column("trend", "trend"),
           Column("changes_text", "change points (commits, size, p)", justify="left"),
           Column("since", "failing since")]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in row.items() if k != "changes"}, "changes_text": changes_text(row["changes"])}


def history_run(store_url: str, filters: dict[str, Any], judged: Sequence[Path], pct: float | None, slower: int,
                unjudged: int) -> HistoryRun:
    """The run record of a history: who wrote it and when, the store read, the filters, the files judged (--with),
    the method and the gate."""
    run = HISTORY.run(lnbench_command="history", command_line=command_line(), lnbench_version=lnbench.__version__,
                      git_commit=git_commit(), timestamp=timestamp(), store_url=store_url,
                      filters={k: v for k, v in filters.items() if v and k not in ("last", "exclude_loaded")},
                      last_runs=filters.get("last"), exclude_loaded=bool(filters.get("exclude_loaded")),
                      change_method=METHOD)
    if judged:
        run.judged_files = "; ".join(map(str, judged))
    if pct is not None:
        run.update(fail_on_regression_pct=pct, regressions=slower, unjudged=unjudged)
    return run


def render(rows: list[dict[str, Any]], slower: list[dict[str, Any]], pct: float | None, run: HistoryRun,
           csv_path: Path | None, json_path: Path | None, md_path: Path | None, quiet: bool) -> None:
    """The table (unless quiet) and the result files: one HistoryRow a series (the CSV's columns, the JSON's
    `data`), the JSON's `series` with each series' change points as lists, the Markdown."""
    flat = [_flat(r) for r in rows]
    machines = sorted({r["machine"] for r in rows})
    summary = (f"{len(rows)} series on {len(machines)} machine(s); {sum(bool(r['changes']) for r in rows)} with "
               f"change points; {sum(bool(r['since']) for r in rows)} failing")
    if run.get("unjudged"):
        summary += (f"; {run.unjudged} timed series with fewer than {MIN_VALUES} runs (modelled floors: 2), too few "
                    f"to split: --fail-on-regression passes them unjudged")
    render_table(silent_console() if quiet else console, "History", COLUMNS, flat)
    if slower:
        render_table(console, f"Slowdowns of at least {pct}% (the newest change point)", COLUMNS,
                     [_flat(r) for r in slower])
    console.print(summary, markup=False, highlight=False)
    emit_outputs([HistoryRow.of(row) for row in flat], run, csv_path, json_path, extra_json={"series": rows},
                 md_path=md_path, summary=summary)
