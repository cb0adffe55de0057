"""What `lnbench abi-compare` prints without --details: one short table per part, a row per op and measurement
(runtime) or per arch, op and kernel (static), each over every dtype and shape, so it fits an 80-column
terminal; the full tables (lnbench.abi.tables) with --details, and every row in the CSV/JSON."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from rich.console import Console
from rich.markup import escape

from lnbench.abi.tables import render_runtime, render_static
from lnbench.output.tables import Column, render_table, styled_status
from lnbench.results.rows import AbiRow

#: the line under the summary tables saying where the rest is
MORE = "every row: --details (or the CSV/JSON)"


def _span(values: Iterable[float | None], digits: int = 2, suffix: str = "") -> str:
    """`1.70–1.85×` over the values (`1.70×` when they agree to the digits shown), '' for none."""
    got = sorted(v for v in values if v is not None)
    if not got:
        return ""
    low, high = f"{got[0]:.{digits}f}", f"{got[-1]:.{digits}f}"
    return f"{low}{suffix}" if low == high else f"{low}–{high}{suffix}"


def _counts(words: Iterable[str]) -> str:
    """`2 faster, 1 same`, most common first."""
    return ", ".join(f"{n} {escape(word)}" for word, n in Counter(words).most_common())


def _grouped(rows: Iterable[AbiRow], keys: tuple[str, ...]) -> dict[tuple, list[AbiRow]]:
    groups: dict[tuple, list[AbiRow]] = {}
    for row in rows:
        groups.setdefault(tuple(row.value(k) for k in keys), []).append(row)
    return groups


def runtime_summary(rows: Sequence[AbiRow]) -> tuple[list[dict[str, Any]], list[str]]:
    """(a summary row per op × measurement with a measured row, a line per measurement not run anywhere)."""
    out, lines = [], []
    for (metric,), group in _grouped(rows, ("metric",)).items():
        if all(r.status != "ok" for r in group) and len({r.status for r in group}) == 1:
            lines.append(f"{metric}: {group[0].status} ({len(group)} rows)")
    quiet = {line.split(":")[0] for line in lines}
    for (op, metric), group in _grouped(rows, ("op", "metric")).items():
        if metric in quiet:
            continue
        ok = [r for r in group if r.status == "ok"]
        out.append({"op": op, "metric": metric, "rows": str(len(group)),
                    "speedup": _span((r.speedup for r in ok), suffix="×"),
                    "outcome": _counts(str(r.verdict if r.status == "ok" else r.status)
                                       for r in group)})
    return out, lines


def static_summary(rows: Sequence[AbiRow]) -> list[dict[str, Any]]:
    """A summary row per arch × op × kernel: Pointer/Tensor ratios of kernarg bytes, ISA and executed
    instructions (ranges over dtypes and widths), and the rows' statuses."""
    out = []
    for (arch, op, kernel), group in _grouped(rows, ("arch", "op", "kernel")).items():
        ok = [r for r in group if r.status == "ok"]
        executed = [r for r in ok if r.exec_status == "ok"]
        out.append({"arch": arch, "op": op, "kernel": kernel or "", "rows": str(len(group)),
                    "kernarg": _span(r.kernarg_ratio for r in ok),
                    "instr": _span(r.instr_ratio for r in ok),
                    "executed": _span(r.exec_ratio for r in executed),
                    "status": _counts(str(r.status) for r in group)})
    return out


def print_runtime(rows: Sequence[AbiRow], title: str, details: bool, out: Console) -> None:
    """The runtime part: the full table with `details`, else its summary."""
    if details:
        render_runtime(rows, title, out)
        return
    summary, lines = runtime_summary(rows)
    if summary:
        render_table(out, title, [Column("op", "op", justify="left"),
                                  Column("metric", "measurement", justify="left"), Column("rows", "rows"),
                                  Column("speedup", "speed-up P vs T"),
                                  Column("outcome", "verdicts", justify="left", markup=True)], summary)
    else:
        out.print(escape(title), soft_wrap=True)
    for line in lines:
        out.print(escape(line), soft_wrap=True, highlight=False)


def print_static(rows: Sequence[AbiRow], labels: dict[str, str] | None, details: bool,
                 out: Console) -> None:
    """The static part: the full table with `details`, else its summary."""
    if details:
        render_static(rows, labels, out)
        return
    sides = f"{labels['tensor']} → {labels['pointer']}" if labels else "Tensor ABI → Pointer ABI"
    summary = static_summary(rows)
    executed = [Column("executed", "executed")] if any(r["executed"] for r in summary) else []
    render_table(out, f"abi-compare static: {sides}, P/T ratios over dtypes and widths (instructions: "
                      f"in the ISA, executed per row)",
                 [Column("arch", "arch", justify="left"), Column("kernel", "kernel", justify="left"),
                  Column("kernarg", "kernarg B"), Column("instr", "ISA"), *executed,
                  Column("status", "status", justify="left", markup=True)], summary)
