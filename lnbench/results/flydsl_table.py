"""lnbench results in the two text formats of FlyDSL's CI: the benchmark table (a header `op shape dtype TB/s
TFLOPS`, one row per case) that FlyDSL's dashboard parser and its CSV converter read, and the `=== Benchmark: current
vs LABEL ===` block its comparison prints (one line per case: base and current TB/s, ratio, delta and its %).

Names (docs/reference.md, "FlyDSL's CI formats"): the `flydsl` backend's rows under FlyDSL's op names (`layernorm`,
`layernorm_bwd`, ...), every other backend's under the same name with `@BACKEND` appended (no white space: FlyDSL's
parser splits on it), a mode other than `hot` (FlyDSL times with a warm cache) as a `_MODE` suffix of the op;
dtypes as FlyDSL's norm rows write them (f32, f16, bf16). Every case is a row; one that was not measured (not run,
an error, a modelled profile of `perf --device emu`) shows `-`, and lnbench's own outputs keep why. Values are
fixed-point with at least 4 significant digits (never an exponent: FlyDSL's parser reads digits and a point only),
so a 1 % change shows at every shape. TB/s rest on lnbench's byte model (docs/reference.md says how it differs
from FlyDSL's own count). One formatter for `lnbench perf --flydsl-table`, `lnbench flydsl-table FILE` and
`lnbench compare --flydsl-table`."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd

from lnbench.errors import LnbenchUsageError
from lnbench.results.records import missing
from lnbench.results.verdicts import Verdict

#: lnbench op -> FlyDSL's benchmark op name
OPS = {"fwd": "layernorm", "fwd-nostats": "layernorm_nostats", "bwd": "layernorm_bwd", "fwd+bwd": "layernorm_fwd_bwd"}
#: lnbench dtype -> the name FlyDSL's norm benchmark rows give it
DTYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16"}
#: the backend whose rows carry FlyDSL's op names as they are; FlyDSL's mode (warm cache)
FLYDSL_BACKEND, FLYDSL_MODE = "flydsl", "hot"
#: a metric that was not measured, as FlyDSL's own table writes it
NOT_MEASURED = "-"
#: significant digits a value keeps (a 1 % change moves the third); decimals never fewer than FlyDSL's 3
SIGNIFICANT, MIN_DECIMALS = 4, 3
#: the label of the baseline in the compare block's header and lines (FlyDSL's parser: a word, `.`, `~`, `-`)
LABEL_PATTERN = re.compile(r"^\w[\w.~\-]*$")
HEADER = ("op", "shape", "dtype", "TB/s", "TFLOPS")
CaseKey = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class TableRow:
    """One case as FlyDSL's table shows it; `tbps` None when it was not measured, `why` then says why."""

    case: CaseKey                  # lnbench's (backend, op, dtype, shape, mode)
    op: str
    shape: str
    dtype: str
    tbps: float | None
    why: str = ""


def op_name(op: str, backend: str, mode: str) -> str:
    """FlyDSL's op name of an lnbench case: `layernorm_bwd`, `layernorm_cold`, `layernorm@torch`, ..."""
    name = OPS.get(op, re.sub(r"\W", "_", op))
    if mode != FLYDSL_MODE:
        name += f"_{mode}"
    return name if backend == FLYDSL_BACKEND else name + "@" + re.sub(r"\s+", "_", backend)


def dtype_name(dtype: str) -> str:
    return DTYPES.get(dtype, dtype)


def number(value: float, signed: bool = False) -> str:
    """`value` in fixed point with SIGNIFICANT significant digits and at least MIN_DECIMALS decimals."""
    magnitude = abs(value)
    decimals = MIN_DECIMALS if magnitude == 0 or not math.isfinite(magnitude) else \
        max(MIN_DECIMALS, SIGNIFICANT - 1 - math.floor(math.log10(magnitude)))
    return f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"


def _measured(row: dict[str, Any]) -> float | None:
    gbps = row.get("gbps")
    if gbps is None or missing(gbps) or not str(row.get("status") or "").startswith(("ok", "partial")):
        return None
    value = float(gbps)
    return value / 1000 if math.isfinite(value) and value > 0 else None


def _why(row: dict[str, Any]) -> str:
    parts = [str(row.get(k)) for k in ("status", "detail") if not missing(row.get(k)) and str(row.get(k))]
    return ": ".join(parts) or "no value"


def _case(row: dict[str, Any]) -> CaseKey:
    return (str(row["backend"]), str(row["op"]), str(row["dtype"]), str(row["shape"]), str(row["mode"]))


def _table_row(case: CaseKey, tbps: float | None, why: str) -> TableRow:
    backend, op, dtype, shape, mode = case
    return TableRow(case, op_name(op, backend, mode), shape, dtype_name(dtype), tbps, "" if tbps is not None else why)


def perf_rows(rows: pd.DataFrame) -> list[TableRow]:
    """A perf result's aggregate rows: every case, TB/s at the headline time."""
    agg = rows[rows["row_kind"] == "aggregate"]
    return [_table_row(_case(r), _measured(r), _why(r)) for r in agg.to_dict("records")]


