"""A result's rows as store points: each row that is a case's headline becomes one point of its series.

    kind         rows kept                 series (backend, op, dtype, shape, mode, case)          value / value2
    verify       every check               backend, op of the tensor, dtype, shape, tensor, case   max_abs_err / allowed
    selftest     every check               planted bug, ..., tensor, case                          max_abs_err / allowed
    perf         aggregate rows            backend, op, dtype, shape, mode                         median_us / kernel_us
    abi-compare  runtime rows              pair, op, dtype, shape, metric                          speedup / ci_low
                 static rows               pair, kernel, arch                                      instr_ratio / kernarg_ratio
    inspect      every kernel or launch    backend, op, dtype, N or shape, part, abi/arch          instructions / registers
    compare      every case                backend, op, dtype, shape, mode                         ratio / change_pct

A point's status is the row's status (a compare row's verdict); perf points also keep the worker medians.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pandas as pd

#: the op a verify tensor belongs to
_OP_OF_TENSOR = {"y": "fwd", "mean": "fwd", "rstd": "fwd", "dx": "bwd", "dweight": "bwd", "dbias": "bwd"}


@dataclass(frozen=True)
class Point:
    case: tuple[str, str, str, str, str, str]     # backend, op, dtype, shape, mode, case_name
    unit: str
    value: float | None
    value2: float | None
    values: str | None
    status: str
    detail: str


def _s(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    return "" if value is None or (isinstance(value, float) and value != value) or value is pd.NA else str(value)


def _f(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out else None


def _values(value: Any) -> str | None:
    if isinstance(value, str):
        value = value.split(";") if value else []
    if value is None or isinstance(value, float):
        return None
    try:
        return json.dumps([float(v) for v in value])
    except (TypeError, ValueError):
        return None


def _verify(row: dict[str, Any], backend_key: str) -> Point:
    tensor = _s(row, "tensor")
    return Point((_s(row, backend_key), _OP_OF_TENSOR.get(tensor, ""), _s(row, "dtype"), _s(row, "shape"), tensor,
                  _s(row, "case")), "abs err", _f(row, "max_abs_err"), _f(row, "allowed"), None, _s(row, "status"),
                 _s(row, "detail"))


def _perf(row: dict[str, Any]) -> Point | None:
    if _s(row, "row_kind") != "aggregate":
        return None
    return Point((_s(row, "backend"), _s(row, "op"), _s(row, "dtype"), _s(row, "shape"), _s(row, "mode"), ""),
                 "us", _f(row, "median_us"), _f(row, "kernel_us"), _values(row.get("run_us")), _s(row, "status"),
                 _s(row, "detail"))


def _abi(row: dict[str, Any]) -> Point | None:
    if _s(row, "part") == "runtime":
        return Point((_s(row, "pair"), _s(row, "op"), _s(row, "dtype"), _s(row, "shape"), _s(row, "metric"),
                      "runtime"), "speedup", _f(row, "speedup"), _f(row, "ci_low"), None,
                     _s(row, "verdict") or _s(row, "status"), _s(row, "detail"))
    if _s(row, "part") == "static":
        return Point((_s(row, "pair"), _s(row, "kernel"), "", "", _s(row, "arch"), "static"), "instr ratio",
                     _f(row, "instr_ratio"), _f(row, "kernarg_ratio"), None, _s(row, "status"), _s(row, "detail"))
    return None


def _inspect(row: dict[str, Any]) -> Point:
    executed = _s(row, "part") == "executed"
    size = _s(row, "shape") if executed else _s(row, "n")
    where = "/".join(filter(None, (_s(row, "abi"), _s(row, "arch"), _s(row, "dgamma_strategy"))))
    value = _f(row, "exec_instructions") if executed else _f(row, "instruction_count")
    value2 = _f(row, "global_bytes_loaded") if executed else _f(row, "vgpr")
    return Point((_s(row, "backend"), _s(row, "op"), _s(row, "dtype"), size, _s(row, "part"), where),
                 "instructions", value, value2, None, _s(row, "status"), _s(row, "detail"))


def _compare(row: dict[str, Any]) -> Point:
    return Point((_s(row, "backend"), _s(row, "op"), _s(row, "dtype"), _s(row, "shape"), _s(row, "mode"), ""),
                 "ratio", _f(row, "ratio"), _f(row, "change_pct"), None, _s(row, "verdict"), _s(row, "detail"))


_EXTRACT: dict[str, Callable[[dict[str, Any]], Point | None]] = {
    "verify": lambda row: _verify(row, "backend"), "selftest": lambda row: _verify(row, "planted_bug"),
    "perf": _perf, "abi-compare": _abi, "inspect": _inspect, "compare": _compare,
}


#: the kinds a store records (a history is read from the store, not recorded into it)
RECORDED: tuple[str, ...] = tuple(_EXTRACT)


def points_of(kind: str, rows: pd.DataFrame) -> Iterator[Point]:
    """The points of a result's rows (module docstring); a case seen twice (a merged file's duplicate) keeps
    its first row."""
    extract = _EXTRACT[kind]
    seen: set[tuple[str, ...]] = set()
    for row in rows.to_dict("records"):
        point = extract(row)
        if point is not None and point.case not in seen:
            seen.add(point.case)
            yield point
