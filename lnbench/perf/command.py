"""`lnbench perf` and `lnbench peak`. perf: plan (lnbench.perf.plan: config → protocol → cases → groups) → workers
(lnbench.perf.workers) → aggregate (lnbench.perf.aggregate: rows) → outputs (lnbench.perf.outputs: tables + files),
read top-down in `run`; peak: options → the timed copy → the cached record → its table."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click
from rich.markup import escape

from lnbench import validate
from lnbench.backends import backend_names
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, OutputFile, config_input, config_option, console, device_option,
                                emit_flydsl_text, eps_option, err_console, flydsl_table_option, guarded,
                                kernel_source_option, md_option, nothing_ran, output_options, reserve_flydsl_file,
                                seed_option)
from lnbench.measure.protocol import protocol_options
from lnbench.perf.protocol import HEADLINES, MODES, PEAK_MIN_LLC_FACTOR
from lnbench.run.gpus import devices_options
from lnbench.run.shard import shard_option

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.perf.options import PerfOptions
    from lnbench.perf.plan import PerfPlan

#: --device of perf and peak
DEVICE_HELP = ("cpu, cuda, cuda:N (default: the GPU when torch sees one); emu or emu:ARCH: no timing, each case runs "
               "once on the emulated device and gives its profile and MODELLED lower bounds on every [targets] GPU "
               "of that arch (docs/targets.md).")


def if_loaded_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--if-loaded warn|refuse (None = the config's [perf] if_loaded)."""
    from lnbench.measure import load

    return click.option("--if-loaded", type=click.Choice(list(load.POLICIES)),
                        help="On a busy machine (load average above the cores lnbench may use, or another lnbench "
                             "timing run): warn and flag the result, or refuse to time (default: config "
                             "[perf] if_loaded, warn).")(func)


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
@eps_option
@seed_option()
@device_option(DEVICE_HELP)
@devices_options
@click.option("--alone-below-mib", "alone_below_mib", type=validate.FLOAT,
              help="With --devices: cases moving fewer MiB per call are timed while no other GPU is timing "
                   "(default: config [perf] alone_below_mib, 64).")
@shard_option
@config_option
@click.option("--peak-file", type=OutputFile(),
              help="Measured-peak cache (default results/peak.json; written by `lnbench peak`).")
@kernel_source_option
@if_loaded_option
@flydsl_table_option("After the run, also print every case as FlyDSL's CI benchmark table (op shape dtype TB/s "
                     "TFLOPS: the table FlyDSL's CI scripts and dashboard parse; FlyDSL's names, `-` for a case not "
                     "measured), even with --quiet; with FILE, write it to FILE too. FlyDSL's parser reads only the "
                     "first such table of a log.")
