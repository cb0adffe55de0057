"""What `lnbench perf` prints: the table's columns and cells, the notes under it, the summary line."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.markup import escape

from lnbench.cli_common import console, err_console
from lnbench.measure import load
from lnbench.run.workers import WorkerResult
from lnbench.perf.messages import PHASES, payload_of
from lnbench.perf.spread import Group
from lnbench.results import PerfRow, missing
from lnbench.output.tables import (Column, fmt_float, fmt_number, fmt_time_range_us, fmt_time_us, render_table,
                            silent_console, styled_status)


def _minmax(row: Mapping[str, Any]) -> str:
    return fmt_time_range_us(row.get("min_us"), row.get("max_us"))


def _pct(row: Mapping[str, Any]) -> str:
    value = row.get("pct_peak")
    if missing(value):
        return ""
    return f"[bold red]{value:.1f} >peak[/bold red]" if row.get("above_peak") else f"{value:.1f}"


def _kernel_cell(key: str, fmt_value: Callable[[Any], str] = fmt_time_us) -> Callable[[Mapping[str, Any]], str]:
    """A kernel column: the value (a time by default), or `n/a` / `error` when the kernel timer has none for the row."""
    def fmt(row: Mapping[str, Any]) -> str:
        status = str(row.get("kernel_status") or "")
        value = row.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            return fmt_value(value)
        return status.split(" ")[0] if status and status != "ok" else ""
    return fmt


TABLE_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("op", "op", justify="left"),
    Column("dtype", "dtype", justify="left"), Column("shape", "shape"), Column("mode", "mode", justify="left"),
    Column("median_us", "median time", fmt_time_us), Column("_minmax", "min–max (workers)"),
    Column("_kernel", "kernel time"), Column("_kpc", "kernels/call"), Column("_gap", "gap"),
    Column("gbps", "GB/s", fmt_number(4)), Column("_pct", "% peak", markup=True),
    Column("speedup", "speed-up", fmt_number(3, "×")),
    Column("iters", "I", fmt_float(6)), Column("status", "status", styled_status, justify="left"),
]
#: shown with --devices: the GPU that timed the row, and `alone` where no other GPU was timing
GPU_COLUMN = Column("_gpu", "GPU", justify="left")
#: shown only when a row has one: the worker flag (lnbench.measure.stats.worker_flags)
NOTE_COLUMN = Column("worker_flag", "note", justify="left")
_CELLS = {"_gpu": lambda r: f"{r.get('gpu', '')}{' alone' if r.get('timed_alone') else ''}", "_minmax": _minmax, "_pct": _pct, "_kernel": _kernel_cell("kernel_us"),
          "_kpc": _kernel_cell("kernels_per_call", fmt_number(3)), "_gap": _kernel_cell("gap_us")}


def _worker_lines(results: list[WorkerResult]) -> None:
    for result in results:
        if result.ok:
            continue
        err_console.print(f"[bold red]{escape(result.problem())}[/bold red]", soft_wrap=True)
        tail = [line for line in result.stderr_tail.splitlines() if line.strip()][-8:]
        for line in tail:
            err_console.print(f"  [dim]{line}[/dim]", soft_wrap=True, markup=False)


def _detail_lines(rows: Sequence[Mapping[str, Any]]) -> None:
    """Why rows did not run or failed: one line per distinct (backend, op, reason)."""
    seen: dict[tuple[str, str, str], int] = {}
    for row in rows:
        if row["status"] != "ok" and row["detail"]:
            key = (row["backend"], row["op"] if "has no" in row["detail"] else "", row["detail"])
            seen[key] = seen.get(key, 0) + 1
    for (backend, op, detail), count in seen.items():
        what = f"{backend} {op}".strip()
        console.print(f"[yellow]{escape(what)}[/yellow] ({count} case{'s' if count > 1 else ''}): {escape(detail)}",
                      soft_wrap=True)


def _kernel_lines(rows: Sequence[Mapping[str, Any]]) -> None:
    """Why the kernel columns are empty (one line per distinct reason), and kernel notes."""
    seen: dict[str, int] = {}
    for row in rows:
        status = str(row.get("kernel_status") or "")
        if status and status != "ok":
            text = status[len("n/a ("):-1] if status.startswith("n/a (kernel timer off") else f"kernel timer {status}"
            seen[text] = seen.get(text, 0) + 1
        if row.get("kernel_note"):
            key = f"{row['backend']} {row['op']} {row['shape']} {row['mode']} kernel: {row['kernel_note']}"
            seen[key] = seen.get(key, 0) + 1
    for text, count in seen.items():
        console.print(f"[yellow]{escape(text)}[/yellow] ({count} case{'s' if count > 1 else ''})", soft_wrap=True)


def summary_line(rows: Sequence[PerfRow], results: list[WorkerResult], seconds: float, groups: list[Group]) -> str:
    """The run's last line: cases by status, workers, the phases' medians, the GPUs and how many ran alone."""
    agg = [r for r in rows if r.row_kind == "aggregate"]
    counts: dict[str, int] = {}
    for row in agg:
        key = str(row.status).split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    bad = sum(1 for r in results if not r.ok)
    parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    workers = f"{len(results)} worker(s)" + (f", {bad} failed" if bad else "")
    phases = []
    for key, name in zip(PHASES, ("start-up", "stream pass", "kernel pass", "host-lock waits")):
        values = [v for v in (payload_of(r).phase_s(key) for r in results if r.payload) if not math.isnan(v)]
        if values and (key != "kernel_s" or max(values) >= 0.05):
            phases.append(f"{name} {statistics.median(values):.1f} s")
    each = f" (each: {', '.join(phases)})" if phases else ""
    gpus = sorted({g.gpu for g in groups if g.slot})
    where = ""
    if len(gpus) > 1:
        alone = [r for r in agg if r.timed_alone]
        measured = sum(1 for r in alone if str(r.alone_reason or "").startswith("measured"))
        where = (f"; on {len(gpus)} GPUs ({', '.join(gpus)}), {len(alone)} of {len(agg)} cases timed alone "
                 f"(host-bound: {len(alone) - measured} by size, {measured} measured)")
    elif gpus:
        where = f"; on {gpus[0]}"
    return f"{len(agg)} cases: {parts}; {workers}{each}{where}; {seconds:.1f} s"


def print_rows(rows: Sequence[PerfRow], groups: list[Group], results: list[WorkerResult], title: str,
               base_name: str, backend_list: list[str], quiet: bool) -> None:
    """The table of aggregate rows (quiet: recorded for the Markdown only), its notes, group and worker errors."""
    shown = [{**cells, **{key: cell(cells) for key, cell in _CELLS.items()}}
             for cells in (r.cells() for r in rows if r.row_kind == "aggregate")]
    extra = ([GPU_COLUMN] if any(g.slot for g in groups) else []) + \
        ([NOTE_COLUMN] if any(r.get("worker_flag") for r in shown) else [])
    render_table(console if not quiet else silent_console(), title, TABLE_COLUMNS + extra, shown)   # quiet: Markdown only
    if not quiet:
        _detail_lines(shown)
        _kernel_lines(shown)
        if base_name not in backend_list:
            console.print(f"[yellow]speed-up left empty: the baseline {escape(base_name)} is not among the timed "
                          f"backends ({', '.join(backend_list)}); --baseline chooses one[/yellow]", soft_wrap=True)
        if any(r["above_peak"] for r in shown):
            console.print("[bold red]>peak[/bold red]: above the measured copy bandwidth — a cache effect, "
                          "not a result (use --mode cold)")
    for group in groups:
        if group.error:
            err_console.print(f"[bold red]{escape(group.gpu)}: {escape(group.error)}[/bold red]", soft_wrap=True)
    _worker_lines(results)


def print_peak(device: str, path: Path, record: dict[str, Any], change: str, load_flag: str) -> None:
    """What `lnbench peak` prints: the measured record as a one-row table, where it was cached, then the
    warnings (a busy machine, a figure changed beyond the noise) on stderr."""
    render_table(console, "lnbench peak (device-to-device copy, bytes read + written)",
                 [Column("device", "device", justify="left"), Column("gbps", "GB/s", fmt_number(4)),
                  Column("copy_mib", "copy MiB", fmt_number(4)), Column("median_us", "median time", fmt_time_us),
                  Column("iters_per_run", "I")],
                 [{**record, "device": device, "copy_mib": record["copy_bytes"] / (1 << 20)}])
    console.print(f"peak cached in {path}")
    for line in (load.warning(load_flag), f"lnbench: warning: {change}" if change else ""):
        if line:
            err_console.print(f"[yellow]{escape(line)}[/yellow]", soft_wrap=True)
