"""`lnbench perf` and `lnbench peak`: config → protocol → cases → workers → rows → table + CSV/JSON."""
from __future__ import annotations

import math
import os
import statistics
import threading
from pathlib import Path
from typing import Any, Callable

import click
from rich.markup import escape

from lnbench import config as cfg
from lnbench import validate
from lnbench.backends import (OWN_FLYDSL, backend_names, check_backend_names, configure_sources, is_backend_name,
                              runs_flydsl, set_kernel_src, source_metadata)
from lnbench.clocks import gpu_facts
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, OutputFile, config_input, console, err_console, guarded,
                                kernel_source_option, md_option, nothing_ran, output_options, prepare_outputs)
from lnbench.constants import DTYPES
from lnbench.device import Device, parse_device
from lnbench.errors import LnbenchUsageError
from lnbench.flydsl import preflight
from lnbench.gpus import devices_metadata, devices_options, parse_devices
from lnbench.metadata import run_metadata
from lnbench.perf.aggregate import HEADLINES, failed
from lnbench.perf.cases import backend_skips, build_cases
from lnbench.measure import load
from lnbench.measure.kernel_timer import unavailable_reason
from lnbench.perf.peak import (PEAK_MIN_LLC_FACTOR, cache_problem, copy_size, default_peak_path, load_peak,
                               measure_copy_bandwidth, reserve_peak_file, store_peak)
from lnbench.measure.protocol import protocol_options
from lnbench.perf.protocol import MODES, PerfProtocol
from lnbench.perf.spread import Group, group_spec, joined_rows, plan_groups, run_groups
from lnbench.perf.worker_main import KERNEL_PHASES, STREAM_PHASES
from lnbench.measure.workers import WorkerResult, run_workers
from lnbench.progress import CommandProgress
from lnbench.result_sink import ResultSink
from lnbench.results import PERF, stamp
from lnbench.shard import parse_shard, shard_metadata, shard_option
from lnbench.report import (Column, fmt_float, fmt_number, fmt_time_range_us, fmt_time_us, render_table,
                            silent_console, styled_status)
WORKER_MODULE = "lnbench.perf.worker_main"


def _minmax(row: dict[str, Any]) -> str:
    return fmt_time_range_us(row.get("min_us"), row.get("max_us"))


def _pct(row: dict[str, Any]) -> str:
    value = row.get("pct_peak")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"[bold red]{value:.1f} >peak[/bold red]" if row.get("above_peak") else f"{value:.1f}"


def _kernel_cell(key: str, fmt_value: Callable[[Any], str] = fmt_time_us) -> Callable[[dict[str, Any]], str]:
    """A kernel column: the value (a time by default), or `n/a` / `error` when the kernel timer has none for the row."""
    def fmt(row: dict[str, Any]) -> str:
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


def check_headline(timer: str, kernel_timer: bool, dev: Device, reason: str) -> str:
    """The --timer value (a click Choice of HEADLINES), checked: `kernel` needs the kernel timer on and a
    device with GPU activity (`reason`: why there is none, '' when there is)."""
    if timer == "kernel":
        if not kernel_timer:
            raise LnbenchUsageError("--timer kernel needs the kernel timer (drop --no-kernel-timer, or set "
                                    "[perf] kernel_timer = true)")
        if reason:
            raise LnbenchUsageError(f"--timer kernel cannot run on {dev.name}: {reason}")
    return timer


def timed_device(name: str | None, other: str = "") -> Device:
    """The --device to time on; the emulated device is refused (its times say nothing about hardware). `other`:
    an option that also chose the device (--devices), so --device is one too many."""
    if other:
        raise LnbenchUsageError(f"--device and {other} both choose where to run: give one")
    dev = parse_device(name)
    if not dev.times_are_real:
        if not dev.executes_flydsl:             # the null device: launches complete without running anything
            raise LnbenchUsageError(f"{dev.name} executes nothing (launches complete at once), so there is no "
                                    f"kernel time to measure (its host cost: `lnbench abi-compare --device {dev.name}`)")
        raise LnbenchUsageError(f"{dev.name} is an emulated device: its times mean nothing, so it cannot be "
                                f"timed (use `lnbench verify --device {dev.name}` to check results)")
    return dev