@md_option
@output_options
@guarded
def perf_command(*, backends: tuple[str, ...], baseline: str | None, ops: tuple[str, ...], modes: tuple[str, ...],
                 dtypes: tuple[str, ...], shapes: tuple[str, ...], shape_set: str | None, processes: int | None,
                 runs: int | None, warmup_s: float | None, min_warmup_calls: int | None, target_run_s: float | None,
                 min_iters: int | None, max_iters: int | None, worker_timeout_s: float | None,
                 cold_factor: float | None, llc_mib: float | None, headline: str, kernel_timer: bool | None,
                 eps: float | None, seed: int | None, device: str | None, devices: str | None, force: bool,
                 alone_below_mib: float | None, shard: str | None, config_path: Path | None, peak_file: Path | None,
                 kernel_src: Path | None, if_loaded: str | None, flydsl_table: Path | None, md_path: Path | None,
                 csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Time LayerNorm fwd/bwd: P worker processes, each warm-up + R runs of I calls; headline = median of
    the worker medians, with the min–max across workers, GB/s and % of the measured copy peak. On a GPU,
    --kernel-timer adds kernel time (profiler) and the gap to stream time from R more runs per worker."""
    from lnbench.perf.modelled import build_modelled_plan, is_emulated, run_modelled
    from lnbench.perf.options import PerfOptions
    from lnbench.perf.plan import build_plan
    from lnbench.results.flydsl_table import profile_rows, render

    o = PerfOptions(backends=backends, baseline=baseline, ops=ops, modes=modes, dtypes=dtypes, shapes=shapes,
                    shape_set=shape_set, processes=processes, runs=runs, warmup_s=warmup_s,
                    min_warmup_calls=min_warmup_calls, target_run_s=target_run_s, min_iters=min_iters,
                    max_iters=max_iters, worker_timeout_s=worker_timeout_s, cold_factor=cold_factor, llc_mib=llc_mib,
                    headline=headline, kernel_timer=kernel_timer, eps=eps, seed=seed, device=device, devices=devices,
                    force=force, alone_below_mib=alone_below_mib, shard=shard, config_path=config_path,
                    peak_file=peak_file, kernel_src=kernel_src, md_path=md_path, csv_path=csv_path,
                    json_path=json_path)
    if is_emulated(o.device):          # nothing is timed: profiles and modelled floors
        modelled_plan = build_modelled_plan(o)
        table_file = _reserve_table(flydsl_table, o)
        code = run_modelled(modelled_plan, quiet)
        if flydsl_table is not None:
            emit_flydsl_text(render(profile_rows(_modelled_cases(modelled_plan))), table_file)
        return code
    plan = build_plan(o)
    return run(plan, if_loaded, quiet, flydsl_table is not None, _reserve_table(flydsl_table, o))


def _reserve_table(flydsl_table: Path | None, o: PerfOptions) -> Path | None:
    """--flydsl-table FILE made ready with the run's other outputs (None: the log only, or not asked)."""
    inputs = {**config_input(o.config_path), "--peak-file": o.peak_file}
    return reserve_flydsl_file(flydsl_table, {"--csv": o.csv_path, "--json": o.json_path, "--md": o.md_path}, inputs)


def _modelled_cases(plan: Any) -> Any:
    """The cases × modes of an emulated run, as rows FlyDSL's table lists (none of them timed)."""
    import pandas as pd

    return pd.DataFrame([{"backend": c.backend, "op": c.op, "dtype": c.dtype, "shape": c.shape, "mode": mode}
                         for c in plan.cases for mode in plan.modes])


def run(plan: PerfPlan, if_loaded: str | None, quiet: bool, flydsl_table: bool = False,
        table_file: Path | None = None) -> int:
    """Time the plan's cases: plan → workers (lnbench.perf.workers) → aggregate (lnbench.perf.aggregate) → outputs
    (lnbench.perf.outputs), each entered once; the exit code. `flydsl_table`: print FlyDSL's table after the run
    (and write it to `table_file` when given)."""
    from lnbench.measure import load
    from lnbench.scaffold.sink import ResultSink
    from lnbench.perf.aggregate import failed, run_rows
    from lnbench.perf.calibrate import record_perf
    from lnbench.perf.outputs import device_facts, write_outputs
    from lnbench.perf.plan import loaded_policy
    from lnbench.perf.tables import summary_line
    from lnbench.perf.workers import time_groups
    from lnbench.results import PERF, PerfRow, rows_frame
    from lnbench.results.flydsl_table import perf_rows, render

    import time

    peak_gbps = float(plan.peak["gbps"]) if plan.peak else None
    if plan.peak is None and not quiet:
        _say_no_peak(plan)
    lock = load.hold("perf")
    load_before = load.check(lock)
    load.refuse_if_loaded(load_before, loaded_policy(if_loaded, plan.table))
    groups = plan.groups
    before = device_facts(groups, plan.dev)
    start = time.monotonic()
    csv_final, json_final, _ = plan.outputs

    def rows_so_far(finished_only: bool = False) -> list[PerfRow]:
        return run_rows(plan.cases, groups, peak_gbps, plan.baseline, plan.headline, plan.run.kernel_sources,
                        finished_only)

    estimate = None
    with ResultSink(csv_final, json_final, plan.run, sum(len(g.orders) for g in groups), "workers") as sink:
        if any(g.cases for g in groups):
            estimate = time_groups(plan, peak_gbps, quiet, lambda done: sink.replace(rows_so_far(True), done))
        load_facts = load.metadata(load_before, load.check(lock))
        lock.release()
        rows = rows_so_far()
        write_outputs(plan, sink, rows, peak_gbps, before, time.monotonic() - start, load_facts, quiet)
    results = [r for g in groups for r in g.results]
    console.print(summary_line(rows, results, time.monotonic() - start, groups))
    timed = any(r.row_kind == "aggregate" and str(r.status).startswith(("ok", "partial")) for r in rows)
    if load.warning(load_facts.load_flag) and timed:        # no warning about times that were never taken
        err_console.print(f"[yellow]{escape(load.warning(load_facts.load_flag))}[/yellow]", soft_wrap=True)
    if estimate is not None:                                # what its parts took, for the next estimate here
        record_perf(estimate, groups, plan.protocol, plan.dev, time.monotonic() - estimate.running.start)
    if flydsl_table:                                        # every case, the ones not timed too
        emit_flydsl_text(render(perf_rows(rows_frame(rows, kind=PERF))), table_file)
    if not any(g.cases for g in groups):
        reasons = {str(c.skip) for c in plan.cases if c.skip}
        return nothing_ran("; ".join(sorted(reasons)) or "no case to time")
    return EXIT_FAILED if failed(rows, results) or any(g.error for g in groups) else EXIT_OK


def _say_no_peak(plan: PerfPlan) -> None:
    """Why % peak stays blank: no measured peak for this device, or a peak file that is not lnbench's."""
    from lnbench.perf.peak import cache_problem, default_peak_path

    cache = Path(plan.peak_file or default_peak_path())
    broken = cache_problem(cache)
    console.print(escape(f"peak file {cache} is not an lnbench peak cache ({broken}): % peak left blank "
                         f"(remove it, then run `lnbench peak`)" if broken else
                         f"no measured peak for {plan.dev.label} in {cache}: % peak left "
                         f"blank (run `lnbench peak` once)"), style="yellow")


@click.command("peak")
@device_option(DEVICE_HELP)
@click.option("--size-mib", type=validate.FLOAT,
              help=f"Bytes copied per call, in MiB; source + destination at least {PEAK_MIN_LLC_FACTOR}× the "
                   f"last-level cache (default 1024 on a GPU, 256 on the CPU, raised to that on a larger cache).")
@click.option("--runs", type=validate.INT, default=10, show_default=True, help="Timed runs (median taken).")
@click.option("--peak-file", type=OutputFile(),
              help="Cache file to update (default results/peak.json).")
@config_option
@if_loaded_option
@guarded
def peak_command(*, device: str | None, size_mib: float | None, runs: int, peak_file: Path | None,
                 config_path: Path | None, if_loaded: str | None) -> int:
    """Measure device-to-device copy bandwidth (bytes read + written) and cache it for `perf`'s % peak; a
    figure that differs from the cached one beyond the noise is reported, and the cache keeps every earlier one."""
    from lnbench.perf.peak_run import PeakOptions, build_peak_plan, run_peak
    from lnbench.perf.tables import print_peak

    plan = build_peak_plan(PeakOptions(device=device, size_mib=size_mib, runs=runs, peak_file=peak_file,
                                       config_path=config_path, if_loaded=if_loaded))
    record, change, facts = run_peak(plan)
    print_peak(plan.dev.label, plan.path, record, change, facts.load_flag)
    return EXIT_OK


__all__ = ["perf_command", "peak_command"]
