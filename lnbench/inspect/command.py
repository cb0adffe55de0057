"""`lnbench inspect`: compile-only static facts of every FlyDSL kernel variant (no GPU needed), and with
`--execute` what each launch executes on the emulated device (per launch and per input row)."""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import click
from rich.markup import escape

from lnbench import settings as cfg
from lnbench.backends import OWN_FLYDSL, record_sources, requested_names, runs_flydsl
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, SharedOptions, apply_emu_checks, config_option, console,
                                emu_checks_option, err_console, guarded, kernel_source_option, md_option,
                                output_options)
from lnbench.constants import ARCHES, KERNEL_OPS, STRATEGIES
from lnbench.errors import LnbenchUsageError, one_line
from lnbench.output.tables import Column, styled_status
from lnbench.validate import choices as _choices

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.scaffold.sink import ResultSink
    from lnbench.results import InspectRow, InspectRun
    from lnbench.run.progress import CommandProgress


ABIS = ("pointer", "tensor")
#: --shapes left out: the widths inspect compiles (M is a runtime argument)
SHAPES = ("1x1000,1x4096,1x8192,1x16384",)
#: memory estimate per element of an --execute shape (inputs, outputs and workspace in host memory, the emulator's
#: copies of them)
EXECUTE_BYTES_PER_ELEMENT = 64

COLUMNS = [
    Column("backend", "backend", justify="left"), Column("arch", "arch", justify="left"),
    Column("abi", "ABI", justify="left"), Column("op", "op", justify="left"),
    Column("kernel_name", "kernel", justify="left"), Column("dtype", "dtype", justify="left"), Column("n", "N"),
    Column("kernarg_bytes", "kernarg B"), Column("arg_count", "args"), Column("launcher_slots", "host slots"),
    Column("vgpr", "VGPR"), Column("sgpr", "SGPR"), Column("spills", "spills v/s"), Column("lds_bytes", "LDS B"),
    Column("scratch_bytes", "scratch B"), Column("loads_128bit", "128b ld"), Column("stores_128bit", "128b st"),
    Column("instruction_count", "instrs"), Column("status", "status", styled_status, justify="left"),
]


def emulator_status() -> tuple[bool, str]:
    """lnbench.run.device.emulator_status (run.device imports torch: not for `inspect --help`)."""
    from lnbench.run.device import emulator_status as device_emulator_status

    return device_emulator_status()


def _count(value) -> str:
    from lnbench.results import missing

    return "" if missing(value) else f"{value:,.0f}"


def _per_row(value) -> str:
    from lnbench.results import missing

    return "" if missing(value) else f"{value:,.1f}"


EXECUTED_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("arch", "arch", justify="left"),
    Column("abi", "ABI", justify="left"), Column("op", "op", justify="left"),
    Column("kernel", "kernel", justify="left"), Column("shape", "M×N"), Column("launch", "grid×block"),
    Column("exec_instructions", "wave-instrs", _count), Column("exec_instructions_per_row", "/row", _per_row),
    Column("exec_salu", "SALU", _count), Column("exec_valu", "VALU", _count),
    Column("exec_vmem_load", "VMEM ld", _count), Column("exec_vmem_store", "VMEM st", _count),
    Column("exec_smem", "SMEM", _count), Column("exec_lds", "LDS", _count),
    Column("exec_cross_lane", "x-lane", _count), Column("exec_branch", "branch", _count),
    Column("exec_sync", "wait/bar", _count), Column("global_bytes_per_row", "global B/row", _per_row),
    Column("unique_bytes", "distinct B ld/st"), Column("lds_bytes_executed", "LDS B", _count),
    Column("status", "status", styled_status, justify="left"),
]


def _variant_rows(variants: Iterable[InspectRow], rows_of: Callable[[InspectRow], list[InspectRow]],
                  progress: CommandProgress, sink: ResultSink | None = None) -> list[InspectRow]:
    """rows_of(variant) for each variant, each row joined to its variant and marked ok; a variant whose rows
    cannot be made (compile error, emulator fault) is one `error` row and the others still run. Each variant's
    rows go to `sink` as they come (static rows tagged part=static, as in the files)."""
    from lnbench.results import InspectRow

    rows: list[InspectRow] = []
    for variant in variants:
        try:
            made = [variant.with_(**row.cells(), status="ok") for row in rows_of(variant)]
            status = "ok"
        except NotRun as why:                 # a kernel source without that builder
            made = [variant.with_(status="not run", detail=str(why))]
            status = "not run"
        except Exception as exc:  # noqa: BLE001 - one variant failing must not lose the others
            made = [variant.with_(status="error", detail=one_line(exc))]
            status = "error"
        rows.extend(made)
        if sink is not None:
            sink.add(sink.done, [row if row.has("part") else row.with_(part="static") for row in made])
        where = variant.shape or f"N={variant.n}"
        progress.advance(" ".join(str(variant.value(k)) for k in ("arch", "abi", "op", "dtype")) + f" {where} {status}")
    return rows


