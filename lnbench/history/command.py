"""`lnbench store FILE...` and `lnbench history`: the click commands over the results store (lnbench.store)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lnbench import validate
from lnbench.cli_common import EXIT_FAILED, EXIT_OK, OutputFile, config_option, console, guarded, md_option
from lnbench.output.tables import Column, render_table

_STORE_HELP = ("The results store: an SQLAlchemy URL (sqlite:///PATH, postgresql+psycopg://user@host/db) or an "
               "SQLite path (default: $LNBENCH_STORE, the config's [store] url, else results/lnbench.sqlite).")


@click.command("store")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "url", help=_STORE_HELP)
@config_option
@guarded
def store_command(files: tuple[Path, ...], url: str | None, config_path: Path | None) -> int:
    """Record result files in the results store, each run once (CSV or JSON of verify, perf, abi-compare,
    inspect, compare, merge, and perf --device emu's modelled floors; or FlyDSL's CI dashboard history.json) (the same run again adds nothing; the shard parts of one run are one run). Every file
    is read before anything is written: one that is not a whole lnbench result stops the command (exit 2)."""
    from lnbench.results import load_result
    from lnbench.store import flydsl
    from lnbench.store.db import open_store
    from lnbench.store.record import record_result
    from lnbench.store.url import store_url

    imports = {p: flydsl.load_history(p) for p in files if flydsl.is_flydsl_history(p)}
    results = [load_result(path) for path in files if path not in imports]
    store = open_store(store_url(url, config_path))
    try:
        rows: list[dict[str, Any]] = []
        for path, records in imports.items():
            runs, points = flydsl.import_history(store, records)
            rows.append({"file": str(path), "kind": "FlyDSL history", "run": f"{runs} new",
                         "recorded": "imported" if runs or points else "already there", "points": f"{points}/{len(records)}"})
        for result in results:
            done = record_result(store, result)
            rows.append({"file": str(result.path), "kind": result.kind, "run": done.run_id,
                         "recorded": "new run" if done.new_run else "new points" if done.new_points else "already there",
                         "points": f"{done.new_points}/{done.points}"})
    finally:
        store.close()
    render_table(console, f"Recorded in {store.url}", [Column("file", "file", justify="left"), Column("kind", "kind"),
                 Column("run", "run"), Column("recorded", "recorded"), Column("points", "new/points")], rows)
    return EXIT_OK


def _filter_options(func):  # noqa: ANN001, ANN201 - click decorators
    for name, help_ in reversed((("--kind", "Only results of this kind (perf, verify, abi-compare, ...; profile: perf "
                                  "--device emu's modelled floors)."),
                                 ("--backend", "Only this backend."), ("--op", "Only this op (fwd, bwd)."),
                                 ("--dtype", "Only this dtype."), ("--shape", "Only this shape (MxN)."),
                                 ("--mode", "Only this mode (perf: hot/cold; abi-compare: metric; verify: tensor)."),
                                 ("--machine", "Only machines whose description contains this text."),
                                 ("--branch", "Only runs of this branch."),
                                 ("--since", "Only runs from this date (YYYY-MM-DD) or commit on."))):
        func = click.option(name, name.lstrip("-"), help=help_)(func)
    return func


@click.command("history")
@_filter_options
@click.option("--last", "last", type=click.IntRange(2), default=200, show_default=True,
              help="Read the newest this many runs that pass the filters.")
@click.option("--exclude-loaded", is_flag=True, help="Leave out runs recorded on a busy machine (load_flag).")
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(0), metavar="PCT",
              help="Exit 1 when a series' newest change point is a slowdown of at least PCT % in its unit's "
                   "direction (a time up; TB/s, GB/s, TFLOPS or a speed-up down), made by the code: at a commit "
                   "boundary, significant against the series' noise after the false discovery rate over every "
                   "series read, not shared by its peers (with --with: a change point at a run of those files). A "
                   "series too noisy for PCT says what it detects and is not gated below that; a series of one "
                   "commit or fewer than 6 runs, or of another unit, passes and says why. Modelled floors (perf "
                   "--device emu) are deterministic: every change of one is a change point, from 2 runs on.")
@click.option("--with", "judged", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
              help="Judge this result file (a pull request's perf.json) as the newest run of its series, without "
                   "recording it (repeatable: two runs find a 5% step reliably, one often not).")
@click.option("--store", "url", help=_STORE_HELP)
@config_option
@click.option("--csv", "csv_path", type=OutputFile(), help="Also write the series as CSV.")
@click.option("--json", "json_path", type=OutputFile(), help="Also write the series (with change points) as JSON.")
@md_option
@click.option("--all", "show_all", is_flag=True,
              help="List every series in the table (by default the checks and abi-compare series are a line each "
                   "kind, unless --kind asks for one; the CSV and JSON always hold every series).")
@click.option("--quiet", "-q", is_flag=True, help="Print no table.")
@click.option("--estimates", is_flag=True,
              help="Also print how good the stored runs' time estimates were, per machine and kind (estimate "
                   "against actual seconds).")
@guarded
def history_command(url: str | None, config_path: Path | None, fail_pct: float | None, judged: tuple[Path, ...],
                    csv_path: Path | None, json_path: Path | None, md_path: Path | None, show_all: bool, quiet: bool,
                    estimates: bool, **filters: object) -> int:
    """Per case over the stored runs: latest value, trend, change points; since when a check fails. A series is
    one case on one machine under one protocol; its change points are where e-divisive finds a change at a commit
    boundary that stands out against the series' noise (the commit range, the size as a ratio with its interval,
    its p and the p adjusted over every series); shifts between runs of one commit are the machine's, listed and
    never gated; for verify, since which commit a case FAILs or errors. The table lists the timed series (those
    with change points first) and the failing checks; verify and abi-compare are a line each (--kind, --all)."""
    from lnbench.history.cache import found_changes
    from lnbench.history.candidates import candidate_points, with_candidates
    from lnbench.history.estimates import estimate_rows, print_estimates
    from lnbench.history.gate import judge
    from lnbench.history.render import history_run, render
    from lnbench.history.query import Filters, load_points
    from lnbench.history.summary import summarize
    from lnbench.store.db import open_store
    from lnbench.store.url import store_url

    validate.distinct_outputs({"--csv": csv_path, "--json": json_path, "--md": md_path},
                              {f"--with {path}": path for path in judged})   # never overwrite a file judged
    chosen = Filters(**filters)                                     # type: ignore[arg-type]
    store = open_store(store_url(url, config_path))
    try:
        points = load_points(store, chosen, worker_values=True)
        if judged:                      # runs that are not in the store: searched, never cached
            points = with_candidates(points, candidate_points(store, judged, chosen))
        rows = summarize(points, None if judged else lambda searches: found_changes(store, searches))
        estimated = estimate_rows(store) if estimates else []
    finally:
        store.close()
    gate = judge(rows, fail_pct, bool(judged)) if fail_pct is not None else None
    run = history_run(store.url, filters, judged, gate, rows)
    render(rows, gate, run, csv_path, json_path, md_path, quiet, listed=show_all or bool(filters["kind"]))
    if estimates:
        print_estimates(console, estimated)
    return EXIT_FAILED if gate and gate.slower else EXIT_OK


@click.command("report")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder to write the dashboard into (index.html; created if missing).")
@_filter_options
@click.option("--last", "last", type=click.IntRange(2), default=200, show_default=True,
              help="Chart the newest this many runs that pass the filters.")
@click.option("--exclude-loaded", is_flag=True, help="Leave out runs recorded on a busy machine (load_flag).")
@click.option("--store", "url", help=_STORE_HELP)
@config_option
@guarded
def report_command(out_dir: Path, url: str | None, config_path: Path | None, **filters: object) -> int:
    """Write a static HTML dashboard of the results store (what changed, trends, checks) to a folder.
    It works offline (no script, no CDN), top to bottom: every change point (slowdowns first, with commits, size
    and p), each machine's timed series as charts with axes, noise bands and change points marked, the checks
    (failures first, all PASS in one line), then abi-compare, the modelled floors and the latest compare."""
    from lnbench.history.cache import found_changes
    from lnbench.history.query import Filters, load_points
    from lnbench.history.report import render_html
    from lnbench.history.summary import summarize
    from lnbench.output.files import atomic_write
    from lnbench.store.db import open_store
    from lnbench.store.url import store_url

    store = open_store(store_url(url, config_path))
    try:
        points = load_points(store, Filters(**filters), worker_values=True)     # type: ignore[arg-type]
        rows = summarize(points, lambda searches: found_changes(store, searches))
    finally:
        store.close()
    html = render_html(points, rows, store.url)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = atomic_write(out_dir / "index.html", lambda tmp: Path(tmp).write_text(html, encoding="utf-8"))
    console.print(f"Report written to {path}", markup=False, highlight=False)
    return EXIT_OK


@click.command("flydsl-table")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--backend", help="Print only this backend's cases (default: every backend's; the flydsl backend's "
                                "under FlyDSL's op names, every other one's with @BACKEND appended).")
@guarded
def flydsl_table_command(file: Path, backend: str | None) -> int:
    """Print a perf result as FlyDSL's CI benchmark table (op shape dtype TB/s TFLOPS), the table FlyDSL's CI
    scripts and dashboard parse: every case (of a `perf --device emu` profile too), `-` for one not measured (stderr
    says why), FlyDSL's op and dtype names, TB/s at the headline time (`lnbench perf --flydsl-table` prints the same
    after its run)."""
    from lnbench.cli_common import err_console
    from lnbench.results import PERF_KIND, PROFILE_KIND, load_result
    from lnbench.results.flydsl_table import choose, not_measured_note, render, result_rows

    result = load_result(file, (PERF_KIND, PROFILE_KIND))
    table = choose(result_rows(result.kind, result.rows), backend, str(result.path))
    click.echo(render(table), nl=False)
    note = not_measured_note(table)
    if note:
        err_console.print(note, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK
