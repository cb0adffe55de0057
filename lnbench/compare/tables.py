"""What `lnbench compare` prints: the per-case table, the summary line, the gate and warning lines."""
from __future__ import annotations

from typing import Any

from rich.markup import escape

from lnbench.cli_common import console, err_console
from lnbench.compare.markdown import ratio_text
from lnbench.compare.verdict import Settings
from lnbench.measure import stats
from lnbench.output.tables import Column, fmt_float, fmt_time_us, render_table
from lnbench.results import CompareRow
from lnbench.results.verdicts import Verdict

SLOWER, FASTER, SAME, TOO_FEW, NOT_COMPARED = (Verdict.SLOWER, Verdict.FASTER, Verdict.SAME, Verdict.TOO_FEW,
                                               Verdict.NOT_COMPARED)
TABLE_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("op", "op", justify="left"),
    Column("dtype", "dtype", justify="left"), Column("shape", "shape"), Column("mode", "mode", justify="left"),
    Column("base_us", "base time", fmt_time_us), Column("new_us", "new time", fmt_time_us),
    Column("_ratio", "new/base [CI] (change)"), Column("p", "p (t)", fmt_float(2)),
    Column("_verdict", "verdict", justify="left", markup=True), Column("detail", "detail", justify="left"),
]


def _verdict_cell(verdict: str) -> str:
    style = Verdict(verdict).style
    return f"[{style}]{escape(verdict)}[/{style}]"


def summary(rows: list[CompareRow]) -> str:
    """One line counting the verdicts."""
    counts = {v: sum(r.verdict == v for r in rows) for v in Verdict}
    compared = sum(counts[v] for v in Verdict if v.judged)
    text = f"{compared} cases compared: {counts[SLOWER]} SLOWER, {counts[FASTER]} FASTER, {counts[SAME]} SAME"
    if counts[TOO_FEW]:
        text += f", {counts[TOO_FEW]} with {TOO_FEW}"
    listed = [f"{counts[v]} {v}" for v in Verdict if not v.judged and counts[v]]
    return text + (f"; {', '.join(listed)}" if listed else "")


def gate_text(fail_pct: float | None, hits: list[CompareRow]) -> str:
    """The --fail-if-slower verdict line of the Markdown summary ('' without the gate)."""
    if fail_pct is None:
        return ""
    lost = sum(row.verdict == NOT_COMPARED for row in hits)
    why = f"{len(hits) - lost} case(s) slower by more than {fail_pct:g}%" + (f", {lost} no longer timed" if lost else "")
    return f"--fail-if-slower {fail_pct:g}: FAILED ({why})" if hits else f"--fail-if-slower {fail_pct:g}: passed"


def _gate_line(pct: float, row: CompareRow) -> str:
    case = f"{row.backend} {row.op} {row.dtype} {row.shape} {row.mode}"
    if row.verdict == NOT_COMPARED:        # lost: timed in BASE, untimed in NEW
        return f"--fail-if-slower {pct:g}: {case} was timed in BASE but not in NEW ({row.detail})"
    return f"--fail-if-slower {pct:g}: {case} is {row.change_pct:.1f}% slower (new/base {ratio_text(row)})"


def print_table(rows: list[CompareRow], title: str, settings: Settings, problems: list[str]) -> None:
    """The --force notes, the per-case table and its legend."""
    for problem in problems:
        console.print(f"[yellow]--force: {escape(problem)}[/yellow]", soft_wrap=True)
    shown = [{**r.cells(), "_ratio": ratio_text(r), "_verdict": _verdict_cell(str(r.verdict))} for r in rows]
    render_table(console, title, TABLE_COLUMNS, shown)
    console.print(f"ratio = new/base (> 1: NEW slower); {settings.confidence:.0%} paired t interval over the "
                  f"worker medians with a {settings.run_noise_pct:g}% run noise floor"
                  f"{' (or the session shift the other backends show, when larger)' if settings.peer_controls else ''}"
                  f"; SAME when it contains 1 or "
                  f"|change| < {settings.threshold_pct:g}%; "
                  f"{TOO_FEW} with fewer than 2 paired workers")


def print_notes(rows: list[CompareRow], results: dict[str, Any], settings: Settings,
                fail_pct: float | None, hits: list[CompareRow]) -> None:
    """Busy-machine and too-few-runs warnings, then one line per case the gate failed on."""
    for side, result in results.items():
        if result.run.load_flag:
            err_console.print(f"[yellow]lnbench: warning: {side} was timed on a busy machine "
                              f"({escape(str(result.run.load_flag))}): its changes may be the other work's"
                              f"[/yellow]", soft_wrap=True)
    warning = stats.too_few_warning(sum(r.verdict == TOO_FEW for r in rows), "case", settings.confidence)
    if warning:
        err_console.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)
    for row in hits:
        assert fail_pct is not None             # the gate fails cases only with --fail-if-slower PCT
        console.print(f"[bold red]{escape(_gate_line(fail_pct, row))}[/bold red]", soft_wrap=True)
