"""Timed cases of a perf or abi-compare result, keyed by (backend, op, dtype, shape, mode).

perf: one case per aggregate row; its per-run values come from the worker rows (`run_us`, per worker).
abi-compare: each runtime row holds two timed sides, so it gives two cases, backend `<pair>:tensor` and
`<pair>:pointer`, with the measurement (direct / wrapper / device) as the mode; per-run values come from the
worker payloads in the JSON.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lnbench.results import (ABI_KIND as ABI, PERF_KIND as PERF, PerfRun, ResultFile, missing, numbers_of,
                             require_columns)
from lnbench.errors import LnbenchUsageError

KEY_FIELDS: tuple[str, ...] = ("backend", "op", "dtype", "shape", "mode")
CaseKey = tuple[str, str, str, str, str]
OK = "ok"


@dataclass(frozen=True)
class TimedCase:
    """One case of one file. `status` is "ok" when it was timed, else why not (not run, error, ...)."""

    key: CaseKey
    status: str
    headline_us: float = math.nan
    #: worker index -> that worker's per-run µs values
    runs: dict[int, list[float]] = field(default_factory=dict)

    @property
    def timed(self) -> bool:
        return self.status == OK


def _untimed(key: CaseKey, status: str, row: dict[str, Any]) -> TimedCase:
    """A case without run values: its status, with the row's detail when it has one."""
    detail = _text(row.get("detail"))
    return TimedCase(key, f"{status}: {detail}" if detail else status or "no result")


def key_text(key: CaseKey) -> str:
    return " ".join(key)


def _run_values(value: Any, result: ResultFile, where: str) -> list[float]:
    """A run-value list (a list, `;`-joined text in a CSV, or JSON text in older files) → positive finite floats."""
    try:
        runs = numbers_of(value)
    except (TypeError, ValueError):
        raise LnbenchUsageError(f"{result.path}: malformed run values for {where}") from None
    if not runs or not all(math.isfinite(v) and v > 0 for v in runs):
        raise LnbenchUsageError(f"{result.path}: run values for {where} must be positive numbers")
    return runs


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _text(value: Any) -> str:
    return "" if missing(value) else str(value)


def _add(cases: dict[CaseKey, TimedCase], case: TimedCase, result: ResultFile) -> None:
    if case.key in cases:
        raise LnbenchUsageError(f"{result.path}: case {key_text(case.key)} appears twice")
    cases[case.key] = case


def headline(result: ResultFile) -> str:
    """The time a perf result's rates rest on, which compare compares: `kernel` (perf --timer kernel: the
    profiler's kernel time) or `stream`."""
    value = result.run_as(PerfRun).headline or None
    if value is None and "headline" in result.rows.columns:
        value = next(iter(result.rows["headline"].dropna()), None)
    return "kernel" if value == "kernel" else "stream"


def perf_cases(result: ResultFile) -> dict[CaseKey, TimedCase]:
    """Cases of a perf result: headline = the aggregate row's median, runs = the ok worker rows' run values (of
    the kernel time under perf --timer kernel)."""
    kernel = headline(result) == "kernel"
    runs_column, median_column = ("kernel_run_us", "kernel_us") if kernel else ("run_us", "median_us")
    require_columns(result, [*KEY_FIELDS, "row_kind", "worker", runs_column, median_column, "status",
                             *(["kernel_status"] if kernel else [])])
    frame = result.rows
    frame = frame.assign(case_key_=list(zip(*(frame[c].astype(str) for c in KEY_FIELDS))))
    workers = frame[(frame.row_kind == "worker") & (frame.status == OK)]
    if kernel:
        workers = workers[workers.kernel_status == OK]
    runs: dict[CaseKey, dict[int, list[float]]] = {}
    for row in workers.to_dict("records"):
        label = key_text(row["case_key_"])
        try:
            index = int(row["worker"])
        except (TypeError, ValueError):
            raise LnbenchUsageError(f"{result.path}: malformed worker index for {label}") from None
        runs.setdefault(row["case_key_"], {})[index] = _run_values(row[runs_column], result, f"{label} worker {index}")
    cases: dict[CaseKey, TimedCase] = {}
    for row in frame[frame.row_kind == "aggregate"].to_dict("records"):
        key = row["case_key_"]
        status = _text(row.get("status"))
        median = _number(row.get(median_column))
        timed = (status == OK or status.startswith("partial")) and key in runs \
            and math.isfinite(median) and median > 0
        if timed:
            _add(cases, TimedCase(key, OK, float(median), runs[key]), result)
        elif status == OK or status.startswith("partial"):      # a row that says timed but holds no time
            why = f"no positive {median_column}" if key in runs else "no ok worker row with run values"
            _add(cases, TimedCase(key, f"{status} but {why}"), result)
        else:
            _add(cases, _untimed(key, status, row), result)
    if not cases:
        raise LnbenchUsageError(f"{result.path} has no aggregate rows: not a complete perf result")
    return cases


def abi_cases(result: ResultFile) -> dict[CaseKey, TimedCase]:
    """Cases of an abi-compare result's runtime rows (two per row: the Tensor and the Pointer side)."""
    frame = result.rows
    if "part" not in frame.columns or not (frame.part == "runtime").any():
        raise LnbenchUsageError(f"{result.path} has no runtime rows (a --static-only run): nothing timed to compare")
    require_columns(result, ["pair", "op", "dtype", "shape", "metric", "status"])
    payloads = result.extra.get("workers")
    if not isinstance(payloads, list):
        raise LnbenchUsageError(f"{result.path} lacks the worker payloads (the JSON's `workers`) that hold run values")
    cases: dict[CaseKey, TimedCase] = {}
    for row in frame[frame.part == "runtime"].to_dict("records"):
        pair, op, dtype, shape, metric = (str(row[c]) for c in ("pair", "op", "dtype", "shape", "metric"))
        status = _text(row.get("status"))
        for side in ("tensor", "pointer"):
            key: CaseKey = (f"{pair}:{side}", op, dtype, shape, metric)
            headline = _number(row.get(f"{side}_us"))
            if status != OK or not (math.isfinite(headline) and headline > 0):
                _add(cases, _untimed(key, status, row), result)
                continue
            runs: dict[int, list[float]] = {}
            for position, payload in enumerate(payloads):
                if not isinstance(payload, dict):
                    continue
                entry = (payload.get("cases") or {}).get(f"{op}/{dtype}/{shape}") or {}
                values = ((entry.get("metrics") or {}).get(metric) or {}).get(side)
                if values:
                    try:
                        index = int(payload.get("worker", position))
                    except (TypeError, ValueError):
                        raise LnbenchUsageError(f"{result.path}: malformed worker index for {key_text(key)}") from None
                    runs[index] = _run_values(values, result, f"{key_text(key)} worker {index}")
            if not runs:
                _add(cases, TimedCase(key, "no run values in the worker payloads"), result)
            else:
                _add(cases, TimedCase(key, OK, float(headline), runs), result)
    return cases


def timed_cases(result: ResultFile) -> dict[CaseKey, TimedCase]:
    """Every case of a perf or abi-compare result, in file order."""
    if result.kind == PERF:
        return perf_cases(result)
    if result.kind == ABI:
        return abi_cases(result)
    raise LnbenchUsageError(f"{result.path} is from lnbench {result.kind}; compare needs perf or abi-compare JSON")
