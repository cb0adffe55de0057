"""history's output: a table of the series (and of the regressions --fail-on-regression found), and the result
files every command writes (cli_common.emit_outputs): CSV and JSON of the `history` kind (lnbench.results: one
HistoryRow a series, a HistoryRun naming the store, filters and method; load_result reads them back) and the
Markdown summary (--md, and $GITHUB_STEP_SUMMARY).

The table shows what a user comes for: by default the timed series (perf, modelled floors, ...), those with change
points first (the newest change first), and the failing checks; the checks (verify, selftest) and abi-compare
series are a line each kind, which --kind KIND or --all lists in full. The CSV and JSON always hold every series."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import lnbench
from lnbench.output import markdown
from lnbench.machine.checkout import git_commit, timestamp
from lnbench.cli_common import console, emit_outputs
from lnbench.history.cache import METHOD
from lnbench.history.gate import Gate
from lnbench.history.significance import FDR_Q, METHOD_TEXT
from lnbench.history.summary import BAD, CHECK_KINDS, changes_text, noise_text, shifts_text
from lnbench.machine.checkout import command_line
from lnbench.results import HISTORY, HistoryRow, HistoryRun
from lnbench.output.tables import SHOWN, Column, fmt_number, render_table, silent_console, styled_status

COLUMNS = [Column("kind", "kind", justify="left"), Column("backend", "backend", justify="left"),
           Column("op", "op"), Column("dtype", "dtype"), Column("shape", "shape"), Column("mode", "mode"),
           Column("case_name", "case"), Column("runs", "runs"), Column("latest", "latest", fmt_number(4)),
           Column("unit", "unit"), Column("latest_status", "status", styled_status), Column("trend", "trend"),
           Column("noise_text", "noise (detects)"),
           Column("changes_text", "change points (commits, size, p, adj p)", justify="left"),
           Column("shifts_text", "machine shifts (same commit)", justify="left"),
           Column("gate", "gate", justify="left"), Column("flydsl_flag", "FlyDSL's flag", justify="left"),
           Column("since", "failing since")]
#: the kinds the default table leaves out, a line each (--kind or --all lists them)
SUMMARIZED_KINDS = (*CHECK_KINDS, "abi-compare")
#: the most failing checks the default table lists
FAILING_SHOWN = 10
#: columns the table always keeps, even empty
_KEPT = ("kind", "backend", "runs", "latest", "latest_status")


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in row.items() if k not in ("changes", "shifts")},
            "changes_text": changes_text(row["changes"]), "shifts_text": shifts_text(row["shifts"]),
            "noise_text": noise_text(row)}


def history_run(store_url: str, filters: dict[str, Any], judged: Sequence[Path], gate: Gate | None,
                rows: list[dict[str, Any]]) -> HistoryRun:
    """The run record of a history: who wrote it and when, the store read, the filters, the files judged (--with),
    the method and the gate."""
    run = HISTORY.run(lnbench_command="history", command_line=command_line(), lnbench_version=lnbench.__version__,
                      git_commit=git_commit(), timestamp=timestamp(), store_url=store_url,
                      filters={k: v for k, v in filters.items() if v and k not in ("last", "exclude_loaded")},
                      last_runs=filters.get("last"), exclude_loaded=bool(filters.get("exclude_loaded")),
                      change_method=METHOD, change_test=METHOD_TEXT, fdr_q=FDR_Q,
                      series_tested=sum(r.get("noise_pct") is not None and r["kind"] not in CHECK_KINDS
                                        for r in rows))
    if judged:
        run.judged_files = "; ".join(map(str, judged))
    if gate is not None:
        counts = gate.counts()
        run.set(fail_on_regression_pct=gate.pct, regressions=len(gate.slower),
                unjudged=counts.get("nothing to judge yet", 0), gate_text=gate.exit_text,
                not_gated=counts.get("not gated (unit)", 0), too_noisy=counts.get("too noisy for the threshold", 0))
    return run


def _newest_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Series with change points first (the fewest runs since the newest change first), then failing checks, then
    the rest in series order."""
    def key(row: dict[str, Any]) -> tuple[int, int]:
        if row["changes"]:
            return 0, row["runs"] - row["changes"][-1]["index"]
        return (1 if row["since"] else 2), 0
    return sorted(rows, key=key)


