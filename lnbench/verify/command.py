"""The `lnbench verify` command: parse → build cases → run backends → table + CSV, exit code."""
from __future__ import annotations

import math
import os
from pathlib import Path

import click

from rich.console import Console
from rich.markup import escape

from lnbench import config as cfg
from lnbench import validate
from lnbench.backends import (OWN_FLYDSL, backend_names, configure_sources, get_backend, probe_backend,
                              requested_names, runs_flydsl, set_kernel_src, source_metadata)
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, apply_emu_checks, config_input, console, emit_outputs,
                                emu_checks_option, err_console, guarded, kernel_source_option, md_option,
                                nothing_ran, output_options, prepare_outputs)
from lnbench.device import Device, resolve_kernel_device
from lnbench.emu.ledger import rows_summary
from lnbench.errors import LnbenchUsageError
from lnbench.flydsl import preflight
from lnbench.metadata import run_metadata
from lnbench.progress import CommandProgress
from lnbench.report import Column, fmt_duration, fmt_float, render_table, silent_console, styled_status
from lnbench.result_sink import ResultSink
from lnbench.results import SELFTEST, VERIFY, stamp
from lnbench.tolerance import Tolerance
from lnbench.verify.cases import build_cases, check_eps_values
from lnbench.verify.estimate import WARN_S, Estimate, unit_seconds
from lnbench.gpus import devices_metadata, devices_options, parse_devices
from lnbench.shard import parse_shard, shard_metadata, shard_option
from lnbench.verify.parallel import VerifySpec, run_units
from lnbench.verify.runner import backend_case_rows, case_label, failed
from lnbench.verify.summary import EXECUTED, SUMMARY_COLUMNS, status_word, summary_rows, worth_a_look
from lnbench.verify.selftest import CONTROL, UNDETECTABLE, run_self_test

RESULT_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("case", "case", justify="left"),
    Column("dtype", "dtype", justify="left"), Column("shape", "shape"), Column("eps", "eps", fmt_float(2)),
    Column("tensor", "tensor", justify="left"), Column("max_abs_err", "max abs err", fmt_float()),
    Column("allowed", "allowed", fmt_float()), Column("margin", "margin", fmt_float()),
    Column("_used", "err/allowed", fmt_float(2)), Column("determinism", "dγ/dβ repeat", justify="left"),
    Column("status", "status", styled_status, justify="left", markup=True),
]
SELFTEST_COLUMNS = [
    Column("bug", "planted bug", justify="left"), Column("meaning", "what it does", justify="left"),
    Column("outcome", "outcome", justify="left"), Column("status", "status", styled_status, justify="left", markup=True),
]


#: memory estimate per element of a verify shape: x, dy and every output in up to 4 bytes, and the fp64 autograd
#: reference (x, dy, y, x-hat, dx and temporaries in 8 bytes)
VERIFY_BYTES_PER_ELEMENT = 96

#: what `auto` verifies on the emulated device: every FlyDSL variant, and torch on the same inputs
EMULATED_AUTO: tuple[str, ...] = ("flydsl", "flydsl-tensor", "flydsl-atomic", "torch")


def choose_backends(requested: list[str], device: Device) -> tuple[list[str], str]:
    """Backend names to verify (`auto` expanded where it stands, repeats dropped) and a banner (non-empty when
    `auto` had to fall back or runs emulated). `requested` is already checked (validate.choices)."""
    out: list[str] = []
    banner = ""
    for name in requested:
        expanded = [name]
        if name == "auto":
            expanded, banner = _auto_backends(device)
        out.extend(item for item in expanded if item not in out)
    return out, banner