class NotRun(Exception):
    """A variant that does not exist (a kernel source's missing builder); the message says what is missing."""


def _source(variant: InspectRow):
    """The kernel source a variant's backend drives (None: lnbench's own kernels)."""
    from lnbench.backends import source_spec
    return source_spec(str(variant.backend)) if variant.backend not in OWN_FLYDSL else None


def _variant(variant: InspectRow) -> tuple[str, str, int, str, str, str]:
    """(op, dtype, n, abi, arch, dγ strategy) of a variant row: backend_variants and its callers set each one."""
    return (str(variant.op), str(variant.dtype), int(variant.n or 0), str(variant.abi), str(variant.arch),
            str(variant.dgamma_strategy))


def _static_facts(variant: InspectRow, isa_dir: Path | None = None) -> list[InspectRow]:
    from lnbench.flydsl.inspect import compile_facts, facts_to_rows, isa_file_name, source_facts

    spec = _source(variant)
    op, dtype, n, abi, arch, strategy = _variant(variant)
    if spec is None:
        facts = compile_facts(op, dtype, n, abi, arch, dgamma_strategy=strategy)
    else:
        facts = source_facts(spec, op, dtype, n, arch)
        if not facts:
            raise NotRun(_missing(spec))
    rows = facts_to_rows(facts)
    for fact, row in zip(facts, rows):
        if isa_dir is not None:           # the disassembly of each kernel, as the compiler wrote it
            path = isa_dir / isa_file_name(fact, spec.name if spec is not None else "")
            try:
                path.write_text(fact.isa_text, encoding="utf-8")
            except OSError as exc:
                raise LnbenchUsageError(f"--isa: cannot write {path}: {exc.strerror or exc}") from None
            row.isa_file = str(path)
    for row in rows:
        row.set(arg_count=len(row.kernel_args.split()) if row.kernel_args else 0,
                spills=f"{row.vgpr_spills}/{row.sgpr_spills}")
    return rows


def _executed_launches(variant: InspectRow) -> list[InspectRow]:
    from lnbench.flydsl.inspect import execute_variant, kernel_role

    spec = _source(variant)
    if spec is not None and variant.op == "bwd" and _missing(spec):
        raise NotRun(_missing(spec))
    rows = []
    op, dtype, n, abi, arch, strategy = _variant(variant)
    for kernel in execute_variant(op, dtype, int(variant.M or 0), n, abi, arch, dgamma_strategy=strategy, source=spec):
        row = kernel.to_row()
        row.set(shape=variant.shape, kernel=kernel_role(kernel.kernel_name),
                launch=f"{kernel.grid[0]}×{kernel.block[0]}",
                unique_bytes=f"{row.unique_bytes_loaded:,} / {row.unique_bytes_stored:,}")
        rows.append(row)
    return rows


def _missing(spec) -> str:
    from lnbench.flydsl.contract import missing_backward
    return missing_backward(spec)


def backend_variants(backends: Sequence[str], abis: list[str], strategy: str) -> list[InspectRow]:
    """(backend, abi, dγ strategy) of each kernel family to inspect: lnbench's own kernels per --abi (flydsl),
    Tensor ABI only (flydsl-tensor), atomic dγ/dβ (flydsl-atomic); a kernel source once, its ABI read from its
    launcher (the rows' `abi` column says which)."""
    from lnbench.results import InspectRow

    out = []
    for name in backends:
        if name == "flydsl":
            out += [InspectRow(backend=name, abi=abi, dgamma_strategy=strategy) for abi in abis]
        elif name == "flydsl-tensor":
            out.append(InspectRow(backend=name, abi="tensor", dgamma_strategy=strategy))
        elif name == "flydsl-atomic":
            out.append(InspectRow(backend=name, abi="pointer", dgamma_strategy="atomic"))
        else:
            out.append(InspectRow(backend=name, abi="", dgamma_strategy=""))
    return out


