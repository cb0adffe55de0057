"""`lnbench inspect`: compile-only static facts of every FlyDSL kernel variant (no GPU needed), and with
`--execute` what each launch executes on the emulated device (per launch and per input row)."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable

import click
import torch

from lnbench import config as cfg
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, console, emit_outputs, err_console, guarded, output_options,
                                prepare_outputs)
from lnbench.device import Device, emulator_status
from lnbench.errors import LnbenchUsageError, one_line
from lnbench.metadata import package_version, run_metadata
from lnbench.progress import CommandProgress
from lnbench.report import Column, render_table, styled_status
from lnbench import validate
from lnbench.validate import ARCHES, choices as _choices


def compile_device(arches: list[str]) -> Device:
    """The device the inspect rows describe: compile-only for the target arch(es), on this host."""
    return Device("compile-only", "cpu", torch.device("cpu"), ",".join(arches))
ABIS = ("pointer", "tensor")
#: memory estimate per element of an --execute shape (inputs, outputs and workspace in host memory, the emulator's
#: copies of them)
EXECUTE_BYTES_PER_ELEMENT = 64
OPS = ("fwd", "fwd-nostats", "bwd")
STRATEGIES = ("deterministic", "atomic")

COLUMNS = [
    Column("arch", "arch", justify="left"), Column("abi", "ABI", justify="left"), Column("op", "op", justify="left"),
    Column("kernel_name", "kernel", justify="left"), Column("dtype", "dtype", justify="left"), Column("n", "N"),
    Column("kernarg_bytes", "kernarg B"), Column("arg_count", "args"), Column("launcher_slots", "host slots"),
    Column("vgpr", "VGPR"), Column("sgpr", "SGPR"), Column("spills", "spills v/s"), Column("lds_bytes", "LDS B"),
    Column("scratch_bytes", "scratch B"), Column("loads_128bit", "128b ld"), Column("stores_128bit", "128b st"),
    Column("instruction_count", "instrs"), Column("status", "status", styled_status, justify="left"),
]


def _count(value) -> str:
    return "" if value is None or value != value else f"{value:,.0f}"


def _per_row(value) -> str:
    return "" if value is None or value != value else f"{value:,.1f}"


EXECUTED_COLUMNS = [
    Column("arch", "arch", justify="left"), Column("abi", "ABI", justify="left"), Column("op", "op", justify="left"),
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


def _variant_rows(variants: Iterable[dict[str, Any]], rows_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
                  progress: CommandProgress) -> list[dict[str, Any]]:
    """rows_of(variant) for each variant, each row joined to its variant and marked ok; a variant whose rows
    cannot be made (compile error, emulator fault) is one `error` row and the others still run."""
    rows: list[dict[str, Any]] = []
    for variant in variants:
        try:
            made = rows_of(variant)
            rows.extend({**variant, **row, "status": "ok"} for row in made)
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - one variant failing must not lose the others
            rows.append({**variant, "status": "error", "detail": one_line(exc)})
            status = "error"
        where = variant.get("shape") or f"N={variant['n']}"
        progress.advance(" ".join(str(variant[k]) for k in ("arch", "abi", "op", "dtype")) + f" {where} {status}")
    return rows


def _static_facts(variant: dict[str, Any]) -> list[dict[str, Any]]:
    from lnbench.flydsl.inspect import compile_facts, facts_to_rows

    rows = facts_to_rows(compile_facts(variant["op"], variant["dtype"], variant["n"], variant["abi"], variant["arch"],
                                       dgamma_strategy=variant["dgamma_strategy"]))
    for row in rows:
        row["arg_count"] = len(row["kernel_args"].split()) if row["kernel_args"] else 0
        row["spills"] = f"{row['vgpr_spills']}/{row['sgpr_spills']}"
    return rows


def _executed_launches(variant: dict[str, Any]) -> list[dict[str, Any]]:
    from lnbench.abi.static import kernel_role
    from lnbench.flydsl.inspect import execute_variant

    rows = []
    for kernel in execute_variant(variant["op"], variant["dtype"], variant["M"], variant["n"], variant["abi"],
                                  variant["arch"], dgamma_strategy=variant["dgamma_strategy"]):
        row = {**kernel.to_row(), "shape": variant["shape"]}
        row["kernel"] = kernel_role(row["kernel_name"])
        row["launch"] = f"{kernel.grid[0]}×{kernel.block[0]}"
        row["unique_bytes"] = f"{row['unique_bytes_loaded']:,} / {row['unique_bytes_stored']:,}"
        rows.append(row)
    return rows


def inspect_rows(arches: list[str], abis: list[str], ops: list[str], dtypes: list[str], widths: list[int],
                 strategy: str, progress: CommandProgress) -> list[dict]:
    """One row per compiled kernel; a variant that fails to compile is an `error` row."""
    variants = ({"arch": arch, "abi": abi, "op": op, "dtype": dtype, "n": n, "dgamma_strategy": strategy}
                for arch, dtype, n, op, abi in itertools.product(arches, dtypes, widths, ops, abis))
    return _variant_rows(variants, _static_facts, progress)


def executed_rows(arches: list[str], abis: list[str], ops: list[str], dtypes: list[str],
                  shapes: list[tuple[int, int]], strategy: str, progress: CommandProgress) -> list[dict]:
    """One row per launch of every variant, executed on the emulated device on M × N inputs (seeded); a variant
    that fails (compile error, emulator fault) is an `error` row."""
    variants = ({"part": "executed", "arch": arch, "abi": abi, "op": op, "dtype": dtype, "M": m, "n": n,
                 "shape": f"{m}x{n}", "dgamma_strategy": strategy}
                for arch, dtype, (m, n), op, abi in itertools.product(arches, dtypes, shapes, ops, abis))
    return _variant_rows(variants, _executed_launches, progress)


@click.command("inspect")
@click.option("--arch", "arches", multiple=True, help="gfx942, gfx950 (repeatable or comma list; default both).")
@click.option("--abi", "abis", multiple=True, help="pointer, tensor (default both).")
@click.option("--op", "ops", multiple=True, help="fwd, fwd-nostats, bwd (default all).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (default bf16).")
@click.option("--shapes", multiple=True, default=["1x1000,1x4096,1x8192,1x16384"], show_default=True,
              help="MxN list; only N matters for compiling (M is a runtime argument).")
@click.option("--dgamma", "strategy", type=click.Choice(STRATEGIES),
              help="dγ/dβ strategy of the backward (default: deterministic; needs bwd among --op).")
@click.option("--execute", is_flag=True,
              help="Also run every variant on the emulated device (M×N of --shapes, seeded inputs) and report what "
                   "each launch executed: wave-instructions by class, global and LDS bytes, per launch and per row.")
@output_options
@guarded
def inspect_command(arches, abis, ops, dtypes, shapes, strategy, execute, csv_path, json_path, quiet) -> int:
    """Compile the FlyDSL kernels (compile-only, no GPU) and report kernarg bytes, registers, spills, LDS, ISA;
    with --execute, also what each launch executes on the emulated device."""
    arch_list = _choices(arches, ARCHES, "arch")
    abi_list = _choices(abis, ABIS, "ABI")
    op_list = _choices(ops, OPS, "op")
    if strategy is not None and "bwd" not in op_list:
        raise LnbenchUsageError(f"--dgamma does nothing with --op {','.join(op_list)}: the dγ strategy exists "
                                f"only for bwd")
    strategy = strategy or "deterministic"
    dtype_list = cfg.parse_dtypes(dtypes, ["bf16"])
    shape_list = cfg.parse_shapes(shapes)
    widths = list(dict.fromkeys(n for _, n in shape_list))
    validate.kernel_widths(widths, dtype_list)            # known limits, before any compile
    if package_version("flydsl") == "not installed":
        raise LnbenchUsageError("flydsl is not installed: pip install 'flydsl>=0.5,<0.6'")
    validate.toolkit()
    if execute:
        ok, why = emulator_status()
        if not ok:
            raise LnbenchUsageError(f"--execute needs the emulated device: {why}")
        validate.shapes_fit(shape_list, EXECUTE_BYTES_PER_ELEMENT, "cpu", "inspect --execute (emulated device memory)")
    csv_final, json_final = prepare_outputs("inspect", csv_path, json_path)
    total = len(arch_list) * len(abi_list) * len(op_list) * len(dtype_list) * len(widths)
    with CommandProgress(err_console, "compiling", total, quiet) as progress:
        rows = inspect_rows(arch_list, abi_list, op_list, dtype_list, widths, strategy, progress)
    if not quiet:
        render_table(console, "lnbench inspect: compiled FlyDSL kernels (compile-only, nothing executed)", COLUMNS, rows)
    executed: list[dict] = []
    if execute:
        with CommandProgress(err_console, "executing", len(arch_list) * len(abi_list) * len(op_list)
                             * len(dtype_list) * len(shape_list), quiet) as progress:
            executed = executed_rows(arch_list, abi_list, op_list, dtype_list, shape_list, strategy, progress)
        if not quiet:
            render_table(console, "lnbench inspect --execute: what each launch executed on the emulated device "
                                  "(wave-instructions by class; global bytes = instruction bytes, distinct = "
                                  "compulsory; not a timing)", EXECUTED_COLUMNS, executed)
    for row in rows + executed:
        if row["status"] == "error":
            console.print(f"[red]{row['arch']} {row['abi']} {row['op']} {row['dtype']} N={row['n']}:[/red] {row['detail']}")
    from lnbench.flydsl.toolkit import describe

    metadata = {**run_metadata(compile_device(arch_list)), "lnbench_command": "inspect", "toolkit": describe(),
                "executed_on": ",".join(f"emu:{arch}" for arch in arch_list) if execute else None}
    emit_outputs([{"part": "static", **r} for r in rows] + executed, metadata, csv_final, json_final)
    errors = sum(r["status"] == "error" for r in rows)
    summary = f"{len(rows)} kernels from {total} variants, {errors} compile errors"
    if execute:
        failed = sum(r["status"] == "error" for r in executed)
        summary += f"; {sum(r['status'] == 'ok' for r in executed)} launches executed, {failed} execution errors"
        errors += failed
    console.print(summary)
    return EXIT_FAILED if errors else EXIT_OK
