"""The timing core of one worker, generic over a pair of call paths per case.

Three measurements per side (all µs per call, R runs of I calls each, per worker):
    direct   host wall time of I back-to-back hot calls (preallocated outputs), synchronised once at
             the end of the run: launch/dispatch throughput (calls/s = 1e6 / µs);
    wrapper  host wall time of I calls of the public wrapper, allocation included, synchronised at the end;
    device   GPU time per call from events on the current stream around I direct calls (I <= 256). The stream is
             first held by a spin kernel (torch.cuda._sleep, nvbench's "blocking kernel") long enough for
             the host to enqueue all I calls, so host gaps between small kernels are not charged as
             device time; a run where the spin ran out before the host finished is counted in
             `spin_short`. Not measured on the CPU (no device events there).
             Kernel time of `device` (GPU): after every stream-timed round, R more runs per side in the same
             ABBA order under torch's profiler (lnbench.measure.kernel_timer: isolated hot calls, as ncu times them);
             MetricRecord.kernel[side] is the lnbench.measure.kernel_stats worker summary ("n/a" with the reason
             where the profiler has no GPU activity, or with the kernel timer off).
Order: warm-up and loop-count calibration per case, then R rounds; each round visits every
(case, measurement) unit, rotated per round, and both sides in ABBA order (lnbench.abi.schedule).
Timer primitives come from lnbench.measure.timing (shared with `lnbench perf`).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import torch

from lnbench.abi.cases import PairCase, Side
from lnbench.abi.checks import Checker, run_checks
from lnbench.abi.messages import AbiCaseEntry, AbiWorkerPayload, MetricRecord
from lnbench.abi.schedule import SIDES, schedule
from lnbench.constants import ABI_METRICS
from lnbench.errors import one_line
from lnbench.measure import kernel_stats, kernel_timer, timing
from lnbench.measure.protocol import Protocol

METRICS = ABI_METRICS
#: cap of I for `device` runs (see lnbench.measure.timing.HELD_MAX_ITERS)
DEVICE_MAX_ITERS = timing.HELD_MAX_ITERS


def _path(side: Side, metric: str) -> Callable[[], object]:
    """The callable a measurement times."""
    if metric == "wrapper":
        return side.wrapper
    if metric == "device" and side.device is not None:
        return side.device
    return side.direct


def _metrics_for(case: PairCase, metrics: Sequence[str], device: torch.device) -> dict[str, str]:
    """metric -> '' when measurable, else the reason it is not."""
    out = {}
    for metric in metrics:
        if metric == "device" and device.type != "cuda":
            out[metric] = "no device events on the CPU"
        else:
            out[metric] = ""
    return out


def run_worker(cases: Sequence[PairCase], protocol: Protocol, device: torch.device, *, worker_index: int = 0,
               metrics: Sequence[str] = METRICS, probe_cases: Sequence[PairCase] = (),
               on_update: Callable[[AbiWorkerPayload], None] | None = None,
               on_progress: Callable[[str], None] | None = None, checker: Checker = run_checks) -> AbiWorkerPayload:
    """Check, warm up, calibrate and time every case; return the worker's payload.

    probe_cases take part in the alternation check only (never timed). on_update receives the payload
    after the checks and after every round (a crash later still leaves partial results). `checker` runs the
    checks before timing (default: lnbench.abi.checks.run_checks; the null device's checker is in
    lnbench.abi.null_device); a case it fails is never timed.
    """
    started = time.perf_counter()
    update = on_update or (lambda payload: None)
    progress = on_progress or (lambda label: None)
    checks, failed = checker(list(cases) + list(probe_cases), device)
    payload = AbiWorkerPayload(worker_index, os.getpid(), str(device), [c.to_dict() for c in checks])
    units: list[tuple[PairCase, str]] = []
    for case in cases:
        reasons = _metrics_for(case, metrics, device)
        entry = AbiCaseEntry(case.op, case.dtype, list(case.shape), case.key in failed)
        for metric, reason in reasons.items():
            entry.metrics[metric] = MetricRecord(reason)
            if not reason and case.key not in failed:
                units.append((case, metric))
        payload.cases[case.key] = entry
    update(payload)

    # warm-up: time-based on the first path of each case and side, a few calls of the others; the
    # per-call estimate of each path sets I (the faster side's, so both sides' runs reach the target)
    estimate: dict[tuple[str, str, str], float] = {}
    measured: dict[str, list[str]] = {}
    for case, metric in units:
        measured.setdefault(case.key, []).append(metric)
    for case in {id(c): c for c, _ in units}.values():
        for side_name in SIDES:
            warmed: dict[int, float] = {}
            for metric in measured[case.key]:
                fn = _path(case.sides[side_name], metric)
                if id(fn) not in warmed:
                    seconds = protocol.warmup_s if not warmed else 0.0
                    calls = protocol.min_warmup_calls if not warmed else max(3, protocol.min_warmup_calls // 3)
                    warmed[id(fn)] = timing.warm_up(fn, device, seconds, calls)[2]
                estimate[(case.key, metric, side_name)] = warmed[id(fn)]
        progress(f"warm {case.key}")
    for case, metric in units:
        fastest = min(estimate[(case.key, metric, s)] for s in SIDES)
        iters = timing.choose_iters(fastest, protocol.target_run_s, protocol.min_iters, protocol.max_iters,
                                    protocol.max_run_s)
        if metric == "device" and device.type == "cuda":
            iters = min(iters, max(protocol.min_iters, DEVICE_MAX_ITERS))
        payload.cases[case.key].metrics[metric].iters = iters

    spin = timing.StreamHold(device)
    order = schedule(units, protocol.runs, worker_index)
    per_round = 2 * len(units)
    for position, (round_index, (case, metric), side_name) in enumerate(order):
        record = payload.cases[case.key].metrics[metric]
        side = case.sides[side_name]
        iters = record.iters
        fn = _path(side, metric)
        if metric == "device":
            host_us = estimate[(case.key, metric, side_name)] * 1e6
            value, short = timing.held_run(fn, device, iters, spin, host_us)
            record.spin_short += int(short)
        else:
            value = timing.timed_run(fn, device, iters, "wall")
        record.runs(side_name).append(value)
        if (position + 1) % per_round == 0:
            payload.rounds_done = round_index + 1
            update(payload)
            progress(f"round {round_index + 1}")
    payload.rounds_done = protocol.runs if units else 0
    _kernel_pass(payload, [u for u in units if u[1] == "device"], protocol, device, worker_index, estimate)
    payload.duration_s = time.perf_counter() - started
    update(payload)
    return payload


def _kernel_pass(payload: AbiWorkerPayload, units: Sequence[tuple[PairCase, str]], protocol: Protocol,
                 device: torch.device, worker_index: int, estimate: dict[tuple[str, str, str], float]) -> None:
    """Kernel time of the `device` units, after all stream-timed rounds (see the module docstring)."""
    if not units:
        return
    from lnbench.run.device import torch_device_info

    reason = kernel_timer.unavailable_reason(torch_device_info(device)) if protocol.kernel_timer \
        else "kernel timer off"
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    failed: dict[tuple[str, str], str] = {}
    timer = None if reason else kernel_timer.KernelTimer(device)
    for _, (case, _metric), side_name in ([] if reason else schedule(units, protocol.runs, worker_index)):
        assert timer is not None                    # no units without a timer
        key = (case.key, side_name)
        if key in failed:
            continue
        try:
            runs.setdefault(key, []).append(timer.run(
                _path(case.sides[side_name], "device"), payload.cases[case.key].metrics["device"].iters,
                clean=False, host_us_per_call=estimate[(case.key, "device", side_name)] * 1e6))
        except Exception as exc:  # noqa: BLE001 - the stream-time result stands
            failed[key] = one_line(exc, 300)
    for case, _metric in units:
        payload.cases[case.key].metrics["device"].kernel = {
            side: (kernel_stats.not_available(reason) if reason else
                   kernel_stats.not_available(failed[(case.key, side)], "error") if (case.key, side) in failed else
                   kernel_stats.worker_summary(runs.get((case.key, side), [])))
            for side in SIDES}
