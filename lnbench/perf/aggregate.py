"""From worker results to rows: one per case × worker, plus one aggregate row per case; every group's rows joined
into the run's (run_rows: the aggregate stage of perf's plan → workers → aggregate → outputs).

Worker row: that worker's median over its R runs (median_us), min/max over its runs, raw run values
(run_us, a list: a JSON array, `;`-joined in the CSV). Aggregate row (worker empty): the median of the worker medians (the headline),
min/max across worker medians, GB/s from the byte model at the headline median, % of the measured copy
peak (above_peak flags > 100 %: a cache effect, not a result), and speed-up = baseline median / median for
the same op, dtype, shape and mode.

Kernel time (lnbench.measure.kernel_stats), the same way: worker rows carry that worker's median of its R
profiled runs (kernel_us, kernel_run_us), aggregate rows the median of the worker medians with the min–max
across workers; kernels_per_call, kernel_names (JSON: name -> kind, per call, µs per call),
gap_us = median_us − kernel_us, kernel_status ("ok", "n/a (reason)", "error (reason)"; kernel_us is then
empty, never 0). median_us is always the stream (or wall) time; `headline` says which time GB/s, % peak and
the speed-up use: "stream" (default) or "kernel" (`--timer kernel`).

Host share (`host_fraction`, GPU runs): the share of a run the host spent issuing its calls, from one untimed
run before the timed ones (lnbench.measure.timing.host_fraction); near 1 the host's launch cost sets the time.
Worker rows carry the worker's, aggregate rows the median across workers.

Worker flag (`worker_flag`, on the worker row and, joined, on the aggregate row; informational, not a failure):
with s_w = (max − min) / median of worker w's runs in %, typical = the median s of the *other* workers and
bar = SPREAD_FACTOR × max(typical, SPREAD_FLOOR_PCT) (3 × at least 1 %), worker w is flagged when
    noisy:  s_w > bar (its own runs scatter far more than the others'), or
    off:    with 3+ workers, |median_w − median of worker medians| / that median, in %, > bar
            (it sits further from the others than their own run-to-run noise explains).
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Sequence, TypeVar

from lnbench.backends import name_rows
from lnbench.measure import kernel_stats
from lnbench.perf.bytes_model import gbps
from lnbench.perf.cases import PerfCase
from lnbench.perf.messages import CaseResult, payload_of
from lnbench.perf.protocol import HEADLINES
from lnbench.perf.spread import Group
from lnbench.run.workers import WorkerResult
from lnbench.measure.stats import across_workers, spread_pct, worker_flags
from lnbench.results import PerfRow

MIB = 1 << 20


def _blank(row: PerfRow, headline: str) -> PerfRow:
    """`row` with every measured column set empty (a file's columns do not depend on which cases ran)."""
    row.set(iters=None, runs=None, run_us=[], median_us=math.nan, min_us=math.nan, max_us=math.nan,
            spread_pct=math.nan, gbps=math.nan, pct_peak=math.nan, above_peak=False, speedup=math.nan,
            nbytes=None, sets=None, working_set_mib=math.nan, llc_mib=math.nan, timer="", warmup_calls=None,
            warmup_s=math.nan, note="", kernel_us=math.nan, kernel_min_us=math.nan, kernel_max_us=math.nan,
            kernel_run_us=[], kernels_per_call=math.nan, kernel_names="{}", gap_us=math.nan,
            kernel_window_us=math.nan, kernel_untraced_window_us=math.nan, kernel_status="", kernel_note="",
            headline=headline, worker_flag="", host_fraction=math.nan)
    return row


def headline_us(row: PerfRow) -> float:
    """The time GB/s, % peak and speed-up are computed from: median_us, or kernel_us under --timer kernel (NaN
    when missing: None in rows read back from a file)."""
    value = row.kernel_us if row.headline == "kernel" else row.median_us
    return math.nan if value is None else value


def _rates(row: PerfRow, peak_gbps: float | None) -> None:
    """GB/s and % peak at the row's headline time (NaN where that time is missing)."""
    us = headline_us(row)
    nbytes = row.nbytes
    row.gbps = rate = gbps(nbytes, us) if nbytes and math.isfinite(us) else math.nan
    if peak_gbps and math.isfinite(rate):
        row.pct_peak = pct = rate / peak_gbps * 100
        row.above_peak = bool(pct > 100)


def _median_finite(values: Any) -> float:
    """Median of the finite numbers among `values` (NaN when there are none)."""
    good = [float(v) for v in values or [] if isinstance(v, (int, float)) and math.isfinite(v)]
    return float(statistics.median(good)) if good else math.nan


def _kernel_worker(row: PerfRow, summary: dict[str, Any] | None) -> None:
    """Kernel columns of a worker row from that worker's kernel summary (min–max over its runs)."""
    if summary and summary.get("status") == "ok":
        runs = [float(v) for v in summary["run_us"]]
        summary = dict(summary, min_us=min(runs), max_us=max(runs))
        row.set(kernel_run_us=[round(v, 4) for v in runs], kernel_note=summary.get("note", ""),
                kernel_window_us=_median_finite(summary.get("window_us", [])),
                kernel_untraced_window_us=_median_finite(summary.get("bare_window_us", [])))
    row.set(**kernel_stats.row_columns(summary, row.median_us))


def _kernel_aggregate(row: PerfRow, summaries: list[dict[str, Any] | None],
                      worker_rows: list[PerfRow]) -> None:
    """Kernel columns of an aggregate row: median of worker medians, min–max across workers, gap; the status
    says `partial` when some workers have kernel time and others do not."""
    agg = kernel_stats.aggregate(summaries)
    row.set(**kernel_stats.row_columns(agg, row.median_us))
    if agg["status"] != "ok":
        return
    row.set(kernel_run_us=[round(v, 4) for v in agg["worker_medians"]], kernel_note=agg["note"],
            kernel_window_us=_median_finite([r.kernel_window_us for r in worker_rows]),
            kernel_untraced_window_us=_median_finite([r.kernel_untraced_window_us for r in worker_rows]))
    present = [s for s in summaries if s]
    if agg["workers"] < len(present):
        why = next((s.get("reason") for s in present if s.get("status") != "ok"), "")
        row.kernel_status = f"partial ({agg['workers']}/{len(present)} workers): {why}"


def worker_row(case: PerfCase, worker: int, order: int | None, entry: CaseResult | None, problem: str,
               peak_gbps: float | None, headline: str = "stream", stopped: bool = False) -> PerfRow:
    """The row of one case in one worker (status error with the worker's problem when it has no entry; `not
    run` when an interrupt `stopped` the worker first: a stop is no fault of the case)."""
    row = _blank(case.row(row_kind="worker", worker=worker, order=order), headline)
    if entry is None:
        return row.with_(status="not run" if stopped else "error",
                         detail=problem or "worker returned no result for this case")
    row.set(status=entry.status, detail=entry.detail)
    meas = entry.measurement
    if row.status != "ok" or not meas:
        return row
    runs = [float(v) for v in meas["run_us"]]
    median = float(statistics.median(runs))
    row.set(iters=meas["iters_per_run"], runs=len(runs), run_us=[round(v, 4) for v in runs],
            median_us=median, min_us=min(runs), max_us=max(runs), spread_pct=spread_pct(runs),
            nbytes=entry.nbytes, sets=entry.sets,
            working_set_mib=entry.working_set_bytes / MIB, llc_mib=entry.llc_bytes / MIB,
            timer=meas.get("timer", ""), warmup_calls=meas.get("warmup_calls"),
            warmup_s=meas.get("warmup_s", math.nan), note=entry.note,
            host_fraction=(meas.get("extra") or {}).get("host_fraction", math.nan))
    short = (meas.get("extra") or {}).get("spin_short", 0)
    if short:  # "held" runs whose spin ran out before the host finished queueing: host gaps may be inside
        row.note = "; ".join(filter(None, [row.note, f"{short} of {len(runs)} runs outlasted the stream hold"]))
    _kernel_worker(row, entry.kernel)
    _rates(row, peak_gbps)
    return row


T = TypeVar("T")


def _known(value: T | None) -> T:
    """A field every ok worker row has (worker_row sets it), or every worker row (its worker index)."""
    assert value is not None
    return value


def aggregate_row(case: PerfCase, rows: list[PerfRow], processes: int, peak_gbps: float | None,
                  kernels: list[dict[str, Any] | None] | None = None, headline: str = "stream") -> PerfRow:
    """Median of the worker medians, min–max across workers, GB/s and % peak at the headline median.

    kernels: the workers' kernel summaries of this case (None where a worker has none)."""
    row = _blank(case.row(row_kind="aggregate", worker=None, order=None), headline)
    if case.skip:
        return row.with_(status="not run", detail=case.skip)
    good = [r for r in rows if r.status == "ok"]
    if not good:
        statuses = {r.status for r in rows}
        status = "not run" if statuses == {"not run"} else "error"
        detail = next((r.detail for r in rows if r.detail), "no worker produced a result")
        return row.with_(status=status, detail=detail)
    medians = [_known(r.median_us) for r in good]
    median, low, high = across_workers(medians)
    first = good[0]
    iters = [_known(r.iters) for r in good]
    row.set(iters=int(statistics.median(iters)), runs=first.runs,
            run_us=[round(v, 4) for v in medians], median_us=median,
            min_us=low, max_us=high,
            spread_pct=spread_pct(medians),
            nbytes=first.nbytes, sets=first.sets, working_set_mib=first.working_set_mib,
            llc_mib=first.llc_mib, timer=first.timer, warmup_calls=first.warmup_calls,
            warmup_s=first.warmup_s, note=first.note,
            iters_range=f"{min(iters)}-{max(iters)}", host_fraction=_median_finite(r.host_fraction for r in good))
    _kernel_aggregate(row, list(kernels or []), good)
    _rates(row, peak_gbps)
    flags = worker_flags([_known(r.run_us) for r in good], [f"worker {r.worker}" for r in good])
    for i, text in flags.items():
        good[i].worker_flag = text
    row.worker_flag = "; ".join(flags[i] for i in sorted(flags))
    if len(good) == processes:
        row.set(status="ok", detail="")
    else:
        bad = next((r.detail for r in rows if r.status != "ok" and r.detail), "")
        row.set(status=f"partial ({len(good)}/{processes} workers)", detail=bad)
    return row


def add_speedups(rows: Sequence[PerfRow], baseline: str) -> None:
    """speedup = baseline's headline time / this row's, per (op, dtype, shape, mode); aggregate rows only."""
    key = lambda r: (r.op, r.dtype, r.shape, r.mode)  # noqa: E731
    base = {key(r): headline_us(r) for r in rows
            if r.row_kind == "aggregate" and r.backend == baseline and math.isfinite(headline_us(r))}
    for r in rows:
        us = headline_us(r)
        if r.row_kind == "aggregate" and key(r) in base and math.isfinite(us) and us > 0:
            r.speedup = base[key(r)] / us


def build_rows(cases: list[PerfCase], orders: list[list[PerfCase]], results: list[WorkerResult],
               peak_gbps: float | None, baseline: str, headline: str = "stream") -> list[PerfRow]:
    """All rows: for each case, its worker rows (in worker order) then its aggregate row."""
    if headline not in HEADLINES:
        raise ValueError(f"headline must be one of {HEADLINES}, got {headline!r}")
    entries = [{e.id: e for e in payload_of(result).cases} for result in results]
    positions = [{c.id: i for i, c in enumerate(order)} for order in orders]
    rows: list[PerfRow] = []
    for case in cases:
        case_rows: list[PerfRow] = []
        kernels = []
        if not case.skip:
            for w, result in enumerate(results):
                entry = entries[w].get(case.id)
                problem = result.problem() if entry is None else ""
                case_rows.append(worker_row(case, w, positions[w].get(case.id), entry, problem, peak_gbps, headline,
                                            result.stopped))
                kernels.append(entry.kernel if entry is not None and entry.status == "ok" else None)
        rows.extend(case_rows)
        rows.append(aggregate_row(case, case_rows, len(results), peak_gbps, kernels, headline))
    add_speedups(rows, baseline)
    return rows


def failed(rows: list[PerfRow], results: list[WorkerResult]) -> bool:
    """Exit 1 when any worker failed, any case row is neither ok nor `not run`, or a kernel-timer run erred
    (kernel_status "error ..." or "partial ..."; "n/a" where no GPU activity exists is not a failure)."""
    if any(not r.ok for r in results):
        return True
    return any(row.status not in ("ok", "not run") or str(row.kernel_status).startswith(("error", "partial"))
               for row in rows)


def alone_reason(entries: list[CaseResult]) -> str:
    """A case's reason to have been timed alone from its workers' entries: "size", "measured", "measured k/P"
    when only some workers measured it host-bound, "" when none timed it alone."""
    reasons = [e.alone for e in entries if e.status == "ok"]
    alone = [r for r in reasons if r]
    if not alone:
        return ""
    if "size" in alone or len(alone) == len(reasons):
        return alone[0]
    return f"measured {len(alone)}/{len(reasons)}"


def group_rows(group: Group, peak_gbps: float | None, baseline: str, headline: str) -> dict[int, list[PerfRow]]:
    """Case id -> its rows from this group's results, each naming the GPU and whether it was timed alone."""
    results = group.results or []
    if group.error and not results:
        results = [WorkerResult(i, False, None, False, None, group.error, 0.0) for i in range(len(group.orders))]
    rows = build_rows(group.cases, group.orders, results, peak_gbps, baseline, headline)
    entries = {(w, e.id): e for w, r in enumerate(results) for e in payload_of(r).cases}
    out: dict[int, list[PerfRow]] = {}
    cases = iter(group.cases)
    case = next(cases, None)
    for row in rows:
        assert case is not None                     # a case's rows, then its aggregate row: one per case
        if row.row_kind == "aggregate":
            mine = [entries[(w, case.id)] for w in range(len(results)) if (w, case.id) in entries]
            why = alone_reason(mine)
        else:
            worker = _known(row.worker)
            mine = [entries[(worker, case.id)]] if (worker, case.id) in entries else []
            why = alone_reason(mine)
        row.set(gpu=group.gpu, gpu_model=group.slot.model if group.slot else "", timed_alone=bool(why),
                alone_reason=why)
        out.setdefault(case.id, []).append(row)
        if row.row_kind == "aggregate":
            case = next(cases, None)
    return out


def run_rows(cases: list[PerfCase], groups: list[Group], peak_gbps: float | None, baseline: str, headline: str,
             kernel_sources: Any = None, finished_only: bool = False) -> list[PerfRow]:
    """The run's rows: every case's in case order (a case no group ran: its `not run` row), speed-ups across
    groups, a kernel source's rows naming it (module, file, checkout commit). finished_only: only cases some
    worker already reported (a checkpoint while the run goes on)."""
    by_case: dict[int, list[PerfRow]] = {}
    for group in groups:
        if group.results or group.error:
            by_case.update(group_rows(group, peak_gbps, baseline, headline))
    skipped = [c for c in cases if c.skip]
    plain = next((g.device for g in groups if g.slot is None), "")
    for case_id, rows in group_rows(Group(None, skipped, [], plain), peak_gbps, baseline, headline).items():
        by_case[case_id] = rows
    if finished_only:
        reported = {e.id for g in groups for r in g.results for e in payload_of(r).cases} | {c.id for c in skipped}
        by_case = {k: v for k, v in by_case.items() if k in reported}
    rows = [row for case in cases for row in by_case.get(case.id, [])]
    add_speedups(rows, baseline)
    name_rows(rows, kernel_sources)
    return rows