def inspect_rows(arches: list[str], abis: list[str], ops: list[str], dtypes: list[str], widths: list[int],
                 strategy: str, progress: CommandProgress, backends: Sequence[str] = ("flydsl",),
                 sink: ResultSink | None = None, isa_dir: Path | None = None) -> list[InspectRow]:
    """One row per compiled kernel of every backend (backend_variants); a variant that fails to compile is an
    `error` row. With `isa_dir`, each kernel's ISA is written there too (its path in the row's isa_file)."""
    families = backend_variants(backends, abis, strategy)
    variants = (fam.with_(arch=arch, op=op, dtype=dtype, n=n)
                for arch, dtype, n, op, fam in itertools.product(arches, dtypes, widths, ops, families))
    return _variant_rows(variants, functools.partial(_static_facts, isa_dir=isa_dir), progress, sink)


def executed_rows(arches: list[str], abis: list[str], ops: list[str], dtypes: list[str],
                  shapes: list[tuple[int, int]], strategy: str, progress: CommandProgress,
                  backends: Sequence[str] = ("flydsl",), sink: ResultSink | None = None) -> list[InspectRow]:
    """One row per launch of every variant, executed on the emulated device on M × N inputs (seeded); a variant
    that fails (compile error, emulator fault) is an `error` row."""
    families = backend_variants(backends, abis, strategy)
    variants = (fam.with_(part="executed", arch=arch, op=op, dtype=dtype, M=m, n=n, shape=f"{m}x{n}")
                for arch, dtype, (m, n), op, fam in itertools.product(arches, dtypes, shapes, ops, families))
    return _variant_rows(variants, _executed_launches, progress, sink)


@click.command("inspect")
@click.option("--arch", "arches", multiple=True, help="gfx942, gfx950 (repeatable or comma list; default both).")
@click.option("--abi", "abis", multiple=True, help="pointer, tensor: the ABI of --backend flydsl (default both).")
@click.option("--op", "ops", multiple=True, help="fwd, fwd-nostats, bwd (default all).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (default bf16).")
@click.option("--shapes", multiple=True, default=list(SHAPES), show_default=True,
              help="MxN list; only N matters for compiling (M is a runtime argument).")
@click.option("--dgamma", "strategy", type=click.Choice(STRATEGIES),
              help="dγ/dβ strategy of the backward (default: deterministic; needs bwd among --op).")
@click.option("--execute", is_flag=True,
              help="Also run every variant on the emulated device (M×N of --shapes, seeded inputs) and report what "
                   "each launch executed: wave-instructions by class, global and LDS bytes, per launch and per row.")
@click.option("--backend", "backends", multiple=True, default=["flydsl"], show_default=True,
              help="Kernels to inspect (repeatable or comma list): flydsl (lnbench's, per --abi), flydsl-tensor, "
                   "flydsl-atomic, flydsl-src (FlyDSL's own, needs --kernel-src), a [backends.NAME] of the config, "
                   "or module:PKG.MOD; several are shown side by side.")
@config_option(help_text="TOML file merged over the packaged defaults (its [backends.NAME] kernel sources).")
@kernel_source_option
@click.option("--isa", "isa_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write each compiled kernel's ISA (disassembly, as FlyDSL's LLVM backend emits it) into this "
                   "folder: one <arch>-<abi>-<op>-<dtype>-N<n>-<kernel>.s per kernel (a kernel source's: "
                   "<backend>-<arch>-...).")