def profile_rows(rows: pd.DataFrame) -> list[TableRow]:
    """A `perf --device emu` profile's cases (one per backend, op, dtype, shape and mode), none measured."""
    cases = dict.fromkeys(_case(r) for r in rows.to_dict("records"))
    return [_table_row(case, None, "modelled on the emulated device, not timed (perf --device emu)")
            for case in cases]


def choose(table: list[TableRow], backend: str | None, source: str) -> list[TableRow]:
    """The rows of `backend` (None: all); a usage error naming `source` when it has none."""
    if backend is None:
        return table
    mine = [r for r in table if r.case[0] == backend]
    if not mine:
        have = ", ".join(dict.fromkeys(r.case[0] for r in table)) or "none"
        raise LnbenchUsageError(f"{source} has no perf rows of backend {backend!r} (it has {have})")
    return mine


def _line(cells: Iterable[str]) -> str:
    op, shape, dtype, tbps, tflops = cells
    return f"{op:<22} {shape:<34} {dtype:<10} {tbps:>10} {tflops:>10}".rstrip() + "\n"


def render(table: list[TableRow]) -> str:
    """The table as FlyDSL's benchmark script prints it (a blank line, the header, a rule, the rows)."""
    out = ["\n", _line(HEADER), _line(("-" * 22, "-" * 34, "-" * 10, "-" * 10, "-" * 10))]
    out += [_line((r.op, r.shape, r.dtype, NOT_MEASURED if r.tbps is None else number(r.tbps), NOT_MEASURED))
            for r in table]
    return "".join(out)


def result_rows(kind: str, rows: pd.DataFrame) -> list[TableRow]:
    """The table rows of a perf or profile result's `rows` (`kind`: its kind's name)."""
    from lnbench.results import PROFILE_KIND

    return profile_rows(rows) if kind == PROFILE_KIND else perf_rows(rows)


def table_text(rows: pd.DataFrame, backend: str | None = None, source: str = "the run", kind: str = "perf") -> str:
    """The table of a perf (or profile) result's `rows`: every backend's cases, or `backend`'s."""
    return render(choose(result_rows(kind, rows), backend, source))


def not_measured_note(table: list[TableRow]) -> str:
    """One line: how many cases show `-` and why, by reason ("" when every case was measured)."""
    reasons: dict[str, int] = {}
    for row in table:
        if row.tbps is None:
            reasons[row.why] = reasons.get(row.why, 0) + 1
    if not reasons:
        return ""
    parts = "; ".join(f"{count} × {why}" for why, count in reasons.items())
    return f"FlyDSL table: {sum(reasons.values())} case(s) not measured, shown as '{NOT_MEASURED}' ({parts})"


def check_label(label: str) -> str:
    """The compare block's baseline label, as FlyDSL's parser reads it (a usage error otherwise)."""
    if not LABEL_PATTERN.match(label):
        raise LnbenchUsageError(f"--flydsl-label {label!r}: FlyDSL's parser reads a word of letters, digits, _ . ~ "
                                f"- (e.g. main, main~1, v0.2.0)")
    return label


def _key_cells(row: TableRow) -> str:
    return f"{row.op:>18} {row.shape:>34} {row.dtype:>8}"


def _compare_line(row: TableRow, base_tbps: float, ratio_time: float, label: str) -> str:
    """One compared case: TB/s ratio = base time / new time (lnbench's ratio is new / base), its delta and %."""
    ratio = 1.0 / ratio_time
    current = base_tbps * ratio
    return (f"  {_key_cells(row)}  {label}={number(base_tbps):>9} TB/s    current={number(current):>9} TB/s    "
            f"ratio={ratio:6.3f}x  delta={number(current - base_tbps, signed=True):>9} ({(ratio - 1) * 100:+6.1f}%)\n")


def compare_block(compare_rows: Iterable[Any], base: list[TableRow], label: str = "main") -> str:
    """The `=== Benchmark: current vs LABEL ===` block of `compare_rows` (lnbench compare's CompareRow records; their
    ratio new/base of the headline times, paired), with the base's TB/s from the base result's table rows `base`. A case the base
    measured and the new run did not shows `current=missing [SKIP]`; a case only one side has is counted below."""
    base_by_case = {r.case: r for r in base}
    lines = [f"=== Benchmark: current vs {check_label(label)} ===\n"]
    compared = only_new = 0
    for c in compare_rows:
        case: CaseKey = (str(c.backend), str(c.op), str(c.dtype), str(c.shape), str(c.mode))
        row = base_by_case.get(case)
        if row is None:
            only_new += 1
            continue
        if row.tbps is None:
            continue
        ratio = c.ratio
        if missing(ratio) or not math.isfinite(float(ratio)) or float(ratio) <= 0:
            gone = " row" if str(c.verdict) == Verdict.ONLY_BASE else ""
            lines.append(f"  {_key_cells(row)}  current=missing{gone}  [SKIP]\n")
            continue
        compared += 1
        lines.append(_compare_line(row, row.tbps, float(ratio), label))
    lines.append(f"\nlnbench compare: {compared} case(s) with a paired ratio"
                 + (f", {only_new} only in the new run" if only_new else "") + "\n")
    return "".join(lines)
