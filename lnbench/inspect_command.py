"""`lnbench inspect`: compile-only static facts of every FlyDSL kernel variant (no GPU needed)."""
from __future__ import annotations

import click
from rich.progress import Progress

from lnbench import config as cfg
from lnbench.cli_common import EXIT_FAILED, EXIT_OK, console, emit_outputs, guarded, output_options, prepare_outputs
from lnbench.errors import LnbenchUsageError
from lnbench.metadata import package_version, timestamp
from lnbench.report import Column, render_table, styled_status

ARCHES = ("gfx942", "gfx950")
ABIS = ("pointer", "tensor")
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


def _choices(values: tuple[str, ...], allowed: tuple[str, ...], what: str) -> list[str]:
    items = cfg.split_list(values) or list(allowed)
    for item in items:
        if item not in allowed:
            raise LnbenchUsageError(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def inspect_rows(arches: list[str], abis: list[str], ops: list[str], dtypes: list[str], widths: list[int],
                 strategy: str, advance=lambda: None) -> list[dict]:
    """One row per compiled kernel; a variant that fails to compile is an `error` row."""
    from lnbench.flydsl.inspect import compile_facts, facts_to_rows

    rows: list[dict] = []
    for arch in arches:
        for dtype in dtypes:
            for n in widths:
                for op in ops:
                    for abi in abis:
                        base = {"arch": arch, "abi": abi, "op": op, "dtype": dtype, "n": n, "dgamma_strategy": strategy}
                        try:
                            for row in facts_to_rows(compile_facts(op, dtype, n, abi, arch, dgamma_strategy=strategy)):
                                row["arg_count"] = len(row["kernel_args"].split()) if row["kernel_args"] else 0
                                row["spills"] = f"{row['vgpr_spills']}/{row['sgpr_spills']}"
                                rows.append({**base, **row, "status": "ok"})
                        except Exception as exc:  # one variant failing must not lose the others
                            rows.append({**base, "status": "error",
                                         "detail": f"{type(exc).__name__}: {exc}".splitlines()[0]})
                        advance()
    return rows


@click.command("inspect")
@click.option("--arch", "arches", multiple=True, help="gfx942, gfx950 (repeatable or comma list; default both).")
@click.option("--abi", "abis", multiple=True, help="pointer, tensor (default both).")
@click.option("--op", "ops", multiple=True, help="fwd, fwd-nostats, bwd (default all).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (default bf16).")
@click.option("--shapes", multiple=True, default=["1x1000,1x4096,1x8192,1x16384"], show_default=True,
              help="MxN list; only N matters for compiling (M is a runtime argument).")
@click.option("--dgamma", "strategy", type=click.Choice(STRATEGIES), default="deterministic", show_default=True,
              help="dγ/dβ strategy of the backward.")
@output_options
@guarded
def inspect_command(arches, abis, ops, dtypes, shapes, strategy, csv_path, json_path, quiet) -> int:
    """Compile the FlyDSL kernels (compile-only, no GPU) and report kernarg bytes, registers, spills, LDS, ISA."""
    arch_list = _choices(arches, ARCHES, "arch")
    abi_list = _choices(abis, ABIS, "ABI")
    op_list = _choices(ops, OPS, "op")
    dtype_list = cfg.parse_dtypes(dtypes) or ["bf16"]
    widths = list(dict.fromkeys(n for _, n in cfg.parse_shapes(shapes)))
    if package_version("flydsl") == "not installed":
        raise LnbenchUsageError("flydsl is not installed: pip install 'flydsl>=0.5,<0.6'")
    csv_final, json_final = prepare_outputs("inspect", csv_path, json_path)
    total = len(arch_list) * len(abi_list) * len(op_list) * len(dtype_list) * len(widths)
    with Progress(console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task("compiling", total=total)
        rows = inspect_rows(arch_list, abi_list, op_list, dtype_list, widths, strategy, lambda: progress.advance(task))
    if not quiet:
        render_table(console, "lnbench inspect: compiled FlyDSL kernels (compile-only, nothing executed)", COLUMNS, rows)
    for row in rows:
        if row["status"] == "error":
            console.print(f"[red]{row['arch']} {row['abi']} {row['op']} {row['dtype']} N={row['n']}:[/red] {row['detail']}")
    from lnbench.flydsl.toolkit import describe

    metadata = {"lnbench_command": "inspect", "flydsl_version": package_version("flydsl"),
                "toolkit": describe(), "timestamp": timestamp()}
    emit_outputs(rows, metadata, csv_final, json_final)
    errors = sum(r["status"] == "error" for r in rows)
    console.print(f"{len(rows)} kernels from {total} variants, {errors} compile errors")
    return EXIT_FAILED if errors else EXIT_OK