def _auto_backends(device: Device) -> tuple[list[str], str]:
    """What `auto` verifies on `device`, and the banner saying so where that is not the FlyDSL kernels alone."""
    if device.emulated:
        return list(EMULATED_AUTO), (f"Emulated device {device.name}: the FlyDSL kernels run on an instruction-set "
                               f"emulator on the CPU; results check correctness only.")
    if device.executes_flydsl:
        return ["flydsl"], ""
    runnable = []
    for name in backend_names():
        backend, avail = probe_backend(name, device)
        if backend is not None and avail.runnable and {"fwd", "bwd"} <= set(backend.ops):
            runnable.append(name)
    banner = (f"No ROCm GPU: the FlyDSL kernels cannot execute here, so `auto` verifies every runnable "
              f"backend instead ({', '.join(runnable)}). `--backend flydsl` compiles its kernels without running "
              f"them; `--device emu` runs them on the emulator.")
    return runnable, banner


def bar_used(row: dict) -> float | None:
    """max abs err / allowed: the fraction of the pass bar a tensor uses (< 1 is within it), or None.

    The table shows this instead of the CSV's max_rel_err: the pass rule is absolute, and an element-wise
    relative error blows up to ~1e24 wherever the reference is near zero (dx of constant rows, a mean of ~0)."""
    err, allowed = row.get("max_abs_err"), row.get("allowed")
    if err is None or allowed is None or err != err or not allowed >= 0:
        return None
    if allowed == 0:                       # a bar of zero (a config with k = atol = fp32_ulps = 0)
        return math.inf if err > 0 else 0.0
    return err / allowed


