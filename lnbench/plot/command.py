"""`lnbench plot RESULTS...`: a PNG (or a few) per result file, by the command that wrote it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from lnbench import validate
from lnbench.cli_common import EXIT_OK, console, err_console, guarded
from lnbench.results import (ABI_KIND as ABI, COMPARE_KIND as COMPARE, PERF_KIND as PERF, PROFILE_KIND as PROFILE,
                             VERIFY_KIND as VERIFY, ResultFile, load_result)
from lnbench.errors import LnbenchUsageError
from lnbench.plot.figures import png_writer
from lnbench.plot.modelled import profile_figures
from lnbench.plot.perf import perf_figures
from lnbench.plot.ratios import abi_figures, compare_figures
from lnbench.plot.verify import verify_figures
from lnbench.output.files import atomic_write_all

PLOTTERS = {PERF: perf_figures, COMPARE: compare_figures, VERIFY: verify_figures, ABI: abi_figures,
            PROFILE: profile_figures}
WHAT = {PERF: "GB/s and % of copy peak by shape", COMPARE: "new/base ratios with intervals",
        VERIFY: "err/allowed per case and tensor", ABI: "runtime speed-ups with intervals",
        PROFILE: "MODELLED roofline and bound_us by N per target"}


def _why_nothing(result: ResultFile) -> str:
    """Why a result gave no picture: an abi-compare run without its runtime part, or no case with a value."""
    if result.kind == ABI and "runtime" not in set(result.rows.get("part", ())):
        return "no runtime rows (a --static-only run)"
    return f"no case of this {result.kind} result has a value"


@click.command("plot")
@click.argument("results", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the PNGs (default: beside each result file).")
@guarded
def plot_command(results: tuple[Path, ...], out_dir: Path | None) -> int:
    """Draw PNGs from result files (JSON or CSV): perf → GB/s and % of peak by shape per backend and op;
    compare → ratios with intervals; verify → err/allowed per case and tensor; abi-compare → speed-ups."""
    if not results:
        raise LnbenchUsageError("no result file given: lnbench plot RESULTS... (perf, compare, verify or abi-compare)")
    unique = [path for i, path in enumerate(results)            # the same file twice is plotted once
              if not any(validate.same_file(path, earlier) for earlier in results[:i])]
    loaded: list[ResultFile] = [load_result(path) for path in unique]   # every file checked before drawing
    for result in loaded:
        if result.incomplete:
            err_console.print(f"[yellow]lnbench: {escape(str(result.path))} holds an incomplete run "
                              f"({escape(result.incomplete)}): its plots show only the finished cases[/yellow]",
                              soft_wrap=True)
    inputs = {f"RESULTS #{i}": path for i, path in enumerate(results, 1)}
    pictures: list[tuple[ResultFile, Path, Any]] = []      # (result, PNG path, figure) of every input
    stems: set[tuple[Path, str]] = set()
    for result in loaded:
        folder = out_dir or result.path.parent
        stem = result.path.stem
        if (folder, stem) in stems:       # perf.json and perf.csv side by side: keep both sets of pictures
            stem = f"{stem}-{result.path.suffix.lstrip('.')}"
        stems.add((folder, stem))
        figures = PLOTTERS[result.kind](result)
        if not figures:
            raise LnbenchUsageError(f"{result.path}: nothing to plot ({_why_nothing(result)})")
        for name, figure in figures:
            path = folder / f"{stem}-{name}.png"
            validate.not_an_input("PNG", path, inputs)     # a picture never replaces a result file being plotted
            pictures.append((result, path, figure))
    # every input drew: now write, all or nothing (every path checked first; no PNG placed unless all are written)
    written = atomic_write_all([(path, png_writer(figure)) for _, path, figure in pictures])
    for (result, _, _), picture in zip(pictures, written):
        console.print(f"{result.kind} ({WHAT[result.kind]}): {picture}")
    console.print(f"{len(written)} PNG(s) written")
    return EXIT_OK
