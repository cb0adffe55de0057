"""`lnbench compare BASE NEW`: two perf (or abi-compare) JSON results → per-case ratio, interval, verdict.

Reads only result files (no torch work, no GPU). Exit 0; 1 when `--fail-if-slower PCT` finds a case that is
significantly slower by more than PCT % (never one with too few runs to tell) or one BASE timed and NEW holds
untimed (an error, a timeout); 2 on bad input (not a result, different commands, no overlap, a
device / dtype / protocol mismatch without --force).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lnbench import validate
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, OutputFile, config_option, console, emit_flydsl_text,
                                emit_outputs, flydsl_table_option, guarded, output_options)
from lnbench.errors import LnbenchUsageError


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path), required=False)
@click.argument("new", type=click.Path(path_type=Path), required=False)
@click.option("--threshold", "threshold_pct", type=validate.FLOAT, metavar="PCT",
              help="Changes smaller than PCT % are SAME (default: config [compare] threshold_pct).")
@click.option("--fail-if-slower", "fail_pct", type=validate.FLOAT, metavar="PCT",
              help="Exit 1 when a case is significantly slower (verdict SLOWER) by more than PCT %, or BASE "
                   "timed it and NEW holds it untimed (an error); a case with too few runs to tell never fails it.")
@click.option("--force", is_flag=True, help="Compare even when device, dtypes or protocol differ, or a run is "
                                           "incomplete (interrupted: only its finished cases).")
@click.option("--md", "md_path", type=OutputFile(dir_okay=True), help="Also write a Markdown summary (PR comment).")
@flydsl_table_option("Also print the comparison as the `=== Benchmark: current vs LABEL ===` block of FlyDSL's CI "
                     "(TB/s of BASE and NEW, ratio and delta from the paired comparison; FlyDSL's dashboard parser "
                     "flags a case at -3 %), even with --quiet; with FILE, write it to FILE too. perf results only.")
@click.option("--flydsl-label", default="main", show_default=True, metavar="LABEL",
              help="BASE's label in the --flydsl-table block: main (FlyDSL's parser: vs main, the regression flag) "
                   "or a tag such as v0.2.0 (vs tag).")
@config_option
@output_options
@guarded
def compare_command(*, base: Path | None, new: Path | None, threshold_pct: float | None, fail_pct: float | None,
                    force: bool, md_path: Path | None, flydsl_table: Path | None, flydsl_label: str,
                    config_path: Path | None, csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Compare two `perf --json` (or `abi-compare --json`) results case by case: ratio new/base of the headline
    medians, a paired t interval over the worker medians (each worker is its own process) widened by the run
    noise floor ([compare] run_noise_pct), its p-value,
    FASTER / SLOWER / SAME, or 'too few runs' with fewer than 2 paired workers (-P 1)."""
    from lnbench.compare import modelled, tables
    from lnbench.compare.markdown import render
    from lnbench.compare.plan import CompareOptions, build_plan, check_flags, context
    from lnbench.compare.verdict import compare_all, gate_hits, lost_cases
    from lnbench.results.flydsl_table import compare_block, perf_rows

    o = CompareOptions(base=base, new=new, threshold_pct=threshold_pct, fail_pct=fail_pct, force=force,
                       md_path=md_path, flydsl_table=flydsl_table, flydsl_label=flydsl_label, config_path=config_path,
                       csv_path=csv_path, json_path=json_path)
    base, new, fail_pct = o.base, o.new, o.fail_pct
    # the flags checked once, before either path: a bad flag is its one line before any file is read (scaffold.setup)
    check_flags(o.threshold_pct, fail_pct, o.flydsl_label)
    pair = modelled.load_pair(base, new) if base is not None and new is not None else None
    if pair is not None:                    # `perf --device emu` results: an exact diff, no statistics
        assert base is not None and new is not None
        if o.flydsl_table is not None:
            raise LnbenchUsageError("--flydsl-table compares timed perf results; these are modelled floors "
                                    "(perf --device emu)")
        return modelled.run(base, new, pair, fail_pct, o.force, o.md_path, o.csv_path, o.json_path, quiet)
    plan = build_plan(o)
    rows = compare_all(plan.base_cases, plan.new_cases, plan.settings)
    meta, summary = context(plan), tables.summary(rows)
    hits = gate_hits(rows, fail_pct, lost_cases(plan.base_cases, plan.new_cases)) if fail_pct is not None else []
    if not quiet:
        tables.print_table(rows, f"lnbench compare ({plan.base.kind}): {base} → {new}", plan.settings,
                           plan.problems)
    csv_final, json_final, md_final = plan.outputs
    emit_outputs(rows, meta, csv_final, json_final, md_path=md_final,
                 md_text=render(rows, meta, summary, tables.gate_text(fail_pct, hits)))
    console.print(summary)
    tables.print_notes(rows, {"BASE": plan.base, "NEW": plan.new}, plan.settings, fail_pct, hits)
    if o.flydsl_table is not None:
        emit_flydsl_text(compare_block(rows, perf_rows(plan.base.rows), o.flydsl_label), plan.flydsl_file)
    return EXIT_FAILED if hits else EXIT_OK


__all__ = ["compare_command"]
