"""From worker results to rows: one per case × worker, plus one aggregate row per case.

Worker row: that worker's median over its R runs (median_us), min/max over its runs, raw run values
(run_us, JSON list). Aggregate row (worker = "all"): the median of the worker medians (the headline),
min/max across worker medians, GB/s from the byte model at the headline median, % of the measured copy
peak (above_peak flags > 100 %: a cache effect, not a result), and speed-up = baseline median / median for
the same op, dtype, shape and mode.
"""
from __future__ import annotations

import json
import math
import statistics
from typing import Any

from lnbench.perf.bytes_model import gbps
from lnbench.perf.cases import PerfCase
from lnbench.perf.workers import WorkerResult

MIB = 1 << 20


def _blank() -> dict[str, Any]:
    return {"iters": None, "runs": None, "run_us": "[]", "median_us": math.nan, "min_us": math.nan,
            "max_us": math.nan, "spread_pct": math.nan, "gbps": math.nan, "pct_peak": math.nan,
            "above_peak": False, "speedup": math.nan, "nbytes": None, "sets": None, "working_set_mib": math.nan,
            "llc_mib": math.nan, "timer": "", "warmup_calls": None, "warmup_s": math.nan, "note": ""}


def worker_row(case: PerfCase, worker: int, order: int | None, entry: dict[str, Any] | None,
               problem: str, peak_gbps: float | None) -> dict[str, Any]:
    """The row of one case in one worker (status error with the worker's problem when it has no entry)."""
    row = {**case.columns(), "row_kind": "worker", "worker": worker, "order": order, **_blank()}
    if entry is None:
        return {**row, "status": "error", "detail": problem or "worker returned no result for this case"}
    row.update(status=entry.get("status", "error"), detail=entry.get("detail", ""))
    meas = entry.get("measurement")
    if row["status"] != "ok" or not meas:
        return row
    runs = [float(v) for v in meas["run_us"]]
    median = float(statistics.median(runs))
    rate = gbps(entry["nbytes"], median)
    row.update(iters=meas["iters_per_run"], runs=len(runs), run_us=json.dumps([round(v, 4) for v in runs]),
               median_us=median, min_us=min(runs), max_us=max(runs),
               spread_pct=(max(runs) - min(runs)) / median * 100 if median > 0 else math.nan,
               gbps=rate, nbytes=entry["nbytes"], sets=entry.get("sets"),
               working_set_mib=entry.get("working_set_bytes", 0) / MIB, llc_mib=entry.get("llc_bytes", 0) / MIB,
               timer=meas.get("timer", ""), warmup_calls=meas.get("warmup_calls"),
               warmup_s=meas.get("warmup_s", math.nan), note=entry.get("note", ""))
    short = (meas.get("extra") or {}).get("spin_short", 0)
    if short:  # "held" runs whose spin ran out before the host finished queueing: host gaps may be inside
        row["note"] = "; ".join(filter(None, [row["note"], f"{short} of {len(runs)} runs outlasted the stream hold"]))
    if peak_gbps:
        row["pct_peak"] = rate / peak_gbps * 100
        row["above_peak"] = bool(row["pct_peak"] > 100)
    return row


def aggregate_row(case: PerfCase, rows: list[dict[str, Any]], processes: int, peak_gbps: float | None
                  ) -> dict[str, Any]:
    """Median of the worker medians, min–max across workers, GB/s and % peak at the headline median."""
    row = {**case.columns(), "row_kind": "aggregate", "worker": "all", "order": None, **_blank()}
    if case.skip:
        return {**row, "status": "not run", "detail": case.skip}
    good = [r for r in rows if r["status"] == "ok"]
    if not good:
        statuses = {r["status"] for r in rows}
        status = "not run" if statuses == {"not run"} else "error"
        detail = next((r["detail"] for r in rows if r["detail"]), "no worker produced a result")
        return {**row, "status": status, "detail": detail}
    medians = [r["median_us"] for r in good]
    median = float(statistics.median(medians))
    first = good[0]
    rate = gbps(first["nbytes"], median)
    iters = [r["iters"] for r in good]
    row.update(iters=int(statistics.median(iters)), runs=first["runs"],
               run_us=json.dumps([round(v, 4) for v in medians]), median_us=median,
               min_us=min(medians), max_us=max(medians),
               spread_pct=(max(medians) - min(medians)) / median * 100 if median > 0 else math.nan,
               gbps=rate, nbytes=first["nbytes"], sets=first["sets"], working_set_mib=first["working_set_mib"],
               llc_mib=first["llc_mib"], timer=first["timer"], warmup_calls=first["warmup_calls"],
               warmup_s=first["warmup_s"], note=first["note"],
               iters_range=f"{min(iters)}-{max(iters)}")
    if peak_gbps:
        row["pct_peak"] = rate / peak_gbps * 100
        row["above_peak"] = bool(row["pct_peak"] > 100)
    if len(good) == processes:
        row.update(status="ok", detail="")
    else:
        bad = next((r["detail"] for r in rows if r["status"] != "ok" and r["detail"]), "")
        row.update(status=f"partial ({len(good)}/{processes} workers)", detail=bad)
    return row


def add_speedups(rows: list[dict[str, Any]], baseline: str) -> None:
    """speedup = baseline's headline median / this row's, per (op, dtype, shape, mode); aggregate rows only."""
    key = lambda r: (r["op"], r["dtype"], r["shape"], r["mode"])  # noqa: E731
    base = {key(r): r["median_us"] for r in rows
            if r["row_kind"] == "aggregate" and r["backend"] == baseline and math.isfinite(r["median_us"])}
    for r in rows:
        if r["row_kind"] == "aggregate" and key(r) in base and math.isfinite(r["median_us"]) and r["median_us"] > 0:
            r["speedup"] = base[key(r)] / r["median_us"]


def build_rows(cases: list[PerfCase], orders: list[list[PerfCase]], results: list[WorkerResult],
               peak_gbps: float | None, baseline: str) -> list[dict[str, Any]]:
    """All rows: for each case, its worker rows (in worker order) then its aggregate row."""
    entries: list[dict[int, dict[str, Any]]] = []
    for result in results:
        cases_done = (result.payload or {}).get("cases", [])
        entries.append({int(e["id"]): e for e in cases_done if isinstance(e, dict) and "id" in e})
    positions = [{c.id: i for i, c in enumerate(order)} for order in orders]
    rows: list[dict[str, Any]] = []
    for case in cases:
        case_rows = []
        if not case.skip:
            for w, result in enumerate(results):
                entry = entries[w].get(case.id)
                problem = result.problem() if entry is None else ""
                case_rows.append(worker_row(case, w, positions[w].get(case.id), entry, problem, peak_gbps))
        rows.extend(case_rows)
        rows.append(aggregate_row(case, case_rows, len(results), peak_gbps))
    add_speedups(rows, baseline)
    return rows


def failed(rows: list[dict[str, Any]], results: list[WorkerResult]) -> bool:
    """Exit 1 when any worker failed or any case row is neither ok nor `not run`."""
    if any(not r.ok for r in results):
        return True
    return any(row["status"] not in ("ok", "not run") for row in rows)
