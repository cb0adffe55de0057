"""The terminal table (and --md summary) of `lnbench perf --device emu`: one line per launch × target × mode,
floors in µs, the title saying the numbers are modelled lower bounds, not measurements."""
from __future__ import annotations

from typing import Any, Sequence

from lnbench.cli_common import console
from lnbench.results import ProfileRow, missing
from lnbench.output.tables import Column, render_table, silent_console


def _us(value: Any) -> str:
    return "—" if missing(value) else f"{value:.4g}"


def _count(value: Any) -> str:
    return "" if missing(value) else f"{int(value):,}"


COLUMNS = [
    *(Column(k, k, justify="left") for k in ("backend", "op", "dtype", "shape", "launch", "target", "mode")),
    Column("exec_instructions", "wave-instr", _count), Column("exec_valu", "VALU", _count),
    Column("lds_conflict_cycles", "LDS confl.", _count), Column("_bytes", "bytes", _count),
    Column("memory_us", "memory", _us), Column("issue_valu_us", "VALU issue", _us), Column("lds_us", "LDS", _us),
    Column("bound_us", "bound", _us), Column("_by", "bound by", justify="left"),
]


def print_profile(rows: Sequence[ProfileRow], arch: str, quiet: bool = False) -> None:
    """The modelled floors (µs) and the profile behind them; then what could not be computed and why (quiet:
    the table recorded for the Markdown only)."""
    shown = []
    for r in rows:
        ok = r.status == "ok"
        shown.append({**r.cells(), "_bytes": (r.unique_bytes_loaded or 0) + (r.unique_bytes_stored or 0) if ok else None,
                      "_by": r.bound_by if ok else f"{r.status}: {r.detail or ''}"})
    title = f"lnbench perf on the emulated device ({arch}): MODELLED lower bounds, µs — not timings"
    render_table(silent_console() if quiet else console, title, COLUMNS, shown)
    if quiet:
        return
    _bwd_plan_lines(rows, arch)
    notes = sorted({"issue floors of the classes other than VALU: no published issue rate"
                    if n.startswith("issue floors of") else n
                    for r in rows for n in str(r.notes or "").split("; ") if n})
    if notes:
        console.print("not computed (no published figure; docs/targets.md): " + "; ".join(notes), style="yellow",
                      soft_wrap=True)


def _bwd_plan_lines(rows: Sequence[ProfileRow], arch: str) -> None:
    """The deterministic backward's plan of each lnbench FlyDSL case (lnbench.flydsl.bwd_plan, issue 55): its
    bytes against the compulsory bytes, and the distinct bytes its launches executed here (summed over them)."""
    from rich.markup import escape

    from lnbench.flydsl.bwd_plan import note
    executed: dict[tuple, int] = {}
    for r in rows:
        if (r.status == "ok" and r.op == "bwd" and str(r.backend).startswith("flydsl")
                and r.dgamma_strategy == "deterministic" and r.M and r.N):
            key = (r.backend, r.dtype, r.M, r.N, r.target, r.mode)
            executed[key] = executed.get(key, 0) + (r.unique_bytes_loaded or 0) + (r.unique_bytes_stored or 0)
    seen = set()
    for (backend, dtype, m, n, _target, _mode), nbytes in executed.items():
        if (backend, dtype, m, n) not in seen:
            seen.add((backend, dtype, m, n))
            console.print(escape(f"backward plan ({backend}), {note(m, n, dtype, arch, nbytes)}"), soft_wrap=True,
                          highlight=False)