@emu_checks_option
@md_option
@output_options
@guarded
def inspect_command(*, arches: tuple[str, ...], abis: tuple[str, ...], ops: tuple[str, ...], dtypes: tuple[str, ...],
                    shapes: tuple[str, ...], strategy: str | None, execute: bool, backends: tuple[str, ...],
                    config_path: Path | None, kernel_src: Path | None, isa_dir: Path | None, emu_checks: str | None,
                    md_path: Path | None, csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Compile the FlyDSL kernels (compile-only, no GPU) and report kernarg bytes, registers, spills, LDS, ISA;
    with --execute, also what each launch executes on the emulated device."""
    o = InspectOptions(arches=arches, abis=abis, ops=ops, dtypes=dtypes, shapes=shapes, strategy=strategy,
                       execute=execute, backends=backends, config_path=config_path, kernel_src=kernel_src,
                       isa_dir=isa_dir, emu_checks=emu_checks, md_path=md_path, csv_path=csv_path,
                       json_path=json_path)
    return run(build_plan(o), quiet)


@dataclass
class InspectPlan:
    """An inspect run after its checks: the variants to compile (and execute), the outputs, the metadata."""
    backends: list[str]
    arches: list[str]
    abis: list[str]
    ops: list[str]
    dtypes: list[str]
    shapes: list[tuple[int, int]]
    widths: list[int]
    strategy: str
    execute: bool
    checks_line: str | None
    isa_dir: Path | None
    outputs: tuple[Path | None, Path | None, Path | None]
    total: int
    executed_total: int
    metadata: InspectRun


@dataclass(frozen=True)
class InspectOptions(SharedOptions):
    """`lnbench inspect`'s options as given: the shared ones (cli_common.SharedOptions) and its own (--quiet is the
    run's, not the plan's)."""

    arches: tuple[str, ...] = ()
    abis: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    shapes: tuple[str, ...] = SHAPES
    strategy: str | None = None
    execute: bool = False
    backends: tuple[str, ...] = ("flydsl",)
    isa_dir: Path | None = None

def build_plan(o: InspectOptions) -> InspectPlan:
    """Check the options and the toolkit once (exit 2 on bad input), reserve the outputs."""
    from lnbench.results import INSPECT
    from lnbench.run.device import compile_device
    from lnbench.run.metadata import emu_checks as emu_checks_in_effect, package_version, provenance
    from lnbench.scaffold.setup import Setup, begin

    arches, abis, ops, dtypes, shapes, strategy, execute, backends, isa_dir, emu_checks = (
        o.arches, o.abis, o.ops, o.dtypes, o.shapes, o.strategy, o.execute, o.backends, o.isa_dir, o.emu_checks)
    Setup.check_kernel_src(o.kernel_src)                 # before the config (inspect's order)
    setup = begin("inspect", o.config_path, config_is_input=False)
    setup.register_sources()
    backend_list = requested_names(backends, ["flydsl"])
    flydsl_free = [n for n in backend_list if not runs_flydsl(n)]
    if flydsl_free:
        raise LnbenchUsageError(f"inspect reads compiled FlyDSL kernels: {', '.join(flydsl_free)} has none")
    arch_list = _choices(arches, ARCHES, "arch")
    abi_list = _choices(abis, ABIS, "ABI")
    op_list = _choices(ops, KERNEL_OPS, "op")
    if strategy is not None and "bwd" not in op_list:
        raise LnbenchUsageError(f"--dgamma does nothing with --op {','.join(op_list)}: the dγ strategy exists "
                                f"only for bwd")
    if strategy is not None and not {"flydsl", "flydsl-tensor"} & set(backend_list):
        raise LnbenchUsageError(f"--dgamma does nothing with --backend {','.join(backend_list)}: only flydsl and "
                                f"flydsl-tensor take a dγ strategy (flydsl-atomic is atomic)")
    if abis and "flydsl" not in backend_list:
        raise LnbenchUsageError(f"--abi does nothing with --backend {','.join(backend_list)}: it picks the ABI of "
                                f"--backend flydsl (flydsl-tensor is the Tensor ABI, flydsl-atomic the Pointer ABI, "
                                f"a kernel source its launcher's)")
    strategy = strategy or "deterministic"
    dtype_list = cfg.parse_dtypes(dtypes, ["bf16"])
    shape_list = cfg.parse_shapes(shapes)
    widths = list(dict.fromkeys(n for _, n in shape_list))
    if any(n in OWN_FLYDSL for n in backend_list):
        setup.check_widths(shape_list, dtype_list)        # known limits of lnbench's kernels, before any compile
    if package_version("flydsl") == "not installed":
        raise LnbenchUsageError("flydsl is not installed: pip install 'flydsl>=0.5,<0.6'")
    setup.check_toolkit(required=True)
    if emu_checks is not None and not execute:
        raise LnbenchUsageError("--emu-checks applies to emulated launches: add --execute")
    checks_line = None
    if execute:
        ok, why = emulator_status()
        if not ok:
            raise LnbenchUsageError(f"--execute needs the emulated device: {why}")
        checks_line = apply_emu_checks(emu_checks)
        setup.fit(shape_list, EXECUTE_BYTES_PER_ELEMENT, "cpu", "inspect --execute (emulated device memory)")
    if isa_dir is not None:
        try:
            isa_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LnbenchUsageError(f"--isa {isa_dir}: cannot create the folder: {exc.strerror or exc}") from None
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path)
    families = backend_variants(backend_list, abi_list, strategy)
    total = len(arch_list) * len(families) * len(op_list) * len(dtype_list) * len(widths)
    executed_total = len(arch_list) * len(families) * len(op_list) * len(dtype_list) * len(shape_list)
    from lnbench.flydsl.toolkit import describe

    metadata = provenance(compile_device(arch_list), INSPECT, "inspect")
    metadata.set(toolkit=describe(), executed_on=",".join(f"emu:{arch}" for arch in arch_list) if execute else None,
                 emu_checks=emu_checks_in_effect() if execute else None)
    record_sources(metadata, backend_list)
    return InspectPlan(backend_list, arch_list, abi_list, op_list, dtype_list, shape_list, widths, strategy, execute,
                       checks_line, isa_dir, outputs, total, executed_total, metadata)


def run(plan: InspectPlan, quiet: bool) -> int:
    """Compile (and with --execute run) every variant, print the tables, write the rows; exit 1 on any error."""
    from lnbench.scaffold.sink import ResultSink
    from lnbench.output.tables import render_table, silent_console
    from lnbench.results import InspectRow
    from lnbench.run.progress import CommandProgress

    p = plan
    csv_final, json_final, md_final = p.outputs
    with ResultSink(csv_final, json_final, p.metadata, p.total + (p.executed_total if p.execute else 0),
                    "variants") as sink:
        with CommandProgress(err_console, "compiling", p.total, quiet) as progress:
            rows = inspect_rows(p.arches, p.abis, p.ops, p.dtypes, p.widths, p.strategy, progress, p.backends,
                                sink, p.isa_dir)
        render_table(console if not quiet else silent_console(),
                     "lnbench inspect: compiled FlyDSL kernels (compile-only, nothing executed)", COLUMNS, rows)
        if not quiet and "bwd" in p.ops and p.strategy != "atomic" and "flydsl" in p.backends:
            from lnbench.flydsl.bwd_plan import note            # the backward's plan per shape (issue 55)
            for arch, dt, (m, n) in itertools.product(p.arches, p.dtypes, p.shapes):
                console.print(escape(f"backward plan, {note(m, n, dt, arch)}"), soft_wrap=True, highlight=False)
        executed: list[InspectRow] = []
        if p.execute:
            if not quiet:
                console.print(p.checks_line)
            with CommandProgress(err_console, "executing", p.executed_total, quiet) as progress:
                executed = executed_rows(p.arches, p.abis, p.ops, p.dtypes, p.shapes, p.strategy, progress,
                                         p.backends, sink)
            render_table(console if not quiet else silent_console(),
                         "lnbench inspect --execute: what each launch executed on the emulated device (wave-instructions "
                         "by class; global bytes = instruction bytes, distinct = compulsory; not a timing)",
                         EXECUTED_COLUMNS, executed)
        for row in rows + executed:
            if row.status in ("error", "not run"):
                console.print(f"[red]{row.backend} {row.arch} {row.abi} {row.op} {row.dtype} "
                              f"N={row.n}:[/red] {escape(str(row.detail or ''))}")
        for row in rows + executed:                   # each row names its kernel source (module, file, commit)
            spec = _source(row)
            if spec is not None:
                from lnbench.flydsl.contract import provenance
                row.set(**provenance(spec))
        summary, errors = _summary(rows, executed if p.execute else None, p.total, p.isa_dir)
        sink.finish([r.with_(part="static") for r in rows] + executed, md_path=md_final, summary=summary)
    console.print(summary)
    return EXIT_FAILED if errors else EXIT_OK

def _summary(rows: Sequence[InspectRow], executed: Sequence[InspectRow] | None, total: int,
             isa_dir: Path | None) -> tuple[str, int]:
    """The summary line and the count of compile and execution errors (`executed`: None without --execute)."""
    errors = sum(r.status == "error" for r in rows)
    not_run = sum(r.status == "not run" for r in rows)
    summary = f"{len(rows) - not_run} kernels from {total} variants, {errors} compile errors"
    if not_run:
        summary += f", {not_run} not run (no such builder)"
    if executed is not None:
        failed = sum(r.status == "error" for r in executed)
        summary += f"; {sum(r.status == 'ok' for r in executed)} launches executed, {failed} execution errors"
        errors += failed
    if isa_dir is not None:
        summary += f"; ISA of {sum(r.has('isa_file') for r in rows)} kernels in {isa_dir}"
    return summary, errors