def _summary_line(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        key = row["status"].split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{n} {k}" for k, n in sorted(counts.items())]
    return f"{len(rows)} rows: " + ", ".join(parts)


@click.command("verify")
@click.option("--backend", "backends", multiple=True, default=["auto"], show_default=True,
              help="Backend(s) to check (repeatable or comma list): auto, " + ", ".join(backend_names()) +
                   ", a [backends.NAME] of the config, or module:PKG.MOD (a kernel source following FlyDSL's "
                   "LayerNorm builder contract; docs/flydsl-upstream.md).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (repeatable or comma list; default: config).")
@click.option("--shapes", multiple=True, help="MxN list, e.g. 4096x4096,3x257 (default: the config's shape set).")
@click.option("--shape-set", help="Named shape set from the config (default, quick, large, ...).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none).")
@click.option("--device", help="cpu, cuda, cuda:N, emu, emu:gfx950 (default: the GPU when torch sees one, else the emulated "
                   "gfx942 where it is available, else cpu).")
@click.option("--seed", type=validate.INT, help="Base random seed (default: config).")
@click.option("--self-test", is_flag=True,
              help="Check that the pass rule catches planted bugs in a copy of the reference math (takes no "
                   "--backend). Exit 0 when the control passes and every bug that changes an output on the chosen "
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
def verify_command(backends, dtypes, shapes, shape_set, config_path, device, seed, self_test, kernel_src, jobs,
                   devices, force, shard, details, emu_checks, md_path, csv_path, json_path, quiet) -> int:
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
    config = cfg.load_config(config_path)
    table = cfg.section(config, "verify")
    tol = Tolerance.from_config(table)
    dtype_list = cfg.parse_dtypes(dtypes, cfg.require(table, "dtypes", list, "verify"))
    shape_list = cfg.chosen_shapes(config, "verify", shapes, shape_set)
    set_kernel_src(kernel_src)
    configure_sources(config)
    requested = requested_names(backends, ["auto"])
    if self_test and click.get_current_context().get_parameter_source("backends") != click.core.ParameterSource.DEFAULT:
        raise LnbenchUsageError("--self-test checks planted bugs in a copy of the reference math, not a backend: "
                                "drop --backend")
    eps_values = [validate.eps(e, "config [verify] eps") for e in cfg.require(table, "eps", list, "verify")]
    check_eps_values(eps_values)   # before any output is prepared
    base_seed = validate.seed(seed if seed is not None else cfg.require(table, "seed", int, "verify"),
                              "--seed" if seed is not None else "config [verify] seed")
    job_count = usable_cores() if jobs is None else validate.number(jobs, "jobs", "--jobs")
    part = parse_shard(shard)
    slots = parse_devices(devices, force) if devices is not None else None
    if slots and device is not None:
        raise LnbenchUsageError("--device and --devices both choose where to run: give one")
    if slots and jobs is not None:
        raise LnbenchUsageError("--jobs sets the emulated device's workers; with --devices each GPU has one")
    dev = resolve_kernel_device(slots[0].process_device if slots else device)
    checks_line = apply_emu_checks(emu_checks) if dev.emulated else None
    if emu_checks is not None and not dev.emulated:
        raise LnbenchUsageError(f"--emu-checks applies to the emulated device; this run is on {dev.name}")
    if dev.is_null:
        raise LnbenchUsageError(f"verify checks values, and the null device {dev.name} executes nothing: use "
                                f"--device emu (or emu:gfx950) for the FlyDSL kernels")
    validate.shapes_fit(shape_list, VERIFY_BYTES_PER_ELEMENT, dev, "verify (inputs, outputs, fp64 reference)")
    csv_final, json_final, md_final = prepare_outputs("selftest" if self_test else "verify", csv_path, json_path,
                                                      config_input(config_path), md_path)
    every_case = build_cases(shape_list, dtype_list, eps_values, base_seed)
    cases = part.select(every_case)
    metadata = stamp({**run_metadata(dev), "seed": base_seed, **shard_metadata(part, len(every_case)),
                      **devices_metadata(slots)}, SELFTEST if self_test else VERIFY)

    if self_test:
        return _self_test(cases, dev, tol, metadata, csv_final, json_final, md_final, quiet)

    names, banner = choose_backends(requested, dev)
    explicit = [name for name in requested if name != "auto"]
    if any(runs_flydsl(name) for name in names):    # FlyDSL kernels, lnbench's or a kernel source's
        preflight.toolkit()
    if any(name in OWN_FLYDSL for name in names):   # known limits of lnbench's kernels, before any compile
        preflight.kernel_widths([n for _, n in shape_list], dtype_list)
    metadata.update(source_metadata(names))
    if banner:
        console.print(f"[bold yellow]{banner}[/bold yellow]")
    if checks_line and not quiet:
        console.print(checks_line)
    if not names:
        raise LnbenchUsageError("no backend can run here")
    spec = VerifySpec(tuple(names), tuple(cases), slots[0].worker_device if slots else dev.name, tol, torch_threads())
    units = range(len(names) * len(cases))
    costs = {unit: unit_seconds(*spec.unit(unit), dev) for unit in units}
    parallel = bool(slots) or (dev.emulated and job_count > 1 and len(units) > 1)
    estimate = Estimate(costs, min(job_count, len(units)) if parallel else 1)
    if dev.emulated and estimate.wall_s > WARN_S:
        _warn_long(estimate, job_count if parallel else 1, shape_list)
    metadata["jobs"] = len(slots) if slots else job_count if parallel else 1
    with ResultSink(csv_final, json_final, metadata, len(units)) as sink, \
            CommandProgress(err_console, "verifying", len(units), quiet, estimate.remaining_s) as progress:

        def done(unit: int, unit_rows: list[dict], seconds: float) -> None:
            sink.add(unit, unit_rows)
            estimate.finished(unit)
            progress.advance(case_label(spec.unit(unit)[0], spec.unit(unit)[1], unit_rows))

        if parallel:
            run_units(spec, sorted(units, key=costs.__getitem__, reverse=True), job_count, done, slots or ())
        else:
            _run_inline(spec, dev, done)
        rows = sink.rows
        _print_rows(rows, metadata["device_name"], details, console if not quiet else silent_console())
        unrunnable = {}
        for name in explicit:  # a backend asked for by name that cannot run here at all fails the run, with its reason
            own = [row for row in rows if row["backend"] == name]
            if own and all(status_word(row) not in EXECUTED for row in own):
                unrunnable[name] = own[0].get("detail") or own[0]["status"]
        for name, why in unrunnable.items():
            err_console.print(f"[bold red]lnbench: backend {escape(name)} cannot run here:[/bold red] {escape(str(why))}",
                              soft_wrap=True)
        fidelity = rows_summary(rows)              # emulated runs: what executed, what is approximated
        if fidelity:
            metadata["emu_fidelity"] = fidelity    # the sink's metadata too (the same dict)
            console.print(fidelity)
        sources = metadata.get("kernel_sources", {})
        for row in rows:                        # a kernel source's rows name it (module, file, checkout commit)
            row.update(sources.get(row["backend"], {}))
        sink.finish(rows, md_path=md_final, summary=_summary_line(rows))
    console.print(_summary_line(rows))
    if not any(status_word(row) in EXECUTED for row in rows):
        return nothing_ran(str(rows[0].get("status")) if rows else "no case")
    return EXIT_FAILED if failed(rows) or unrunnable else EXIT_OK


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _run_inline(spec: VerifySpec, dev: Device, done) -> None:
    """Every unit in this process, in order (--jobs 1, and every device but the emulated one)."""
    from time import monotonic

    for b, name in enumerate(spec.backends):
        backend = get_backend(name)
        avail = backend.availability(dev)
        compiled: dict = {}
        for c, case in enumerate(spec.cases):
            start = monotonic()
            unit_rows = backend_case_rows(backend, case, dev, spec.tol, avail, compiled)
            done(b * len(spec.cases) + c, unit_rows, monotonic() - start)


def _warn_long(estimate: Estimate, jobs: int, shapes: list[tuple[int, int]]) -> None:
    """Say before a long emulated run how long it will take, and how to make it shorter."""
    cores = usable_cores()
    faster = (f"more --jobs (this machine has {cores} usable cores)" if jobs < cores else
              "a machine with more cores (--jobs)")
    largest = max(shapes, key=lambda s: s[0] * s[1])
    err_console.print(f"[yellow]lnbench: this run is estimated to take ~{fmt_duration(estimate.wall_s)} on the "
                      f"emulated device ({len(estimate.costs)} cases, {jobs} job{'s' if jobs > 1 else ''}; the "
                      f"largest shape {largest[0]}x{largest[1]}): for a quicker check use smaller shapes (e.g. "
                      f"--shape-set quick) or {faster}[/yellow]", soft_wrap=True)


def _print_rows(rows: list[dict], device_name: str, details: bool, out: Console) -> None:
    """The summary table and the rows worth a look (every row with --details), then why each FAIL/error."""
    shown = [{**row, "_used": bar_used(row)} for row in rows]
    if details:
        render_table(out, f"lnbench verify on {device_name}", RESULT_COLUMNS, shown)
    else:
        render_table(out, f"lnbench verify on {device_name}: summary (every row: --details)", SUMMARY_COLUMNS,
                     summary_rows(shown))
        look = [row for row in shown if worth_a_look(row)]
        if look:
            render_table(out, "FAIL and error rows, and rows within 10% of their bar", RESULT_COLUMNS, look)
    for row in rows:
        if row["detail"] and row["status"] in ("FAIL", "error"):
            out.print(f"[red]{row['backend']} {row['case']} {row['dtype']} {row['shape']} "
                          f"{row['tensor']}:[/red] {row['detail']}")


def _self_test(cases, dev, tol, metadata, csv_final, json_final, md_final, quiet) -> int:
    """Exit 0 when the control passes, at least one planted bug changes an output on these shapes and every
    such bug is caught; a bug that changes no output here is reported `not detectable`, not held against the
    rule; if no bug is detectable the self-test tested nothing and exits 1."""
    with CommandProgress(err_console, "self-test", None, quiet) as progress:
        summary, detail = run_self_test(cases, dev, tol, progress.advance)
    render_table(console, "lnbench verify --self-test: planted bugs vs the pass rule", SELFTEST_COLUMNS, summary)
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