def choose_backends(requested: list[str], device: Device) -> list[str]:
    """Expand `auto` (FlyDSL on a ROCm GPU, plus torch) and reject unknown names (usage error)."""
    out: list[str] = []
    for name in requested:
        names = (["flydsl", "torch"] if device.executes_flydsl else ["torch"]) if name == "auto" else [name]
        for item in names:
            item = {n.lower(): n for n in backend_names()}.get(item.lower(), item)
            check_backend_names([item])
            if item not in out:
                out.append(item)
    if not out:
        raise LnbenchUsageError("no backend given")
    return out


def _worker_env() -> dict[str, str]:
    """Extra worker environment: Inductor compiles in-process (no compile-worker pool to start or leave
    behind; kernel speed is unaffected) unless the user set TORCHINDUCTOR_COMPILE_THREADS."""
    return {} if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ else {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _list_option(values: tuple[str, ...], table: dict[str, Any], key: str) -> list[str]:
    return validate.listed(values, key.removesuffix("s"), cfg.require(table, key, list, "perf"))


def _worker_lines(results: list[WorkerResult]) -> None:
    for result in results:
        if result.ok:
            continue
        err_console.print(f"[bold red]{escape(result.problem())}[/bold red]", soft_wrap=True)
        tail = [line for line in result.stderr_tail.splitlines() if line.strip()][-8:]
        for line in tail:
            err_console.print(f"  [dim]{line}[/dim]", soft_wrap=True, markup=False)


def _detail_lines(rows: list[dict[str, Any]]) -> None:
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


def _kernel_lines(rows: list[dict[str, Any]]) -> None:
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


def _summary(rows: list[dict[str, Any]], results: list[WorkerResult], seconds: float, groups: list[Group]) -> str:
    agg = [r for r in rows if r["row_kind"] == "aggregate"]
    counts: dict[str, int] = {}
    for row in agg:
        key = row["status"].split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    bad = sum(1 for r in results if not r.ok)
    parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    workers = f"{len(results)} worker(s)" + (f", {bad} failed" if bad else "")
    phases = []
    for key, name in zip(PHASES, ("start-up", "stream pass", "kernel pass")):
        values = [float(r.payload[key]) for r in results if r.payload and isinstance(r.payload.get(key), (int, float))]
        if values and (key != "kernel_s" or max(values) >= 0.05):
            phases.append(f"{name} {statistics.median(values):.1f} s")
    each = f" (each: {', '.join(phases)})" if phases else ""
    gpus = sorted({g.gpu for g in groups if g.slot})
    where = ""
    if len(gpus) > 1:
        alone = [r for r in agg if r.get("timed_alone")]
        measured = sum(1 for r in alone if r.get("alone_reason") == "measured")
        where = (f"; on {len(gpus)} GPUs ({', '.join(gpus)}), {len(alone)} of {len(agg)} cases timed alone "
                 f"(host-bound: {len(alone) - measured} by size, {measured} measured)")
    elif gpus:
        where = f"; on {gpus[0]}"
    return f"{len(agg)} cases: {parts}; {workers}{each}{where}; {seconds:.1f} s"


def if_loaded_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--if-loaded warn|refuse (None = the config's [perf] if_loaded)."""
    return click.option("--if-loaded", type=click.Choice(list(load.POLICIES)),
                        help="On a busy machine (load average above the cores lnbench may use, or another lnbench "
                             "timing run): warn and flag the result, or refuse to time (default: config "
                             "[perf] if_loaded, warn).")(func)


def loaded_policy(option: str | None, table: dict[str, Any]) -> str:
    policy = option or str(cfg.require(table, "if_loaded", str, "perf"))
    if policy not in load.POLICIES:
        raise LnbenchUsageError(f"config [perf] if_loaded must be one of {', '.join(load.POLICIES)}, got {policy!r}")
    return policy


#: tensors of M×N a perf case holds at once (x, y, dy, dx, and backends' workspace), each in the case dtype
PERF_TENSORS = 8

@click.command("perf")
@click.option("--backend", "backends", multiple=True,
              help="Backends to time (repeatable or comma list): auto, " + ", ".join(backend_names()) + ".")
@click.option("--baseline", help="Backend the speed-up column divides by (default: config, torch).")
@click.option("--op", "ops", multiple=True, help="fwd, fwd-nostats, bwd, fwd+bwd (repeatable or comma list).")
@click.option("--mode", "modes", multiple=True, help=f"{', '.join(MODES)} (repeatable or comma list).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (repeatable or comma list).")
@click.option("--shapes", multiple=True, help="MxN list, e.g. 4096x4096,32768x8192 (default: config shape set).")
@click.option("--shape-set", help="Named shape set from the config's [perf.shape_sets].")
@protocol_options
@click.option("--cold-factor", type=validate.FLOAT, help="Cold mode: rotated bytes >= this × last-level cache.")
@click.option("--llc-mib", type=validate.FLOAT, help="Cold mode: last-level cache size in MiB (0 = read off the device).")
@click.option("--timer", "headline", type=click.Choice(list(HEADLINES)), default="stream", show_default=True,
              help="Time behind GB/s, % peak and speed-up: stream (events / wall clock) or kernel (profiler).")
@click.option("--kernel-timer/--no-kernel-timer", "kernel_timer", default=None,
              help="Kernel time from the profiler's GPU activity records, in separate runs after every worker's "
                   "stream-timed ones (default: off, config [perf] kernel_timer; on with --timer kernel; "
                   "n/a without a GPU).")
@click.option("--eps", type=validate.FLOAT, help="LayerNorm eps (default: config).")
@click.option("--seed", type=validate.INT, help="Base random seed (default: config).")
@click.option("--device", help="cpu, cuda, cuda:N (default: the GPU when torch sees one; emu cannot be timed).")
@devices_options
@click.option("--alone-below-mib", "alone_below_mib", type=validate.FLOAT,
              help="With --devices: cases moving fewer MiB per call are timed while no other GPU is timing "
                   "(default: config [perf] alone_below_mib, 64).")
@shard_option
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none).")
@click.option("--peak-file", type=OutputFile(),
              help="Measured-peak cache (default results/peak.json; written by `lnbench peak`).")
@kernel_source_option
@if_loaded_option
@md_option
@output_options
@guarded
def perf_command(backends, baseline, ops, modes, dtypes, shapes, shape_set, processes, runs, warmup_s,
                 min_warmup_calls, target_run_s, min_iters, max_iters, worker_timeout_s, cold_factor, llc_mib,
                 headline, kernel_timer, eps, seed, device, devices, force, alone_below_mib, shard, config_path,
                 peak_file, kernel_src, if_loaded, md_path, csv_path, json_path, quiet) -> int:
    """Time LayerNorm fwd/bwd: P worker processes, each warm-up + R runs of I calls; headline = median of
    the worker medians, with the min–max across workers, GB/s and % of the measured copy peak. On a GPU,
    --kernel-timer adds kernel time (profiler) and the gap to stream time from R more runs per worker."""
    import time

    part = parse_shard(shard)
    slots = parse_devices(devices, force) if devices is not None else None
    dev = timed_device(slots[0].process_device if slots else device, "--devices" if slots and device else "")
    config = cfg.load_config(config_path)
    table = cfg.section(config, "perf")
    alone_mib = validate.number(alone_below_mib if alone_below_mib is not None else
                                cfg.require(table, "alone_below_mib", (int, float), "perf"), "alone_below_mib",
                                "--alone-below-mib" if alone_below_mib is not None else "config [perf] alone_below_mib")
    host_share = float(cfg.require(table, "alone_host_fraction", (int, float), "perf"))
    protocol = PerfProtocol.from_table(
        table, processes=processes, runs=runs, warmup_s=warmup_s, min_warmup_calls=min_warmup_calls,
        target_run_s=target_run_s, min_iters=min_iters, max_iters=max_iters, worker_timeout_s=worker_timeout_s,
        cold_factor=cold_factor, llc_mib=llc_mib,
        kernel_timer=True if kernel_timer is None and headline == "kernel" else kernel_timer,
        modes=tuple(cfg.split_list(modes, "mode")) or None, ops=tuple(cfg.split_list(ops, "op")) or None)
    no_kernel_time = unavailable_reason(dev)
    headline = check_headline(headline, protocol.kernel_timer, dev, no_kernel_time)
    kernel_pass = protocol.kernel_timer and not no_kernel_time
    set_kernel_src(kernel_src)
    configure_sources(config)                    # [backends.NAME]: passed on to the workers
    backend_list = choose_backends(_list_option(backends, table, "backends"), dev)
    base_name = baseline if baseline is not None else str(cfg.require(table, "baseline", str, "perf"))
    if not is_backend_name(base_name):
        raise LnbenchUsageError(f"unknown baseline {base_name!r}; choose from {', '.join(backend_names())}")
    dtype_list = cfg.parse_dtypes(dtypes, cfg.require(table, "dtypes", list, "perf"))
    shape_list = cfg.chosen_shapes(config, "perf", shapes, shape_set)
    if any(runs_flydsl(name) for name in backend_list) and dev.executes_flydsl:
        preflight.toolkit()                                 # FlyDSL kernels (lnbench's or a kernel source's)
    if any(name in OWN_FLYDSL for name in backend_list) and dev.executes_flydsl:
        preflight.kernel_widths([n for _, n in shape_list], dtype_list)   # lnbench's limits, before any worker starts
    eps_value = validate.eps(eps if eps is not None else cfg.require(table, "eps", (int, float), "perf"),
                             "--eps" if eps is not None else "config [perf] eps")
    base_seed = validate.seed(seed if seed is not None else cfg.require(table, "seed", int, "perf"),
                              "--seed" if seed is not None else "config [perf] seed")
    validate.shapes_fit(shape_list, PERF_TENSORS * max(DTYPES[d].itemsize for d in dtype_list), dev,
                        "perf (x, y, dy, dx and workspace, beside the cold-mode rotation)",
                        1.0 - protocol.cold_mem_fraction if "cold" in protocol.modes else 1.0)
    peak_input = {"--peak-file": peak_file} if peak_file else {"the peak cache": default_peak_path()}
    csv_final, json_final, md_final = prepare_outputs("perf", csv_path, json_path,
                                                      {**config_input(config_path), **peak_input}, md_path)

    skips = backend_skips(backend_list, dev)
    every_case = build_cases(backend_list, list(protocol.ops), dtype_list, shape_list, list(protocol.modes),
                             eps_value, base_seed, skips)
    cases = part.select(every_case)
    spread = bool(slots) and len(slots) > 1          # one GPU: nothing else is timing, nothing runs apart
    run_extra = {**shard_metadata(part, len(every_case)), **devices_metadata(slots, alone_mib if spread else None),
                 **({"alone_host_fraction": host_share} if spread else {})}
    groups = plan_groups(cases, backend_list, protocol.processes, str(dev.torch_device), slots,
                         alone_mib if spread else 0.0)
    peak = load_peak(dev.torch_device, peak_file)
    peak_gbps = float(peak["gbps"]) if peak else None
    if peak is None and not quiet:
        cache = Path(peak_file or default_peak_path())
        broken = cache_problem(cache)
        console.print(escape(f"peak file {cache} is not an lnbench peak cache ({broken}): % peak left blank "
                             f"(remove it, then run `lnbench peak`)" if broken else
                             f"no measured peak for {run_metadata(dev)['device_name']} in {cache}: % peak left "
                             f"blank (run `lnbench peak` once)"), style="yellow")
    lock = load.hold("perf")
    load_before = load.check(lock)
    load.refuse_if_loaded(load_before, loaded_policy(if_loaded, table))
    before = _facts(groups, dev)
    phases = KERNEL_PHASES if kernel_pass else STREAM_PHASES
    start = time.monotonic()
    early = stamp({**run_metadata(dev), "lnbench_command": "perf", "P": protocol.processes, "R": protocol.runs,
                   "baseline": base_name, "headline": headline, **run_extra}, PERF)
    workers_total = sum(len(g.orders) for g in groups)
    with ResultSink(csv_final, json_final, early, workers_total, "workers") as sink:
        if any(g.cases for g in groups):
            each = 2 if kernel_pass else 1               # the kernel pass reports each case again
            done_units: dict[tuple[int, int], int] = {}
            total = sum(len(o) * each for g in groups for o in g.orders)
            guard = threading.Lock()
            with CommandProgress(err_console, "timing", total, quiet) as progress:

                def run_group(group: Group, stop: threading.Event | None) -> list[WorkerResult]:
                    number = groups.index(group)

                    def on_progress(index: int, done: int, label: str) -> None:
                        order = group.orders[index]
                        case = order[(done - 1) % len(order)] if order and done else None
                        what = (f"{case.backend} {case.op} {case.dtype} {case.shape} {case.mode}"
                                f"{' kernel time' if done > len(order) else ''} {label.rsplit(' ', 1)[-1]}") if case else label
                        where = f"{group.gpu} " if slots else ""
                        with guard:
                            done_units[(number, index)] = done
                            progress.update(sum(done_units.values()), what,
                                            f"{where}worker {index + 1}/{protocol.processes}")

                    def on_done(result: WorkerResult) -> None:   # what the workers finished so far, as result rows
                        with guard:
                            group.results.append(result)
                            sink.replace(joined_rows(cases, groups, peak_gbps, base_name, headline, True),
                                         sum(r.ok for g in groups for r in g.results))

                    return run_workers(WORKER_MODULE, group_spec(group, str(dev.torch_device), protocol.to_dict(),
                                                                 len(phases), host_share if spread else None),
                                       protocol.worker_timeout_s, env={**_worker_env(), **group.env()},
                                       on_progress=on_progress, on_done=on_done, phases=phases, stop=stop)

                run_groups(groups, run_group, backend_list)
        load_meta = load.metadata(load_before, load.check(lock))
        lock.release()
        rows = _finish(sink, dev, protocol, cases, groups, peak, peak_gbps, base_name, headline,
                       kernel_pass, no_kernel_time, before, time.monotonic() - start, backend_list, quiet,
                       {**run_extra, **load_meta}, md_final)
    results = [r for g in groups for r in g.results]
    console.print(_summary(rows, results, time.monotonic() - start, groups))
    if load.warning(load_meta):
        err_console.print(f"[yellow]{escape(load.warning(load_meta))}[/yellow]", soft_wrap=True)
    if not any(g.cases for g in groups):
        reasons = {str(c.skip) for c in cases if c.skip}
        return nothing_ran("; ".join(sorted(reasons)) or "no case to time")
    return EXIT_FAILED if failed(rows, results) or any(g.error for g in groups) else EXIT_OK


def _facts(groups: list[Group], dev: Device) -> dict[str, dict[str, Any]]:
    """Driver and clocks of every device the run uses (lnbench.clocks), by the name its rows give it."""
    import torch

    return ({g.gpu: gpu_facts(torch.device(g.slot.process_device) if g.slot else dev.torch_device) for g in groups}
            or {str(dev.torch_device): gpu_facts(dev.torch_device)})


def _finish(sink: ResultSink, dev: Device, protocol: PerfProtocol, cases, groups: list[Group], peak: dict | None,
            peak_gbps: float | None, base_name: str, headline: str, kernel_pass: bool, no_kernel_time: str,
            before: dict[str, dict], seconds: float, backend_list: list[str], quiet: bool,
            extra: dict[str, Any], md_path: Path | None = None) -> list[dict]:
    """The result rows of a finished run: table, notes, and the complete files (sink.finish; the Markdown
    summary to `md_path`). `extra`: more metadata (shard, devices, load)."""
    after = _facts(groups, dev)
    first = next(iter(before))
    rows = joined_rows(cases, groups, peak_gbps, base_name, headline)
    sources = source_metadata(backend_list).get("kernel_sources", {})
    for row in rows:                            # a kernel source's rows name it (module, file, checkout commit)
        row.update(sources.get(row["backend"], {}))
    results = [r for g in groups for r in g.results]
    metadata = {**run_metadata(dev), **source_metadata(backend_list), "schema": PERF.schema, "lnbench_command": "perf",
                "P": protocol.processes, "R": protocol.runs,
                "I_min": protocol.min_iters, "I_max": protocol.max_iters, "warmup_s_min": protocol.warmup_s,
                "min_warmup_calls": protocol.min_warmup_calls, "target_run_s": protocol.target_run_s,
                "modes": ",".join(protocol.modes), "baseline": base_name, "driver": before[first]["driver"],
                "clocks_before": before[first]["clocks"], "clocks_after": after[first]["clocks"],
                "peak_gbps": peak_gbps, "peak_timestamp": peak.get("timestamp") if peak else None,
                "cold_factor": protocol.cold_factor, "wall_s": round(seconds, 2), "headline": headline,
                "kernel_timer": ("on" if kernel_pass else
                                 "off" if not protocol.kernel_timer else f"n/a ({no_kernel_time})"),
                **extra}
    shown = [{**r, **{key: cell(r) for key, cell in _CELLS.items()}} for r in rows if r["row_kind"] == "aggregate"]
    title = (f"lnbench perf on {metadata['device_name']} — median of {protocol.processes} worker medians "
             f"(R={protocol.runs}, I∈[{protocol.min_iters},{protocol.max_iters}], fewer where a run would pass "
             f"{protocol.max_run_s:g} s); GB/s from {headline} time; "
             f"gap = median − kernel")
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
    workers_json = [{"gpu": g.gpu, "timed_alone": g.alone, "index": r.index, "ok": r.ok, "exit_code": r.exit_code,
                     "timed_out": r.timed_out, "duration_s": round(r.duration_s, 3), "problem": r.problem(),
                     "stderr_tail": r.stderr_tail, "order": [c.id for c in g.orders[r.index]],
                     **{k: round(float((r.payload or {}).get(k, math.nan)), 3) for k in PHASES}}
                    for g in groups for r in g.results]
    sink.finish(rows, metadata, {"protocol": protocol.to_dict(), "peak": peak, "workers": workers_json,
                                 "clocks": {"before": before[first], "after": after[first]},
                                 "gpus": [{"gpu": gpu, "before": before[gpu], "after": after.get(gpu)}
                                          for gpu in before]},
                md_path=md_path, summary=_summary(rows, results, seconds, groups))
    return rows


#: where a worker's time went (its payload): start-up (side by side with the others), then its turn
PHASES = ("startup_s", "stream_s", "kernel_s")


@click.command("peak")
@click.option("--device", help="cpu, cuda, cuda:N (default: the GPU when torch sees one; emu cannot be timed).")
@click.option("--size-mib", type=validate.FLOAT,
              help=f"Bytes copied per call, in MiB; source + destination at least {PEAK_MIN_LLC_FACTOR}× the "
                   f"last-level cache (default 1024 on a GPU, 256 on the CPU, raised to that on a larger cache).")
@click.option("--runs", type=validate.INT, default=10, show_default=True, help="Timed runs (median taken).")
@click.option("--peak-file", type=OutputFile(),
              help="Cache file to update (default results/peak.json).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none).")
@if_loaded_option
@guarded
def peak_command(device, size_mib, runs, peak_file, config_path, if_loaded) -> int:
    """Measure device-to-device copy bandwidth (bytes read + written) and cache it for `perf`'s % peak; a
    figure that differs from the cached one beyond the noise is reported, and the cache keeps every earlier one."""
    validate.number(runs, "peak_runs", "--runs")
    if size_mib is not None:
        validate.number(size_mib, "size_mib", "--size-mib")
    policy = loaded_policy(if_loaded, cfg.section(cfg.load_config(config_path), "perf"))
    dev = timed_device(device)
    path = Path(peak_file or default_peak_path())
    reserve_peak_file(path)
    size = copy_size(dev.torch_device, size_mib)
    lock = load.hold("peak")
    load_before = load.check(lock)
    load.refuse_if_loaded(load_before, policy)
    record = measure_copy_bandwidth(dev.torch_device, size, runs)
    record.update({k: v for k, v in gpu_facts(dev.torch_device).items() if k in ("driver", "clocks")})
    record.update(load.metadata(load_before, load.check(lock)))
    lock.release()
    _, change = store_peak(dev.torch_device, record, path)
    name = dev.label
    render_table(console, "lnbench peak (device-to-device copy, bytes read + written)",
                 [Column("device", "device", justify="left"), Column("gbps", "GB/s", fmt_number(4)),
                  Column("copy_mib", "copy MiB", fmt_number(4)), Column("median_us", "median time", fmt_time_us),
                  Column("iters_per_run", "I")],
                 [{**record, "device": name, "copy_mib": record["copy_bytes"] / (1 << 20)}])
    console.print(f"peak cached in {path}")
    for line in (load.warning(record), f"lnbench: warning: {change}" if change else ""):
        if line:
            err_console.print(f"[yellow]{escape(line)}[/yellow]", soft_wrap=True)
    return EXIT_OK


__all__ = ["perf_command", "peak_command"]
