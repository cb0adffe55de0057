"""A result's rows as store points: each row that is a case's headline becomes one point of its series.

    kind         rows kept                 series (backend, op, dtype, shape, mode, case)          value / value2
    verify       every check               backend, op of the tensor, dtype, shape, tensor, case   max_abs_err / allowed
    selftest     every check               planted bug, ..., tensor, case                          max_abs_err / allowed
    perf         aggregate rows            backend, op, dtype, shape, mode                         median_us / kernel_us
    abi-compare  runtime rows              pair, op, dtype, shape, metric                          speedup / ci_low
                 static rows               pair, kernel, arch                                      instr_ratio / kernarg_ratio
    inspect      every kernel or launch    backend, op, dtype, N or shape, part, abi/arch          instructions / registers
    compare      every case                backend, op, dtype, shape, mode (modelled: launch/target)  ratio / change_pct
    profile      every launch × target     backend, op, dtype, shape, mode, launch/target/arch     bound_us / exec instr

A point's status is the row's status (a compare row's verdict); perf points also keep the worker medians.

Modelled floors (`perf --device emu`, the profile kind, and a compare of two of them) are labelled so everywhere:
their unit is MODELLED_UNIT / `modelled ratio`, and their series (kind profile, or a compare case named by its
launch and target) are never those of measured times. A profile point's detail names what bounds the launch and
the code object that ran.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pandas as pd

from lnbench.results import missing

#: the op a verify tensor belongs to
_OP_OF_TENSOR = {"y": "fwd", "mean": "fwd", "rstd": "fwd", "dx": "bwd", "dweight": "bwd", "dbias": "bwd"}
#: the unit of a modelled floor (history gates it like a time, never in one series with measured times)
MODELLED_UNIT = "modelled us"


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
    return "" if missing(value) else str(value)


def _f(row: dict[str, Any], key: str) -> float | None:
    value: Any = row.get(key)              # float(None): a TypeError, caught
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out else None


def _digits(value: float | None) -> float | None:
    """A modelled value to 12 significant digits: the same floor whether recorded as the run writes it or from its
    JSON (15 digits) or CSV (17), so a deterministic series does not move by a rounding."""
    return None if value is None else float(f"{value:.12g}")


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


def _modelled(row: dict[str, Any]) -> bool:
    return _s(row, "modelled").lower() in ("true", "1")


def _compare(row: dict[str, Any]) -> Point:
    modelled = _modelled(row)
    case = "/".join(filter(None, (_s(row, "launch"), _s(row, "target"), "modelled"))) if modelled else ""
    return Point((_s(row, "backend"), _s(row, "op"), _s(row, "dtype"), _s(row, "shape"), _s(row, "mode"), case),
                 "modelled ratio" if modelled else "ratio", _f(row, "ratio"), _f(row, "change_pct"), None,
                 _s(row, "verdict"), _s(row, "detail"))


def _profile(row: dict[str, Any]) -> Point:
    where = "/".join(filter(None, (_s(row, "launch"), _s(row, "target"), _s(row, "arch"))))
    detail = "; ".join(filter(None, (f"bound by {_s(row, 'bound_by')}" if _s(row, "bound_by") else "",
                                     f"code {_s(row, 'code_object')}" if _s(row, "code_object") else "",
                                     _s(row, "detail"))))
    return Point((_s(row, "backend"), _s(row, "op"), _s(row, "dtype"), _s(row, "shape"), _s(row, "mode"), where),
                 MODELLED_UNIT, _digits(_f(row, "bound_us")), _f(row, "exec_instructions"), None, _s(row, "status"),
                 detail)


_EXTRACT: dict[str, Callable[[dict[str, Any]], Point | None]] = {
    "verify": lambda row: _verify(row, "backend"), "selftest": lambda row: _verify(row, "planted_bug"),
    "perf": _perf, "abi-compare": _abi, "inspect": _inspect, "compare": _compare, "profile": _profile,
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
