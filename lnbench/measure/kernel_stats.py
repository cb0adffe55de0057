"""Kernel-timer records: one profiled run -> a run record -> a worker summary -> aggregate columns.

Pure functions over plain records (no torch, no GPU), shared by `lnbench perf` and abi-compare's `device`
metric; lnbench.measure.kernel_timer produces the `Activity` lists on a GPU.

    run record      one profiled run of I calls: the device activities counted (kernels, memcpy, memset
                    issued by the calls; the harness's own spin and flush kernels excluded), their summed
                    duration, per-name count and duration, how much of the sum overlaps (union of intervals
                    vs sum), and the calls' event windows with and without the profiler
    worker summary  the R runs of one worker: kernel µs per call per run (sum of durations / I, less the
                    lengthening tracing adds to the calls where it is significant, never above the untraced
                    call window), its median, kernels per call, per-name figures, and notes
    aggregate       median of the worker medians with the min–max across workers (as for stream time)
    row columns     what a result row shows of a worker summary or an aggregate (`row_columns`: the same
                    columns in `perf` rows and, per side, in abi-compare's `device` rows)

A summary has a status: "ok", "n/a" (no device activity exists here, with the reason: never a zero) or
"error". gap µs = stream µs − kernel µs (launch gaps between back-to-back kernels and one call's cache
write-back landing in the next, plus host overhead where the timed figure includes it).
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

#: activity kinds that are the timed calls' own device work
COUNTED_KINDS: tuple[str, ...] = ("kernel", "memcpy", "memset")
NO_ACTIVITY = "the profiler recorded no GPU activity for the timed calls"
#: counted records overlapping by more than this fraction of their sum get a note
_OVERLAP_TOLERANCE = 0.005
#: a profiler shift of the call window above both of these gets a note
_SHIFT_FLOOR_US, _SHIFT_FRACTION = 0.5, 0.02


@dataclass(frozen=True)
class Activity:
    """One device-side record of the profiler: name, kind (see kernel_timer.classify), start and duration."""

    name: str
    kind: str
    start_ns: int
    duration_ns: int


def _union_ns(items: Sequence[Activity]) -> int:
    """Length of the union of the activities' [start, start + duration) intervals."""
    total, end = 0, None
    for item in sorted(items, key=lambda a: a.start_ns):
        lo, hi = item.start_ns, item.start_ns + item.duration_ns
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def run_record(activities: Iterable[Activity], iters: int, *, exclude: Iterable[str] = (),
               window_us: float = math.nan, bare_window_us: float = math.nan, spin_short: bool = False
               ) -> dict[str, Any]:
    """The record of one profiled run of `iters` calls (JSON-able).

    exclude: names never counted (the stream-hold spin kernel). window_us: event-timed µs per call of the
    same run (stream time under the profiler), NaN when not taken. bare_window_us: the same for the run's
    calls made without the profiler (an upper bound of their unperturbed kernel time).
    """
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    skip = set(exclude)
    counted = [a for a in activities if a.kind in COUNTED_KINDS and a.name not in skip]
    names: dict[str, dict[str, Any]] = {}
    for item in counted:
        entry = names.setdefault(item.name, {"kind": item.kind, "count": 0, "ns": 0})
        entry["count"] += 1
        entry["ns"] += int(item.duration_ns)
    total = sum(int(a.duration_ns) for a in counted)
    return {"iters": int(iters), "count": len(counted), "total_ns": total, "overlap_ns": total - _union_ns(counted),
            "names": names, "window_us": float(window_us), "bare_window_us": float(bare_window_us),
            "spin_short": bool(spin_short)}


def not_available(reason: str, status: str = "n/a") -> dict[str, Any]:
    """A summary saying why there is no kernel time (status "n/a" or "error")."""
    return {"status": status, "reason": reason}


