"""What `lnbench abi-compare` prints: the runtime table (both sides' times, speed-up, verdict) and the static one."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from rich.console import Console
from rich.markup import escape

from lnbench.cli_common import console
from lnbench.output.tables import Column, plain_number, render_table, styled_status, time_unit
from lnbench.results.records import Cells, plain


def _timing_cell(side: str) -> Callable[[Mapping[str, Any]], str]:
    """`8.343 ms [8.301–8.412]`: the median and the min–max across workers, all in the median's unit."""
    def fmt(row: Mapping[str, Any]) -> str:
        med = row.get(f"{side}_us")
        if med is None:
            return ""
        name, scale = time_unit(med)
        lo, hi = (plain_number(row[f"{side}_{k}_us"] / scale) for k in ("min", "max"))
        return f"{plain_number(med / scale)} {name} [{lo}–{hi}]"
    return fmt


def _calls_cell(side: str):
    def fmt(row: Mapping[str, Any]) -> str:
        value = row.get(f"{side}_calls_per_s")
        return f"{value:,.0f}" if value and row.get("metric") == "direct" else ""
    return fmt


def _ratio_cell(row: Mapping[str, Any]) -> str:
    if row.get("speedup") is None:
        return ""
    return f"{row['speedup']:.3f}× [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _verdict_cell(row: Mapping[str, Any]) -> str:
    return styled_status(escape(str(row.get("verdict") if row.get("status") == "ok" else row.get("status"))))


def render_runtime(records: Sequence[Cells], title: str, out: Console | None = None) -> None:
    """The runtime table: time per call of both sides, calls/s, the speed-up with its interval, the verdict."""
    rows = [plain(r) for r in records]
    display = [{"op": r["op"], "dtype": r["dtype"], "shape": r["shape"], "metric": r["metric"],
                "scope": str(r.get("scope", "")).replace(" (null device)", ""),   # the title names the device
                "tensor": _timing_cell("tensor")(r), "pointer": _timing_cell("pointer")(r),
                "tensor_cps": _calls_cell("tensor")(r), "pointer_cps": _calls_cell("pointer")(r),
                "ratio": _ratio_cell(r), "verdict": _verdict_cell(r), "note": r.get("worker_flag", "")} for r in rows]
    scope = [Column("scope", "scope", justify="left")] if any(d["scope"] for d in display) else []
    columns = [Column("op", "op", justify="left"), Column("dtype", "dtype", justify="left"), Column("shape", "shape"),
               Column("metric", "measurement", justify="left"), *scope,
               Column("tensor", "Tensor time/call [min–max]"), Column("pointer", "Pointer time/call [min–max]"),
               Column("tensor_cps", "Tensor calls/s"), Column("pointer_cps", "Pointer calls/s"),
               Column("ratio", "speed-up P vs T [CI]"), Column("verdict", "verdict", justify="left", markup=True)]
    if any(d["note"] for d in display):
        columns.append(Column("note", "note", justify="left"))
    render_table(out or console, title, columns, display)


def _pair_cell(key: str, ratio: bool = False):
    def fmt(row: Mapping[str, Any]) -> str:
        if row.get("status") != "ok":
            return ""
        text = f"{row[f'{key}_tensor']} → {row[f'{key}_pointer']}"
        value = row.get(f"{key}_ratio")
        return f"{text} ({value:.2f})" if ratio and value is not None else text
    return fmt


def _executed_cell(row: Mapping[str, Any]) -> str:
    """Executed wave-instructions per input row, Tensor → Pointer (P/T), or why there are none."""
    status = row.get("exec_status")
    if status is None or row.get("status") != "ok":
        return ""
    if status != "ok":
        return status
    t, p = row["exec_per_row_tensor"], row["exec_per_row_pointer"]
    return f"{t:,.1f} → {p:,.1f} ({row['exec_ratio']:.2f}) @{row['exec_rows']}"


def render_static(rows: Sequence[Cells], labels: dict[str, str] | None = None,
                   out: Console | None = None) -> None:
    """The static table; `labels` names a backend pair's sides (else Tensor ABI → Pointer ABI)."""
    display = []
    for r in map(plain, rows):
        d = {k: r.get(k, "") for k in ("arch", "op", "dtype", "N", "kernel")}
        for key, ratio in (("kernarg", True), ("args", True), ("slots", True), ("vgpr", False), ("sgpr", False),
                           ("spills", False), ("lds", False), ("scratch", False), ("instr", True)):
            d[key] = _pair_cell(key, ratio)(r)
        d["executed"] = _executed_cell(r)
        d["status"] = styled_status(escape(r["status"] if r["status"] not in ("error", "not run")
                                           else f"{r['status']}: {r.get('detail', '')}"))
        display.append(d)
    executed = [Column("executed", "executed wave-instrs/row T→P (P/T) @M", justify="right")] \
        if any(d["executed"] for d in display) else []
    columns = [Column("arch", "arch", justify="left"), Column("op", "op", justify="left"),
               Column("dtype", "dtype", justify="left"), Column("N", "N"), Column("kernel", "kernel", justify="left"),
               Column("kernarg", "kernarg B T→P (P/T)"), Column("args", "kernel args"), Column("slots", "launcher slots"),
               Column("vgpr", "VGPR"), Column("sgpr", "SGPR"), Column("spills", "spills"), Column("lds", "LDS B"),
               Column("scratch", "scratch B"), Column("instr", "ISA instrs"), *executed,
               Column("status", "status", justify="left", markup=True)]
    title = "abi-compare static: " + (f"{labels['tensor']} → {labels['pointer']} (T = {labels['tensor']}, "
                                      f"P = {labels['pointer']}; compile-only" if labels else
                                      "Tensor ABI → Pointer ABI (compile-only")
    title += "; executed on the emulated device, M rows)" if executed else ")"
    render_table(out or console, title, columns, display)
