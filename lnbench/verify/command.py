"""The `lnbench verify` command: parse → build cases → run backends → table + CSV, exit code."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import click

from rich.markup import escape

from lnbench import validate
from lnbench.backends import backend_names, get_backend, name_rows
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, config_option, console, device_option, emit_outputs,
                                emu_checks_option, err_console, guarded, kernel_source_option, md_option, nothing_ran,
                                output_options, seed_option)
from lnbench.errors import LnbenchUsageError
from lnbench.run.gpus import devices_options
from lnbench.run.shard import shard_option

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.results import VerifyRow
    from lnbench.run.device import Device
    from lnbench.verify.parallel import VerifySpec
    from lnbench.verify.plan import VerifyPlan


@click.command("verify")
@click.option("--backend", "backends", multiple=True, default=["auto"], show_default=True,
              help="Backend(s) to check (repeatable or comma list): auto, " + ", ".join(backend_names()) +
                   ", a [backends.NAME] of the config, or module:PKG.MOD (a kernel source following FlyDSL's "
                   "LayerNorm builder contract; docs/flydsl-upstream.md).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (repeatable or comma list; default: config).")
@click.option("--shapes", multiple=True, help="MxN list, e.g. 4096x4096,3x257 (default: the config's shape set).")
@click.option("--shape-set", help="Named shape set from the config (default, quick, large, ...).")
@config_option
@device_option("cpu, cuda, cuda:N, emu, emu:gfx950 (default: the GPU when torch sees one, else the emulated gfx942 "
               "where it is available, else cpu).")
@seed_option()
@click.option("--self-test", is_flag=True,
              help="Check that the pass rule catches planted bugs in a copy of the reference math (takes no "
                   "--backend, --jobs, --details, --kernel-src, --emu-checks or --shard). Exit 0 when the control passes and every bug that changes an output on the chosen "
                   "shapes is caught (a bug that changes none, e.g. drop-c2 at N = 1, is reported `not "
                   "detectable`); exit 1 if a bug passes, the control fails, or no bug is detectable.")
@click.option("--jobs", "-j", type=validate.INT,
              help="Worker processes for the cases on the emulated device (default: the usable cores); the rows "
                   "are the same as with --jobs 1, in the same order.")
@devices_options
@shard_option
@click.option("--details", is_flag=True,
              help="Print every row (default: a summary per backend × dtype × case kind, then only the FAIL and "
                   "error rows and those within 10% of their bar).")
@kernel_source_option
@emu_checks_option
@md_option
@output_options
@guarded
def verify_command(*, backends: tuple[str, ...], dtypes: tuple[str, ...], shapes: tuple[str, ...],
                   shape_set: str | None, config_path: Path | None, device: str | None, seed: int | None,
                   self_test: bool, jobs: int | None, devices: str | None, force: bool, shard: str | None,
                   details: bool, kernel_src: Path | None, emu_checks: str | None, md_path: Path | None,
                   csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Check forward (y, mean, rstd) and backward (dx, dγ, dβ) against an fp64 autograd reference.

    \b
    Table, one row per case and tensor (in the tensor's own units):
      max abs err  max |backend − fp64 reference|
      allowed      the pass bar: k · (torch's own error in the same dtype; k = 2 by default)
                   + atol(dtype, tensor) (× √M for dγ, dβ) + the fp32 conditioning floor
                   (numbers: [verify.tolerance] in the config)
      margin       allowed − max abs err: >= 0 is within the bar, negative fails by that much
      err/allowed  the fraction of the bar used (< 1 is within it; 1 = on the bar)
    The CSV/JSON also keep max_rel_err (element-wise, huge where the reference is near 0) and torch_err.
    """
    from lnbench.verify.parallel import may_fork

    # before anything imports torch (verify.plan does); starts nothing (lnbench.run.pool)
    may_fork(device, jobs, devices, self_test)
    from lnbench.verify.plan import VerifyOptions, build_plan

    o = VerifyOptions(backends=backends, dtypes=dtypes, shapes=shapes, shape_set=shape_set, config_path=config_path,
                      device=device, seed=seed, self_test=self_test, jobs=jobs, devices=devices, force=force,
                      shard=shard, kernel_src=kernel_src, emu_checks=emu_checks, md_path=md_path, csv_path=csv_path,
                      json_path=json_path)
    idle = [flag for flag, value in (("--jobs", o.jobs), ("--details", details), ("--kernel-src", o.kernel_src),
                                     ("--emu-checks", o.emu_checks)) if value not in (None, False)]
    if o.self_test and idle:      # the planted bugs run in this process, on the reference math: no kernel, no worker
        raise LnbenchUsageError(f"{', '.join(idle)} does nothing with --self-test (it checks planted bugs in a copy "
                                f"of the reference math, in this process)")
    plan = build_plan(o)
    if plan.self_test:
        return _self_test(plan.cases, plan.dev, plan.tol, plan.metadata, *plan.outputs, quiet)
    return run(plan, details, quiet)


