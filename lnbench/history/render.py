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

from lnbench.version import __version__
from lnbench.output import markdown
from lnbench.machine.checkout import git_commit, timestamp
from lnbench.cli_common import console, emit_outputs
from lnbench.history.cache import METHOD
from lnbench.history.gate import Gate
from lnbench.history.significance import FDR_Q, METHOD_TEXT
from lnbench.history.summary import BAD, CHECK_KINDS, Series, changes_text, noise_text, shifts_text
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


def _flat(series: Series) -> HistoryRow:
    """A series' row with the text columns of its change points, shifts and noise (the table's, the files')."""
    return series.row.with_(changes_text=changes_text(series.changes), shifts_text=shifts_text(series.shifts),
                            noise_text=noise_text(series.row))


def history_run(store_url: str, filters: dict[str, Any], judged: Sequence[Path], gate: Gate | None,
                rows: list[Series]) -> HistoryRun:
    """The run record of a history: who wrote it and when, the store read, the filters, the files judged (--with),
    the method and the gate."""
    run = HISTORY.run(lnbench_command="history", command_line=command_line(), lnbench_version=__version__,
                      git_commit=git_commit(), timestamp=timestamp(), store_url=store_url,
                      filters={k: v for k, v in filters.items() if v and k not in ("last", "exclude_loaded")},
                      last_runs=filters.get("last"), exclude_loaded=bool(filters.get("exclude_loaded")),
                      change_method=METHOD, change_test=METHOD_TEXT, fdr_q=FDR_Q,
                      series_tested=sum(s.row.noise_pct is not None and s.row.kind not in CHECK_KINDS
                                        for s in rows))
    if judged:
        run.judged_files = "; ".join(map(str, judged))
    if gate is not None:
        counts = gate.counts()
        run.set(fail_on_regression_pct=gate.pct, regressions=len(gate.slower),
                unjudged=counts.get("nothing to judge yet", 0), gate_text=gate.exit_text,
                not_gated=counts.get("not gated (unit)", 0), too_noisy=counts.get("too noisy for the threshold", 0))
    return run


def _newest_first(rows: list[Series]) -> list[Series]:
    """Series with change points first (the fewest runs since the newest change first), then failing checks, then
    the rest in series order."""
    def key(series: Series) -> tuple[int, int]:
        if series.changes:
            return 0, int(series.row.runs or 0) - series.changes[-1]["index"]
        return (1 if series.row.since else 2), 0
    return sorted(rows, key=key)


def shown_rows(rows: list[Series], listed: bool) -> tuple[list[Series], list[str]]:
    """The series the table lists (`listed`: every one, as --kind and --all ask) and a line for each kind it
    summarizes instead (module docstring)."""
    if listed:
        return _newest_first(rows), []
    shown = [s for s in rows if s.row.kind not in SUMMARIZED_KINDS]
    failing = [s for s in rows if s.row.kind in CHECK_KINDS and s.row.latest_status in BAD]
    lines = [_kind_line(kind, [s.row for s in rows if s.row.kind == kind], len(failing) > FAILING_SHOWN)
             for kind in SUMMARIZED_KINDS if any(s.row.kind == kind for s in rows)]
    return _newest_first(shown) + _newest_first(failing)[:FAILING_SHOWN], lines


def _latest_status(row: HistoryRow) -> str:
    """A series' latest status; a valued kind's series without a value says so."""
    status = row.latest_status or "no status"
    valued = row.kind in CHECK_KINDS or (row.latest is not None and row.latest == row.latest)
    return status if valued else f"without a value, {status}"


def _kind_line(kind: str, rows: list[HistoryRow], cut: bool) -> str:
    """One kind's series in a line: how many, their latest statuses, and how to list them."""
    statuses = Counter(_latest_status(r) for r in rows)
    counts = ", ".join(f"{n} {status}" for status, n in statuses.most_common())
    failing = sum(n for status, n in statuses.items() if status in BAD)
    shown = (f"; the table lists the first {FAILING_SHOWN} failing" if cut else "; the table lists the failing") \
        if failing else ""
    return f"{kind}: {len(rows)} series ({counts}){shown}; --kind {kind} or --all lists them"


def _columns(rows: list[HistoryRow]) -> list[Column]:
    """The table's columns, less those empty in every row listed."""
    return [c for c in COLUMNS if c.key in _KEPT or any(r.value(c.key) not in ("", None) for r in rows)]


def _tables(console_: Any, rows: list[Series]) -> None:
    """One table a machine (its name in the title), the rows in their order."""
    machines = sorted({str(s.row.machine) for s in rows})
    for machine in machines or [""]:
        table = [_flat(s) for s in rows if str(s.row.machine) == machine]
        render_table(console_, f"History: {machine}" if machine else "History", _columns(table), table)


def _gated(series: Series, gate: Gate) -> Series:
    """The series with the gate's note on it."""
    return Series(series.row.with_(gate=gate.notes.get(int(series.row.series_id or 0), "")), series.changes,
                  series.shifts)


def gate_lines(gate: Gate) -> list[str]:
    """The gate's verdict and why the rest pass, as the summary's last lines (the exit status is in the first)."""
    counts = gate.counts()
    rest = ", ".join(f"{n} {kind}" for kind, n in counts.items() if kind != "failing")
    return [gate.exit_text + (f"; {rest}" if rest else "")]


def render(rows: list[Series], gate: Gate | None, run: HistoryRun, csv_path: Path | None,
           json_path: Path | None, md_path: Path | None, quiet: bool, listed: bool = True) -> None:
    """The table (unless quiet; `listed`: every series, else shown_rows' choice) and the result files: one
    HistoryRow a series (the CSV's columns, the JSON's `data`), the JSON's `series` with each series' change
    points as lists, the Markdown."""
    if gate is not None:
        rows = [_gated(s, gate) for s in rows]
    flat = [_flat(r) for r in rows]
    machines = sorted({str(s.row.machine) for s in rows})
    summary = (f"{len(rows)} series on {len(machines)} machine(s); {sum(bool(s.changes) for s in rows)} with "
               f"change points; {sum(bool(s.shifts) for s in rows)} with machine shifts inside a commit; "
               f"{sum(bool(s.row.since) for s in rows)} failing checks")
    method = f"change points: {METHOD_TEXT} ({run.series_tested} series)"
    shown, lines = shown_rows(rows, listed)
    _tables(silent_console() if quiet else console, shown)
    if gate is not None and gate.slower:
        slower = [_gated(s, gate) for s in gate.slower]
        render_table(console, f"Slowdowns of at least {gate.pct:g}% (the newest change point)", _columns(
            [_flat(r) for r in slower]), [_flat(r) for r in slower])
    for line in [] if quiet else lines:
        console.print(line, markup=False, highlight=False)
    tail = gate_lines(gate) if gate is not None else []
    for line in [summary, method, *tail]:
        console.print(line, markup=False, highlight=False)
    md_text = markdown.document("lnbench history", " ".join([summary, *tail]), SHOWN, [*lines, method])
    emit_outputs(flat, run, csv_path, json_path, extra_json={"series": [s.json() for s in rows]},
                 md_path=md_path, summary="\n".join([summary, *tail]), md_text=md_text)
