"""`lnbench plot RESULTS...`: a PNG (or a few) per result file, by the command that wrote it."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click
from rich.markup import escape

from lnbench import validate
from lnbench.cli_common import EXIT_OK, console, err_console, guarded
from lnbench.errors import LnbenchUsageError

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.results import ResultFile


def _plotters() -> dict[str, tuple[Callable[[ResultFile], list[tuple[str, Any]]], str]]:
    """Result kind -> (its figures, what they show); matplotlib and the result model are imported here, when a
    plot is drawn, not for `lnbench plot --help`."""
    from lnbench.plot.modelled import profile_figures
    from lnbench.plot.perf import perf_figures
    from lnbench.plot.ratios import abi_figures, compare_figures
    from lnbench.plot.verify import verify_figures
    from lnbench.results import ABI_KIND, COMPARE_KIND, PERF_KIND, PROFILE_KIND, VERIFY_KIND

    return {PERF_KIND: (perf_figures, "GB/s and % of copy peak by shape"),
            COMPARE_KIND: (compare_figures, "new/base ratios with intervals"),
            VERIFY_KIND: (verify_figures, "err/allowed per case and tensor"),
            ABI_KIND: (abi_figures, "runtime speed-ups with intervals"),
            PROFILE_KIND: (profile_figures, "MODELLED roofline and bound_us by N per target")}


def png_writer(figure: Any) -> Any:
    """lnbench.plot.figures.png_writer (matplotlib imported when a plot is written)."""
    from lnbench.plot.figures import png_writer as figure_writer

    return figure_writer(figure)


def _why_nothing(result: ResultFile) -> str:
    """Why a result gave no picture: an abi-compare run without its runtime part, or no case with a value."""
    from lnbench.results import ABI_KIND

    if result.kind == ABI_KIND and "runtime" not in set(result.rows.get("part", ())):
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
    from lnbench.output.files import atomic_write_all
    from lnbench.results import ResultFile, load_result

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
    plotters = _plotters()
    for result in loaded:
        folder = out_dir or result.path.parent
        stem = result.path.stem
        if (folder, stem) in stems:       # perf.json and perf.csv side by side: keep both sets of pictures
            stem = f"{stem}-{result.path.suffix.lstrip('.')}"
        stems.add((folder, stem))
        figures = plotters[result.kind][0](result)
        if not figures:
            raise LnbenchUsageError(f"{result.path}: nothing to plot ({_why_nothing(result)})")
        for name, figure in figures:
            path = folder / f"{stem}-{name}.png"
            validate.not_an_input("PNG", path, inputs)     # a picture never replaces a result file being plotted
            pictures.append((result, path, figure))
    # every input drew: now write, all or nothing (every path checked first; no PNG placed unless all are written)
    written = atomic_write_all([(path, png_writer(figure)) for _, path, figure in pictures])
    for (result, _, _), picture in zip(pictures, written):
        console.print(f"{result.kind} ({plotters[result.kind][1]}): {picture}")
    console.print(f"{len(written)} PNG(s) written")
    return EXIT_OK