def _names_summary(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per name: kind, median over runs of its count per call and of its µs per call (absent = 0)."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n for r in runs for n in r["names"]):
        kinds = [r["names"][name]["kind"] for r in runs if name in r["names"]]
        per_call = [r["names"].get(name, {}).get("count", 0) / r["iters"] for r in runs]
        us = [r["names"].get(name, {}).get("ns", 0) / 1e3 / r["iters"] for r in runs]
        out[name] = {"kind": kinds[0], "per_call": float(statistics.median(per_call)),
                     "us": float(statistics.median(us))}
    return out


def _shift_us(runs: Sequence[dict[str, Any]]) -> float:
    """Median traced − median untraced call window (NaN when either is missing)."""
    traced = [float(r.get("window_us", math.nan)) for r in runs]
    bare = [float(r.get("bare_window_us", math.nan)) for r in runs]
    traced, bare = [v for v in traced if math.isfinite(v)], [v for v in bare if math.isfinite(v)]
    if not traced or not bare:
        return math.nan
    return float(statistics.median(traced) - statistics.median(bare))


def worker_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One worker's R run records -> kernel µs per call per run, median, kernels per call, names, notes."""
    if not runs:
        return not_available("no kernel-timer runs")
    empty = [i for i, r in enumerate(runs) if r["count"] == 0]
    if len(empty) == len(runs):
        return not_available(NO_ACTIVITY)
    if empty:
        return not_available(f"{len(empty)} of {len(runs)} profiled runs recorded no GPU activity", "error")
    traced_us = [r["total_ns"] / 1e3 / r["iters"] for r in runs]
    bare = [float(r.get("bare_window_us", math.nan)) for r in runs]
    shift = _shift_us(runs)
    spin_short = sum(bool(r.get("spin_short")) for r in runs)
    # Tracing lengthens some kernels (Triton's LayerNorm reductions; on the H200 the lengthening shows inside
    # the kernel record, as ncu confirms). The same calls' traced and untraced windows measure it, so the
    # records are corrected by it, unless a spin ran short (then host time may be inside the windows).
    significant = math.isfinite(shift) and shift > max(_SHIFT_FLOOR_US, _SHIFT_FRACTION * statistics.median(traced_us))
    corrected = significant and not spin_short
    estimate = [t - shift if corrected else t for t in traced_us]
    run_us = [min(e, b) if math.isfinite(b) else e for e, b in zip(estimate, bare)]
    per_call = [r["count"] / r["iters"] for r in runs]
    notes, checks = [], []
    if significant and spin_short:
        notes.append(f"profiled calls' windows {shift:.3g} µs longer, but the spin ran out before a call was queued "
                     f"in {spin_short} of {len(runs)} runs (host time in the windows): kernel time not corrected")
    if corrected:
        notes.append(f"profiling lengthens each call by {shift:.3g} µs: kernel time is the traced records "
                     f"({statistics.median(traced_us):.4g} µs) less that")
    bounded = sum(1 for e, r in zip(estimate, run_us) if r < e)
    if bounded:
        notes.append(f"{bounded} of {len(runs)} runs above the call's untraced window "
                     f"({statistics.median(traced_us):.4g} µs traced), bounded by it")
    uneven = sum(1 for r in runs if r["count"] % r["iters"])
    if uneven:
        checks.append(f"{uneven} of {len(runs)} runs: device records not a whole number per call "
                      f"(records lost, or calls that differ)")
    overlapping = sum(1 for r in runs if r["overlap_ns"] > _OVERLAP_TOLERANCE * r["total_ns"])
    if overlapping:
        checks.append(f"{overlapping} of {len(runs)} runs: counted device records overlap in time "
                      f"(several streams, or records that are not kernels)")
    return {"status": "ok", "reason": "", "run_us": run_us, "traced_run_us": traced_us, "bounded_runs": bounded,
            "profiler_shift_us": shift, "corrected": corrected, "uncorrected": significant and not corrected, "median_us": float(statistics.median(run_us)),
            "kernels_per_call": float(statistics.median(per_call)), "names": _names_summary(runs),
            "window_us": [float(r.get("window_us", math.nan)) for r in runs], "bare_window_us": bare,
            "spin_short": spin_short, "checks": checks, "note": "; ".join(notes + checks)}


def _profiler_notes(good: Sequence[dict[str, Any]]) -> list[str]:
    """The workers' profiler notes as one line each for an aggregate row: how many workers, and the range."""
    def span(values: list[float], fmt: str) -> str:
        low, high = format(min(values), fmt), format(max(values), fmt)
        return low if low == high else f"{low}–{high}"

    notes = []
    corrected = [s for s in good if s.get("corrected")]
    if corrected:
        notes.append(f"profiling lengthens each call by {span([s['profiler_shift_us'] for s in corrected], '.3g')} "
                     f"µs in {len(corrected)} of {len(good)} workers: kernel time is the traced records "
                     f"({span([statistics.median(s['traced_run_us']) for s in corrected], '.4g')} µs) less that")
    uncorrected = [s for s in good if s.get("uncorrected")]
    if uncorrected:
        notes.append(f"profiled calls' windows {span([s['profiler_shift_us'] for s in uncorrected], '.3g')} µs longer "
                     f"in {len(uncorrected)} of {len(good)} workers, but a spin ran out before a call was queued "
                     f"(host time in the windows): kernel time not corrected there")
    bounded = [s for s in good if s.get("bounded_runs")]
    if bounded:
        traced = statistics.median(v for s in bounded for v in s["traced_run_us"])
        notes.append(f"{len(bounded)} of {len(good)} workers above the call's untraced window ({traced:.4g} µs "
                     f"traced), bounded by it")
    return notes


def status_text(summary: dict[str, Any] | None) -> str:
    """"ok", "n/a (reason)" or "error (reason)"; a missing summary reads "n/a (not measured)"."""
    if not summary:
        return "n/a (not measured)"
    if summary.get("status") == "ok":
        return "ok"
    return f"{summary.get('status', 'error')} ({summary.get('reason') or 'no reason given'})"


def aggregate(summaries: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Workers' summaries -> median of the worker medians, min–max across workers, kernels per call, names.

    Only "ok" summaries count; with none, the status and reason of the first one that says why.
    """
    from lnbench.measure.stats import across_workers     # here: the workers importing this module load no pandas

    good = [s for s in summaries if s and s.get("status") == "ok"]
    if not good:
        first = next((s for s in summaries if s), None)
        return not_available(first["reason"], first.get("status", "n/a")) if first else not_available("not measured")
    medians = [float(s["median_us"]) for s in good]
    per_call = [float(s["kernels_per_call"]) for s in good]
    names: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n for s in good for n in s["names"]):
        present = [s["names"][name] for s in good if name in s["names"]]
        names[name] = {"kind": present[0]["kind"],
                       "per_call": float(statistics.median([p["per_call"] for p in present])),
                       "us": float(statistics.median([p["us"] for p in present])), "workers": len(present)}
    notes = _profiler_notes(good) + [check for s in good for check in s.get("checks", [])]
    if len(set(per_call)) > 1:
        notes.insert(0, "kernels per call differ between workers: " + ", ".join(f"{v:g}" for v in per_call))
    median, low, high = across_workers(medians)
    return {"status": "ok", "reason": "", "median_us": median, "min_us": low, "max_us": high, "worker_medians": medians,
            "kernels_per_call": float(statistics.median(per_call)), "names": names, "workers": len(good),
            "note": "; ".join(dict.fromkeys(notes))}


def gap_us(stream_us: float | None, kernel_us: float | None) -> float:
    """stream − kernel µs per call; NaN unless both are finite numbers."""
    if stream_us is None or kernel_us is None or not (math.isfinite(stream_us) and math.isfinite(kernel_us)):
        return math.nan
    return float(stream_us) - float(kernel_us)


def names_json(names: dict[str, Any]) -> str:
    """Per-name figures as a JSON column, floats rounded to 4 decimals."""
    return json.dumps({name: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in info.items()}
                       for name, info in names.items()})


def row_columns(figures: dict[str, Any] | None, stream_us: float | None, prefix: str = "") -> dict[str, Any]:
    """The kernel columns of a result row, keys starting with `prefix` (abi-compare: "tensor_", "pointer_").

    figures: an `aggregate` (min–max across workers), or a worker summary with min_us / max_us over its runs
    added. Always `kernel_status` (see status_text); where it is "ok", also `kernel_us` with `kernel_min_us`
    and `kernel_max_us`, `kernels_per_call`, `kernel_names` (JSON) and `gap_us` = stream_us − kernel µs.
    """
    out: dict[str, Any] = {f"{prefix}kernel_status": status_text(figures)}
    if not figures or figures.get("status") != "ok":
        return out
    kernel_us = float(figures["median_us"])
    return {**out, f"{prefix}kernel_us": kernel_us, f"{prefix}kernel_min_us": figures["min_us"],
            f"{prefix}kernel_max_us": figures["max_us"], f"{prefix}kernels_per_call": figures["kernels_per_call"],
            f"{prefix}kernel_names": names_json(figures["names"]), f"{prefix}gap_us": gap_us(stream_us, kernel_us)}