def run(plan: VerifyPlan, details: bool, quiet: bool) -> int:
    """Run every backend × case unit (in workers where that pays), print the rows, write them; the exit code."""
    from lnbench.emu.ledger import rows_summary
    from lnbench.scaffold.sink import ResultSink
    from lnbench.output.tables import silent_console
    from lnbench.run.eta import cores
    from lnbench.run.progress import CommandProgress
    from lnbench.run.upfront import fmt_seconds
    from lnbench.verify.calibrate import estimate_run
    from lnbench.verify.diagnosis import abi_twins, diagnose
    from lnbench.verify.estimate import WARN_S
    from lnbench.verify.parallel import VerifySpec, run_units
    from lnbench.verify.runner import case_label, failed
    from lnbench.verify.summary import EXECUTED, status_word
    from lnbench.verify.tables import print_rows, summary_line, warn_long

    names, cases, dev, slots, job_count, metadata = (plan.names, plan.cases, plan.dev, plan.slots, plan.job_count,
                                                     plan.metadata)
    csv_final, json_final, md_final = plan.outputs
    if plan.banner:
        console.print(f"[bold yellow]{plan.banner}[/bold yellow]")
    if plan.checks_line and not quiet:
        console.print(plan.checks_line)
    if not names:
        raise LnbenchUsageError("no backend can run here")
    spec = VerifySpec(tuple(names), tuple(cases), slots[0].worker_device if slots else dev.name, plan.tol,
                      torch_threads())
    units = range(len(names) * len(cases))
    parallel = bool(slots) or (dev.emulated and job_count > 1 and len(units) > 1)
    pairs = [spec.unit(unit) for unit in units]
    estimate, record = estimate_run(pairs, dev, min(job_count, len(units)) if parallel else 1, inline=not parallel)
    costs = estimate.costs
    ahead = record.upfront
    if dev.emulated and ahead.seconds > WARN_S:
        warn_long(estimate, job_count if parallel else 1, plan.shapes,
                  ahead.range_text or f"~{fmt_seconds(ahead.seconds)}")
    elif not quiet:
        err_console.print(escape(record.upfront.line(f"{len(units)} cases, {estimate.jobs} job"
                                                     f"{'s' if estimate.jobs > 1 else ''}", estimate.others, cores())),
                          soft_wrap=True, highlight=False)
    metadata.jobs = len(slots) if slots else job_count if parallel else 1
    record.upfront.keep(metadata)
    with ResultSink(csv_final, json_final, metadata, len(units)) as sink:
        with CommandProgress(err_console, "verifying", len(units), quiet, estimate.remaining_s) as progress:

            def done(unit: int, unit_rows: list[VerifyRow], seconds: float) -> None:
                sink.add(unit, unit_rows)
                record.unit(unit, unit_rows, seconds)
                estimate.finished(unit)
                progress.advance(case_label(spec.unit(unit)[0], spec.unit(unit)[1], unit_rows))

            if parallel:
                run_units(spec, sorted(units, key=costs.__getitem__, reverse=True), job_count, done, slots or (),
                          record.compiled)
            else:
                _run_inline(spec, dev, done, record.compiled)
        from lnbench.results import VerifyRow
        rows = diagnose([row for row in sink.rows if isinstance(row, VerifyRow)], abi_twins(names))
        print_rows(rows, metadata.device_label, details, console if not quiet else silent_console())
        unrunnable = {}
        for name in plan.explicit:  # a backend asked for by name that cannot run here at all fails the run, with its reason
            own = [row for row in rows if row.backend == name]
            if own and all(status_word(row) not in EXECUTED for row in own):   # compiled rows: why is in the status
                status = str(own[0].status)
                unrunnable[name] = status if "(" in status else own[0].detail or status
        for name, why in unrunnable.items():
            err_console.print(f"[bold red]lnbench: backend {escape(name)} cannot run here:[/bold red] {escape(str(why))}",
                              soft_wrap=True)
        fidelity = rows_summary(rows)              # emulated runs: what executed, what is approximated
        if fidelity:
            metadata.emu_fidelity = fidelity       # the sink's run record too (the same record)
            console.print(fidelity)
        name_rows(rows, metadata.kernel_sources)    # a kernel source's rows name it (module, file, commit)
        record.upfront.keep(metadata, record.elapsed_s())
        sink.finish(rows, md_path=md_final, summary=summary_line(rows))
    console.print(summary_line(rows))
    record.finish(record.elapsed_s())              # what its units, compiles and start took, for the next estimate
    if not any(status_word(row) in EXECUTED for row in rows):
        return nothing_ran(_why(rows[0]) if rows else "no case")
    return EXIT_FAILED if failed(rows) or unrunnable else EXIT_OK


