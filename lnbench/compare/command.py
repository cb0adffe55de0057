"""`lnbench compare BASE NEW`: two perf (or abi-compare) JSON results → per-case ratio, interval, verdict.

Reads only result files (no torch work, no GPU). Exit 0; 1 when `--fail-if-slower PCT` finds a case that is
significantly slower by more than PCT % (never one with too few runs to tell); 2 on bad input (not a result, different commands, no overlap, a
device / dtype / protocol mismatch without --force).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

import lnbench
from lnbench.measure import stats
from lnbench import config as cfg
from lnbench import validate
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, OutputFile, config_input, console, emit_outputs, err_console,
                                guarded, output_options, reserve_outputs)
from lnbench.compare.cases import timed_cases
from lnbench.compare.markdown import ratio_text, render
from lnbench.compare.match import mismatches, require_overlap, same_command
from lnbench.compare.results import ABI, PERF, load_result
from lnbench.compare.verdict import (FASTER, NOT_COMPARED, ONLY_BASE, ONLY_NEW, SAME, SLOWER, TOO_FEW, Settings,
                                     compare_all, gate_hits)
from lnbench.errors import LnbenchUsageError
from lnbench.metadata import command_line, git_commit, timestamp
from lnbench.report import Column, fmt_float, fmt_time_us, render_table
from lnbench.results import COMPARE

_STYLES = {SLOWER: "bold red", FASTER: "green", SAME: "dim", ONLY_BASE: "yellow", ONLY_NEW: "yellow",
           NOT_COMPARED: "yellow", TOO_FEW: "yellow"}
TABLE_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("op", "op", justify="left"),
    Column("dtype", "dtype", justify="left"), Column("shape", "shape"), Column("mode", "mode", justify="left"),
    Column("base_us", "base time", fmt_time_us), Column("new_us", "new time", fmt_time_us),
    Column("_ratio", "new/base [CI] (change)"), Column("p", "p (t)", fmt_float(2)),
    Column("_verdict", "verdict", justify="left", markup=True), Column("detail", "detail", justify="left"),
]


def _verdict_cell(verdict: str) -> str:
    style = _STYLES.get(verdict, "")
    return f"[{style}]{escape(verdict)}[/{style}]" if style else escape(verdict)


def _summary(rows: list[dict[str, Any]]) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows)
              for v in (SLOWER, FASTER, SAME, TOO_FEW, ONLY_BASE, ONLY_NEW, NOT_COMPARED)}
    compared = counts[SLOWER] + counts[FASTER] + counts[SAME] + counts[TOO_FEW]
    text = f"{compared} cases compared: {counts[SLOWER]} SLOWER, {counts[FASTER]} FASTER, {counts[SAME]} SAME"
    if counts[TOO_FEW]:
        text += f", {counts[TOO_FEW]} with {TOO_FEW}"
    listed = [f"{counts[v]} {v}" for v in (ONLY_BASE, ONLY_NEW, NOT_COMPARED) if counts[v]]
    return text + (f"; {', '.join(listed)}" if listed else "")


def _gate_line(pct: float, row: dict[str, Any]) -> str:
    return (f"--fail-if-slower {pct:g}: {row['backend']} {row['op']} {row['dtype']} {row['shape']} {row['mode']} "
            f"is {row['change_pct']:.1f}% slower (new/base {ratio_text(row)})")


def _context(base, new, settings: Settings, fail_pct: float | None, forced: list[str]) -> dict[str, Any]:
    """Flat metadata of the comparison (CSV columns, JSON metadata, Markdown header)."""
    out: dict[str, Any] = {"schema": COMPARE.schema, "command": "compare", "source_command": base.kind,
                           "command_line": command_line(), "lnbench_version": lnbench.__version__,
                           "git_commit": git_commit(), "timestamp": timestamp(), "base": str(base.path),
                           "new": str(new.path)}
    for side, result in (("base", base), ("new", new)):
        meta = result.metadata
        out[f"{side}_device"] = meta.get("device_name") or meta.get("device")
        out[f"{side}_commit"] = meta.get("git_commit") or ""
        out[f"{side}_timestamp"] = meta.get("timestamp") or ""
        out[f"{side}_lnbench_version"] = meta.get("lnbench_version") or ""
    out.update(threshold_pct=settings.threshold_pct, confidence=settings.confidence,
               interval="paired t over worker medians", fail_if_slower_pct=fail_pct, forced="; ".join(forced))
    return out


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path), required=False)
@click.argument("new", type=click.Path(path_type=Path), required=False)
@click.option("--threshold", "threshold_pct", type=validate.FLOAT, metavar="PCT",
              help="Changes smaller than PCT % are SAME (default: config [compare] threshold_pct).")
@click.option("--fail-if-slower", "fail_pct", type=validate.FLOAT, metavar="PCT",
              help="Exit 1 when a case is significantly slower (verdict SLOWER) by more than PCT %; "
                   "a case with too few runs to tell never fails it.")
@click.option("--force", is_flag=True, help="Compare even when device, dtypes or protocol differ, or a run is "
                                           "incomplete (interrupted: only its finished cases).")
@click.option("--md", "md_path", type=OutputFile(dir_okay=True), help="Also write a Markdown summary (PR comment).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none).")
@output_options
@guarded
def compare_command(base: Path | None, new: Path | None, threshold_pct: float | None, fail_pct: float | None, force: bool,
                    md_path: Path | None, config_path: Path | None, csv_path: Path | None, json_path: Path | None,
                    quiet: bool) -> int:
    """Compare two `perf --json` (or `abi-compare --json`) results case by case: ratio new/base of the headline
    medians, a paired t interval over the worker medians (each worker is its own process), its p-value,
    FASTER / SLOWER / SAME, or 'too few runs' with fewer than 2 paired workers (-P 1)."""
    if base is None or new is None:
        raise LnbenchUsageError("compare needs two result files: lnbench compare BASE NEW")
    if fail_pct is not None:
        validate.number(fail_pct, "fail_if_slower", "--fail-if-slower")
    settings = Settings.from_config(cfg.load_config(config_path), threshold_pct)
    what = "the JSON of lnbench perf or abi-compare"
    base_result = load_result(base, (PERF, ABI), what=what)
    new_result = load_result(new, (PERF, ABI), what=what)
    same_command(base_result, new_result)
    base_cases, new_cases = timed_cases(base_result), timed_cases(new_result)
    problems = mismatches(base_result, new_result, base_cases, new_cases)
    problems += [f"{result.path} holds an incomplete run ({result.incomplete}): only its finished cases"
                 for result in (base_result, new_result) if result.incomplete]
    if problems and not force:
        raise LnbenchUsageError(f"BASE and NEW are not comparable: {'; '.join(problems)} (--force compares anyway)")
    require_overlap(base_cases, new_cases, base_result, new_result)
    outputs = reserve_outputs("compare", {"--csv": csv_path, "--json": json_path, "--md": md_path},
                              {"BASE": base, "NEW": new, **config_input(config_path)})

    rows = compare_all(base_cases, new_cases, settings)
    context = _context(base_result, new_result, settings, fail_pct, problems)
    summary = _summary(rows)
    hits, gate = [], ""
    if fail_pct is not None:
        hits = gate_hits(rows, fail_pct)
        gate = (f"--fail-if-slower {fail_pct:g}: FAILED ({len(hits)} case(s) slower by more than {fail_pct:g}%)"
                if hits else f"--fail-if-slower {fail_pct:g}: passed")
    if not quiet:
        for problem in problems:
            console.print(f"[yellow]--force: {escape(problem)}[/yellow]", soft_wrap=True)
        shown = [{**r, "_ratio": ratio_text(r), "_verdict": _verdict_cell(r["verdict"])} for r in rows]
        render_table(console, f"lnbench compare ({base_result.kind}): {base} → {new}", TABLE_COLUMNS, shown)
        console.print(f"ratio = new/base (> 1: NEW slower); {settings.confidence:.0%} paired t interval over the "
                      f"worker medians; SAME when it contains 1 or |change| < {settings.threshold_pct:g}%; "
                      f"{TOO_FEW} with fewer than 2 paired workers")
    emit_outputs(rows, context, outputs.get("--csv"), outputs.get("--json"), md_path=outputs.get("--md"),
                 md_text=render(rows, context, summary, gate))
    console.print(summary)
    for side, result in (("BASE", base_result), ("NEW", new_result)):
        if result.metadata.get("load_flag"):
            err_console.print(f"[yellow]lnbench: warning: {side} was timed on a busy machine "
                              f"({escape(str(result.metadata['load_flag']))}): its changes may be the other work's"
                              f"[/yellow]", soft_wrap=True)
    warning = stats.too_few_warning(sum(r["verdict"] == TOO_FEW for r in rows), "case", settings.confidence)
    if warning:
        err_console.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)
    for row in hits:
        console.print(f"[bold red]{escape(_gate_line(fail_pct, row))}[/bold red]", soft_wrap=True)
    return EXIT_FAILED if hits else EXIT_OK


__all__ = ["compare_command"]
