"""The terminal table of `lnbench perf --device emu`: one line per launch × target × mode, floors in µs, every
title saying the numbers are modelled lower bounds, not measurements."""
from __future__ import annotations

from typing import Sequence

from rich.table import Table

from lnbench.cli_common import console
from lnbench.results import ProfileRow

_US = ("memory_us", "issue_valu_us", "lds_us", "bound_us")


def _us(value) -> str:
    return "—" if value is None or value != value else f"{value:,.2f}"


def print_profile(rows: Sequence[ProfileRow], arch: str) -> None:
    """The modelled floors (µs) and the profile behind them."""
    table = Table(title=f"lnbench perf on the emulated device ({arch}): MODELLED lower bounds, µs — not timings")
    for name in ("backend", "op", "dtype", "shape", "launch", "target", "mode", "wave-instr", "VALU", "LDS confl.",
                 "bytes", "memory", "VALU issue", "LDS", "bound", "bound by"):
        table.add_column(name, justify="left" if name in ("backend", "op", "dtype", "launch", "target", "mode",
                                                          "bound by") else "right")
    for r in rows:
        if r.get("status") != "ok":
            table.add_row(r["backend"], r["op"], r["dtype"], r["shape"], "", "", "", "", "", "", "", "", "", "", "",
                          f"[red]{r.get('status')}: {r.get('detail', '')}[/red]")
            continue
        nbytes = r["unique_bytes_loaded"] + r["unique_bytes_stored"]
        table.add_row(r["backend"], r["op"], r["dtype"], r["shape"], r["launch"], r["target"], r["mode"],
                      f"{r['exec_instructions']:,}", f"{r.get('exec_valu', 0):,}", f"{r['lds_conflict_cycles']:,}",
                      f"{nbytes:,}", *(_us(r.get(k)) for k in _US), r["bound_by"])
    console.print(table)
    notes = sorted({"issue floors of the classes other than VALU: no published issue rate"
                    if n.startswith("issue floors of") else n
                    for r in rows for n in str(r.get("notes") or "").split("; ") if n})
    if notes:
        console.print("not computed (no published figure; docs/targets.md): " + "; ".join(notes), style="yellow",
                      soft_wrap=True)
