"""Static comparison: compile both ABIs of each kernel (compile-only, no GPU) and compare their facts.

One row per arch × op × dtype × N × kernel (the backward launches a main and, for the deterministic
dγ/dβ strategy, a reduce kernel), with the Tensor and Pointer values side by side and Pointer/Tensor
ratios for kernarg bytes, launcher dispatch slots and instruction count. With `execute` (N -> M rows), both
ABIs of each variant also run on the emulated device and the rows get the wave-instructions each launch
executed (total, per input row, by class) and their Pointer/Tensor ratio.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable, Sequence

from lnbench.constants import ARCHES
from lnbench.run.device import Device
from lnbench.emu.registry import CLASSES
from lnbench.errors import one_line
from lnbench.results import AbiRow

#: KernelFacts field -> row key prefix
FIELDS: dict[str, str] = {
    "kernarg_bytes": "kernarg", "launcher_slots": "slots", "vgpr": "vgpr", "sgpr": "sgpr",
    "lds_bytes": "lds", "scratch_bytes": "scratch", "instruction_count": "instr",
}
RATIO_FIELDS: tuple[str, ...] = ("kernarg", "args", "slots", "instr")

FactsFn = Callable[..., list]
#: executed-instruction classes copied into the rows
EXEC_CLASSES: tuple[str, ...] = CLASSES


def flydsl_installed() -> bool:
    """True when the flydsl package can be imported (it is never imported here)."""
    return importlib.util.find_spec("flydsl") is not None


def default_arches(device: Device) -> list[str]:
    """The arch of a device that executes FlyDSL kernels (a ROCm GPU, the emulator), else gfx942 and gfx950."""
    return [device.arch] if device.executes_flydsl else list(ARCHES)


def _ratio(pointer: float, tensor: float) -> float | None:
    return pointer / tensor if tensor else None


def compare_facts(tensor_facts: Sequence[Any], pointer_facts: Sequence[Any]) -> list[AbiRow]:
    """Side-by-side rows for the kernels of one variant (matched by position: main, then reduce)."""
    from lnbench.flydsl.inspect import kernel_role

    if len(tensor_facts) != len(pointer_facts):
        raise ValueError(f"Tensor ABI launches {len(tensor_facts)} kernel(s), Pointer ABI {len(pointer_facts)}")
    rows = []
    for t, p in zip(tensor_facts, pointer_facts):
        row = AbiRow(kernel=kernel_role(p.kernel_name), tensor_kernel=t.kernel_name, pointer_kernel=p.kernel_name)
        for attr, key in FIELDS.items():
            row.set(**{f"{key}_tensor": int(getattr(t, attr)), f"{key}_pointer": int(getattr(p, attr))})
        row.set(args_tensor=len(t.kernel_args), args_pointer=len(p.kernel_args),
                spills_tensor=int(t.vgpr_spills) + int(t.sgpr_spills),
                spills_pointer=int(p.vgpr_spills) + int(p.sgpr_spills))
        for key in RATIO_FIELDS:
            row.set(**{f"{key}_ratio": _ratio(row.value(f"{key}_pointer"), row.value(f"{key}_tensor"))})
        row.set(tensor_args_list=" ".join(f"{o}:{s}:{k}" for o, s, k in t.kernel_args),
                pointer_args_list=" ".join(f"{o}:{s}:{k}" for o, s, k in p.kernel_args))
        rows.append(row)
    return rows


def executed_columns(tensor_runs: Sequence[Any], pointer_runs: Sequence[Any]) -> list[AbiRow]:
    """Executed-instruction columns for the kernels of one variant (ExecutedKernel lists, matched by position)."""
    if len(tensor_runs) != len(pointer_runs):
        raise ValueError(f"Tensor ABI made {len(tensor_runs)} launch(es), Pointer ABI {len(pointer_runs)}")
    out = []
    for t, p in zip(tensor_runs, pointer_runs):
        cols = AbiRow(exec_rows=p.m, exec_tensor=t.total, exec_pointer=p.total,
                      exec_per_row_tensor=t.total / max(t.m, 1), exec_per_row_pointer=p.total / max(p.m, 1),
                      exec_ratio=_ratio(p.total, t.total))
        for cls in EXEC_CLASSES:
            cols.set(**{f"exec_{cls}_tensor": t.wave_instructions.get(cls, 0),
                        f"exec_{cls}_pointer": p.wave_instructions.get(cls, 0)})
        # SHA-256 (16 hex) of each side's code object
        cols.set(exec_code_tensor=getattr(t, "code_object", ""), exec_code_pointer=getattr(p, "code_object", ""))
        out.append(cols)
    return out


def _base(arch: str, op: str, dtype: str, n: int, **cells: Any) -> AbiRow:
    """A static row of one variant, with `cells`."""
    return AbiRow(part="static", arch=arch, op=op, dtype=dtype, N=n, **cells)


def static_rows(arches: Sequence[str], ops: Sequence[str], dtypes: Sequence[str], widths: Sequence[int], *,
                eps: float = 1e-5, dgamma_strategy: str = "deterministic", facts_fn: FactsFn | None = None,
                on_step: Callable[[], None] | None = None, execute: dict[int, int] | None = None,
                execute_fn: FactsFn | None = None) -> list[AbiRow]:
    """Compile every variant for both ABIs and compare; a failing compile becomes an `error` row.

    facts_fn defaults to lnbench.flydsl.inspect.compile_facts (imported here, lazily); without flydsl
    every row says `not run (flydsl not installed)`. execute: {N: M} runs both ABIs of every variant of
    width N on M rows on the emulated device (execute_fn defaults to lnbench.flydsl.inspect.execute_variant);
    a failing execution leaves the static facts and says why in `exec_status`.
    """
    if facts_fn is None:
        if not flydsl_installed():
            return [_base(a, o, d, n, status="not run (flydsl not installed)")
                    for a in arches for o in ops for d in dtypes for n in widths]
        from lnbench.flydsl.inspect import compile_facts
        facts_fn = compile_facts
    rows: list[AbiRow] = []
    for arch in arches:
        for op in ops:
            for dtype in dtypes:
                for n in widths:
                    base = _base(arch, op, dtype, n)
                    try:
                        t = facts_fn(op, dtype, n, "tensor", arch, eps=eps, dgamma_strategy=dgamma_strategy)
                        p = facts_fn(op, dtype, n, "pointer", arch, eps=eps, dgamma_strategy=dgamma_strategy)
                        variant = [base.with_(**row.cells(), status="ok") for row in compare_facts(t, p)]
                    except Exception as exc:  # noqa: BLE001 - one failing variant must not hide the others
                        missing = type(exc).__name__ == "MissingBuilder"     # a kernel source without that builder
                        rows.append(base.with_(status="not run" if missing else "error",
                                               detail=str(exc) if missing else one_line(exc, 300)))
                    else:
                        if execute and n in execute:
                            _add_executed(variant, execute_fn, op, dtype, execute[n], n, arch, eps, dgamma_strategy)
                        rows.extend(variant)
                    if on_step:
                        on_step()
    return rows


def _add_executed(variant: list[AbiRow], execute_fn: FactsFn | None, op: str, dtype: str, m: int, n: int,
                  arch: str, eps: float, strategy: str) -> None:
    """Add the executed columns to the rows of one variant (exec_status says ok or why not)."""
    if execute_fn is None:
        from lnbench.flydsl.inspect import execute_variant
        execute_fn = execute_variant
    try:
        runs = {abi: execute_fn(op, dtype, m, n, abi, arch, eps=eps, dgamma_strategy=strategy)
                for abi in ("tensor", "pointer")}
        columns = executed_columns(runs["tensor"], runs["pointer"])
        if len(columns) != len(variant):
            raise ValueError(f"{len(columns)} executed launch(es) for {len(variant)} compiled kernel(s)")
    except Exception as exc:  # noqa: BLE001 - the compile-only facts stand
        for row in variant:
            row.exec_status = f"error: {one_line(exc, 300)}"
        return
    for row, cols in zip(variant, columns):
        row.set(**cols.cells(), exec_status="ok")