def shown_rows(rows: list[dict[str, Any]], listed: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The series the table lists (`listed`: every one, as --kind and --all ask) and a line for each kind it
    summarizes instead (module docstring)."""
    if listed:
        return _newest_first(rows), []
    shown = [r for r in rows if r["kind"] not in SUMMARIZED_KINDS]
    failing = [r for r in rows if r["kind"] in CHECK_KINDS and r["latest_status"] in BAD]
    lines = [_kind_line(kind, [r for r in rows if r["kind"] == kind], len(failing) > FAILING_SHOWN)
             for kind in SUMMARIZED_KINDS if any(r["kind"] == kind for r in rows)]
    return _newest_first(shown) + _newest_first(failing)[:FAILING_SHOWN], lines


def _latest_status(row: dict[str, Any]) -> str:
    """A series' latest status; a valued kind's series without a value says so."""
    status = row["latest_status"] or "no status"
    valued = row["kind"] in CHECK_KINDS or (row["latest"] is not None and row["latest"] == row["latest"])
    return status if valued else f"without a value, {status}"


def _kind_line(kind: str, rows: list[dict[str, Any]], cut: bool) -> str:
    """One kind's series in a line: how many, their latest statuses, and how to list them."""
    statuses = Counter(_latest_status(r) for r in rows)
    counts = ", ".join(f"{n} {status}" for status, n in statuses.most_common())
    failing = sum(n for status, n in statuses.items() if status in BAD)
    shown = (f"; the table lists the first {FAILING_SHOWN} failing" if cut else "; the table lists the failing") \
        if failing else ""
    return f"{kind}: {len(rows)} series ({counts}){shown}; --kind {kind} or --all lists them"


def _columns(rows: list[dict[str, Any]]) -> list[Column]:
    """The table's columns, less those empty in every row listed."""
    return [c for c in COLUMNS if c.key in _KEPT or any(r.get(c.key) not in ("", None) for r in rows)]


def _tables(console_: Any, rows: list[dict[str, Any]]) -> None:
    """One table a machine (its name in the title), the rows in their order."""
    machines = sorted({r["machine"] for r in rows})
    for machine in machines or [""]:
        table = [_flat(r) for r in rows if r["machine"] == machine]
        render_table(console_, f"History: {machine}" if machine else "History", _columns(table), table)


def gate_lines(gate: Gate) -> list[str]:
    """The gate's verdict and why the rest pass, as the summary's last lines (the exit status is in the first)."""
    counts = gate.counts()
    rest = ", ".join(f"{n} {kind}" for kind, n in counts.items() if kind != "failing")
    return [gate.exit_text + (f"; {rest}" if rest else "")]


def render(rows: list[dict[str, Any]], gate: Gate | None, run: HistoryRun, csv_path: Path | None,
           json_path: Path | None, md_path: Path | None, quiet: bool, listed: bool = True) -> None:
    """The table (unless quiet; `listed`: every series, else shown_rows' choice) and the result files: one
    HistoryRow a series (the CSV's columns, the JSON's `data`), the JSON's `series` with each series' change
    points as lists, the Markdown."""
    if gate is not None:
        rows = [{**r, "gate": gate.notes.get(r["series_id"], "")} for r in rows]
    flat = [_flat(r) for r in rows]
    machines = sorted({r["machine"] for r in rows})
    summary = (f"{len(rows)} series on {len(machines)} machine(s); {sum(bool(r['changes']) for r in rows)} with "
               f"change points; {sum(bool(r['shifts']) for r in rows)} with machine shifts inside a commit; "
               f"{sum(bool(r['since']) for r in rows)} failing checks")
    method = f"change points: {METHOD_TEXT} ({run.series_tested} series)"
    shown, lines = shown_rows(rows, listed)
    _tables(silent_console() if quiet else console, shown)
    if gate is not None and gate.slower:
        slower = [{**r, "gate": gate.notes.get(r["series_id"], "")} for r in gate.slower]
        render_table(console, f"Slowdowns of at least {gate.pct:g}% (the newest change point)", _columns(
            [_flat(r) for r in slower]), [_flat(r) for r in slower])
    for line in [] if quiet else lines:
        console.print(line, markup=False, highlight=False)
    tail = gate_lines(gate) if gate is not None else []
    for line in [summary, method, *tail]:
        console.print(line, markup=False, highlight=False)
    md_text = markdown.document("lnbench history", " ".join([summary, *tail]), SHOWN, [*lines, method])
    emit_outputs([HistoryRow.of(row) for row in flat], run, csv_path, json_path, extra_json={"series": rows},
                 md_path=md_path, summary="\n".join([summary, *tail]), md_text=md_text)