def _why(row: VerifyRow) -> str:
    """A row's status with its reason: `not run (needs a CUDA/ROCm GPU)` (a `not run` row keeps it in `detail`)."""
    status, detail = str(row.status), row.detail
    return f"{status} ({detail})" if status == "not run" and detail else status


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _run_inline(spec: VerifySpec, dev: Device, done, on_compiled) -> None:
    """Every unit in this process, in order (--jobs 1, and every device but the emulated one); on_compiled(unit,
    seconds, compiles, cold ones) before done(unit, rows, seconds) (verify.parallel.run_units)."""
    from time import monotonic

    from lnbench.flydsl import compile_log
    from lnbench.verify.runner import backend_case_rows

    for b, name in enumerate(spec.backends):
        backend = get_backend(name)
        avail = backend.availability(dev)
        compiled: dict = {}
        for c, case in enumerate(spec.cases):
            start, before = monotonic(), len(compile_log.COMPILES)
            unit_rows = backend_case_rows(backend, case, dev, spec.tol, avail, compiled)
            on_compiled(b * len(spec.cases) + c, *compile_log.since(before))
            done(b * len(spec.cases) + c, unit_rows, monotonic() - start)


def _self_test(cases, dev, tol, metadata, csv_final, json_final, md_final, quiet) -> int:
    """Exit 0 when the control passes, at least one planted bug changes an output on these shapes and every
    such bug is caught; a bug that changes no output here is reported `not detectable`, not held against the
    rule; if no bug is detectable the self-test tested nothing and exits 1."""
    from lnbench.output.tables import render_table, silent_console
    from lnbench.run.progress import CommandProgress
    from lnbench.verify.selftest import CONTROL, UNDETECTABLE, run_self_test
    from lnbench.verify.tables import SELFTEST_COLUMNS

    with CommandProgress(err_console, "self-test", None, quiet) as progress:
        summary, detail = run_self_test(cases, dev, tol, progress.advance)
    render_table(console if not quiet else silent_console(), "lnbench verify --self-test: planted bugs vs the pass rule",
                 SELFTEST_COLUMNS, summary)
    emit_outputs(detail, metadata, csv_final, json_final, {"self_test": summary}, md_path=md_final)
    bad = [s["bug"] for s in summary if s["status"] not in ("ok", UNDETECTABLE)]
    undetectable = [s["bug"] for s in summary if s["status"] == UNDETECTABLE]
    detectable = [s["bug"] for s in summary if s["bug"] != CONTROL and s["status"] != UNDETECTABLE]
    note = f" ({', '.join(undetectable)}: not detectable on these shapes)" if undetectable else ""
    if bad:
        console.print(f"self-test FAILED for: {', '.join(bad)}{note}")
        return EXIT_FAILED
    if not detectable:
        console.print("self-test NOT RUN: no planted bug changes any output on these shapes; "
                      "use wider shapes (N > 1), e.g. the default shape set")
        return EXIT_FAILED
    console.print(("self-test: every planted bug caught, control passes" if not undetectable else
                   "self-test: every detectable planted bug caught, control passes") + note)
    return EXIT_OK
