"""perf's run-time model on this machine: its constants fitted from the runs recorded in the calibration file
(lnbench.run.calibration), and what a finished run records there.

A timed run records, on its device (DEVICE: `device_key`), per case each worker timed (from the worker's result:
its seconds and its Measurement), in seconds of one idle core:

    perf.call@DEVICE      the call's median time (on the CPU over the slowdown): key (estimate.case_key), backend,
                          op, x = the byte model's bytes
    perf.setup@DEVICE     the case's seconds less its warm-up, its runs and its first call, over the slowdown:
                          x = GB filled, n = rotated sets (estimate.filled)
    perf.warmup@DEVICE    its warm-up (s) and the protocol's for its call time (m)
    perf.first.BACKEND@DEVICE  a worker's first case of a backend beyond the same case where it was not a first
                          (another worker's), else beyond the median of the worker's other cases of its mode; its
                          set-up is recorded without it
    perf.startup@DEVICE   once per run: the wall time from the estimate line to the end less the longest group's
                          turns (the workers' start-up side by side, the hand-overs, the finish), over the slowdown
                          of that many workers starting together

`perf --device emu` records per case perf.emu.OP@DEVICE (its seconds less its compiles', x = elements),
perf.emu.compile@DEVICE or perf.emu.compile.cold@DEVICE (a case's compiles), perf.emu.startup.HOW@DEVICE (the wall
time less the cases' finish), and the compiles it made as compiled into FlyDSL's disk cache.

Fits (calibration.fit): a call recorded for the very case is its median; otherwise (fixed, per byte) fitted per
backend and op, then per op, else the byte model's; the set-up's (fixed, per GB, per set) and the modelled cases'
(fixed, per element) are fitted from their first guesses; the warm-up is its median ratio; the start-up the median
recorded, else (a machine that has never run perf) lnbench's own start-up so far, which a worker repeats.
"""
from __future__ import annotations

import statistics
from typing import Any

from lnbench.run import calibration, upfront
from lnbench.run.calibration import device_key
from lnbench.run.device import Device
from lnbench.run.eta import busy_threads, finish_times, slowdown
from lnbench.perf.cases import PerfCase
from lnbench.perf.estimate import (BANDWIDTH_GBPS, CALL_S, CPU_BWD_FACTOR, FIRST_GUESS, MODELLED_COLD_COMPILE_S,
                                   MODELLED_COMPILE_S, STARTUP_S, ModelledCosts, ModelledEstimate, PerfCosts,
                                   PerfEstimate, case_bytes, case_key, filled, first_of_backend, how_modelled,
                                   warmup_seconds)
from lnbench.perf.messages import CaseResult, PerfWorkerPayload, payload_of
from lnbench.perf.protocol import PerfProtocol


def parent_startup_s(others: float) -> float:
    """A worker's start-up on one idle core, as a first guess: this process's own so far (it has imported torch
    and the backends), over the slowdown it ran at; STARTUP_S where that cannot be read."""
    age = calibration.process_age_s()
    return age / slowdown(1, others) if age else STARTUP_S


def _call_prior(op: str, kind: str, bandwidth_gbps: float | None) -> tuple[float, float]:
    per_byte = 1 / ((bandwidth_gbps or BANDWIDTH_GBPS.get(kind, 1.0)) * 1e9)
    return CALL_S.get(kind, 1e-5), per_byte * (CPU_BWD_FACTOR if kind == "cpu" and op in ("bwd", "fwd+bwd") else 1)


def costs_here(device: Device, others: float, bandwidth_gbps: float | None = None,
               recorded: calibration.Calibration | None = None) -> PerfCosts:
    """perf's constants for `device` on this machine (module docstring), from `recorded` (default: the file's)."""
    cal = calibration.load() if recorded is None else recorded
    at, kind = device_key(device), device.torch_device.type
    calls = cal.get(f"perf.call@{at}")
    by_key: dict[str, list[float]] = {}
    for obs in calls:
        by_key.setdefault(str(obs.get("key")), []).append(obs["s"])
    fits: dict[str, tuple[float, float]] = {}
    for name in dict.fromkeys(name for o in calls for name in _call_groups(o)):
        chosen = [o for o in calls if name in _call_groups(o) and isinstance(o.get("x"), (int, float))]
        if chosen:
            prior = _call_prior(name.split()[-1], kind, bandwidth_gbps)
            fixed, per_byte = calibration.fit([[1.0, o["x"]] for o in chosen], [o["s"] for o in chosen], prior)
            fits[name] = (fixed, per_byte)
    setup = FIRST_GUESS.setup
    if cal.get(f"perf.setup@{at}"):
        observed = cal.get(f"perf.setup@{at}")
        fixed, per_gb, per_set = calibration.fit([[1.0, o.get("x", 0.0), o.get("n", 1.0)] for o in observed],
                                                 [o["s"] for o in observed], FIRST_GUESS.setup)
        setup = (fixed, per_gb, per_set)
    return PerfCosts(startup_s=cal.median(f"perf.startup@{at}", parent_startup_s(others)), setup=setup,
                     warmup=cal.ratio(f"perf.warmup@{at}"),
                     calls={key: float(statistics.median(values)) for key, values in by_key.items()}, call_fits=fits,
                     first_use=cal.medians("perf.first.", at))


def _call_groups(obs: dict[str, Any]) -> tuple[str, str]:
    """The fits a recorded call counts in: its backend and op (`torch fwd`), and its op (`fwd`)."""
    return f"{obs.get('backend')} {obs.get('op')}", str(obs.get("op"))


def perf_observations(estimate: PerfEstimate, orders: list[list[list[PerfCase]]],
                      payloads: list[list[PerfWorkerPayload | None]],
                      protocol: PerfProtocol, device: Device, wall_s: float) -> dict[str, list[dict[str, Any]]]:
    """The series a timed run adds: `orders` and `payloads` per group, per worker (a payload None: the worker
    wrote none); `wall_s` from the estimate line to the end."""
    at, kind = device_key(device), device.torch_device.type
    scale = estimate.scale if kind == "cpu" else 1.0
    series: dict[str, list[dict[str, Any]]] = {}
    turns, complete = [], True
    for group_orders, group_payloads in zip(orders, payloads):
        turn = 0.0
        filled_payloads = [payload or PerfWorkerPayload() for payload in group_payloads]
        extra = _first_use(group_orders, filled_payloads)
        for w, (order, payload) in enumerate(zip(group_orders, filled_payloads)):
            complete = complete and payload.stream_s is not None
            turn += float(payload.stream_s or 0.0) + float(payload.kernel_s or 0.0)
            for i, (case, entry) in enumerate(zip(order, payload.cases)):
                first = extra.get((w, i), 0.0)
                if (w, i) in extra:
                    series.setdefault(f"perf.first.{case.backend}@{at}", []).append({"s": first / scale})
                _case_observations(series, at, kind, case, entry, protocol, scale, estimate.scale, first)
        turns.append(turn)
    if complete and turns and estimate.workers:
        series[f"perf.startup@{at}"] = [{"s": max(0.0, wall_s - max(turns)) / estimate.startup_scale}]
    return series


def _ran(entry: CaseResult) -> bool:
    return entry.status == "ok" and bool(entry.seconds)


def _first_use(orders: list[list[PerfCase]], payloads: list[PerfWorkerPayload]) -> dict[tuple[int, int], float]:
    """Each worker's first case of each backend that ran: (worker, position) -> its seconds beyond the same case
    where it was not a first (the median over the other workers), else beyond the median of the worker's other
    cases of its mode (module docstring)."""
    plain: dict[str, list[float]] = {}
    firsts = []
    for w, (order, payload) in enumerate(zip(orders, payloads)):
        for i, (case, entry, first) in enumerate(zip(order, payload.cases, first_of_backend(order))):
            if not _ran(entry):
                continue
            if first:
                firsts.append((w, i, case, float(entry.seconds or 0.0)))
            else:
                plain.setdefault(case_key(case), []).append(float(entry.seconds or 0.0))
    extra = {}
    for w, i, case, seconds in firsts:
        same = plain.get(case_key(case))
        if not same:
            same = [float(e.seconds or 0.0) for j, (c, e) in enumerate(zip(orders[w], payloads[w].cases))
                    if j != i and c.mode == case.mode and _ran(e)]
        if same:
            extra[(w, i)] = max(0.0, seconds - float(statistics.median(same)))
    return extra


def _case_observations(series: dict[str, list[dict[str, Any]]], at: str, kind: str, case: PerfCase,
                       entry: CaseResult, protocol: PerfProtocol, call_scale: float, scale: float,
                       first_use: float = 0.0) -> None:
    """One timed case's call, set-up and warm-up (module docstring), when it ran; `first_use`: the seconds its
    backend's first use in the worker took (not its set-up's)."""
    measured = entry.measurement if entry.status == "ok" else None
    if not isinstance(measured, dict) or not measured.get("run_us") or not entry.seconds:
        return
    call = float(measured["median_us"]) * 1e-6
    iters = int(measured["iters_per_run"])
    runs = sum(measured["run_us"]) * 1e-6 * iters + (call * iters if kind == "cuda" else 0.0)
    setup = float(entry.seconds) - first_use - float(measured["warmup_s"]) - runs - call
    nbytes, sets = filled(case, protocol, kind)
    series.setdefault(f"perf.call@{at}", []).append({"key": case_key(case), "backend": case.backend, "op": case.op,
                                                     "x": case_bytes(case), "s": call / call_scale})
    series.setdefault(f"perf.setup@{at}", []).append({"x": nbytes / 1e9, "n": sets, "s": max(0.0, setup) / scale})
    series.setdefault(f"perf.warmup@{at}", []).append({"s": float(measured["warmup_s"]),
                                                       "m": warmup_seconds(call, protocol)})


@calibration.quietly
def record_perf(estimate: PerfEstimate, groups: list[Any], protocol: PerfProtocol, device: Device,
                wall_s: float) -> bool:
    """Record a finished timed run (groups: lnbench.perf.spread.Group, their worker results); False when the
    calibration file could not be written."""
    orders = [group.orders for group in groups]
    payloads = [[next((payload_of(r) for r in group.results if r.index == w and r.payload is not None), None)
                 for w in range(len(group.orders))] for group in groups]
    return calibration.record(perf_observations(estimate, orders, payloads, protocol, device, wall_s))


def modelled_costs_here(device: Device, recorded: calibration.Calibration | None = None,
                        others: float = 0.0) -> ModelledCosts:
    """`perf --device emu`'s constants on this machine (module docstring); `others`: the busy threads now."""
    cal = calibration.load() if recorded is None else recorded
    first, at = ModelledCosts(), device_key(device)
    return ModelledCosts({op: cal.linear(f"perf.emu.{op}@{at}", cost) for op, cost in first.cases.items()},
                         cal.median(f"perf.emu.compile@{at}", MODELLED_COMPILE_S),
                         cal.median(f"perf.emu.compile.cold@{at}", MODELLED_COLD_COMPILE_S),
                         {how: cal.median(f"perf.emu.startup.{how.replace(' ', '-')}@{at}",
                                          first.startup_s[how] if how == "in process" else parent_startup_s(others))
                          for how in first.startup_s})


def modelled_observations(estimate: ModelledEstimate, cases: list[tuple[str, int, int]], jobs: int,
                          measured: list[tuple[float, float, int, int] | None], device: Device, wall_s: float
                          ) -> dict[str, list[dict[str, Any]]]:
    """The series a `perf --device emu` run adds: per case (op, M, N) its (seconds, compile seconds, compiles,
    cold ones) where it ran (None where it failed), `wall_s` from the estimate line to the end."""
    at, scale = device_key(device), estimate.scale
    series: dict[str, list[dict[str, Any]]] = {}
    for (op, m, n), got in zip(cases, measured):
        if got is None:
            continue
        seconds, compile_s, count, cold = got
        series.setdefault(f"perf.emu.{op}@{at}", []).append({"x": m * n, "s": max(0.0, seconds - compile_s) / scale})
        if count:
            series.setdefault(f"perf.emu.compile{'.cold' if cold else ''}@{at}", []).append({"s": compile_s / scale})
    if measured and all(got is not None for got in measured):
        done = max(finish_times([got[0] for got in measured if got], jobs))
        series[f"perf.emu.startup.{how_modelled(jobs).replace(' ', '-')}@{at}"] = [
            {"s": max(0.0, wall_s - done) / scale}]
    return series


def modelled_key(case: Any, arch: str, eps: float) -> str:
    """What a modelled case's compile is of (lnbench.perf.modelled.ModelCase: its backend's kernels for an op,
    dtype, shape, ABI and strategy) on an arch."""
    return f"{case.backend} {arch} {case.op} {case.dtype} {case.m}x{case.n} {eps:g} {case.abi} {case.strategy}"


def modelled_estimate(cases: list[Any], jobs: int, device: Device, eps: float
                      ) -> tuple[ModelledEstimate, ModelledRecord]:
    """A `perf --device emu` run's estimate from this machine's constants, a case whose kernels earlier runs
    compiled into FlyDSL's disk cache priced as warm; and the record it keeps of what its parts take."""
    from lnbench.flydsl import compile_log

    cal, others = calibration.load(), busy_threads()
    warm = cal.warm(compile_log.cache_identity(), compile_log.cache_files())
    shapes = [(c.op, c.m, c.n) for c in cases]
    cold = [modelled_key(c, device.arch, eps) not in warm for c in cases]
    estimate = ModelledEstimate(shapes, jobs, others, costs=modelled_costs_here(device, cal, others), cold=cold)
    work = upfront.work_signature(shapes, jobs, eps)
    ahead = perf_upfront(cases, device, estimate.wall_s, "perf-emu", any(cold), work, estimate.scale)
    estimate.running.set_prior(ahead.ratio)
    return estimate, ModelledRecord(estimate, cases, jobs, device, eps, ahead)


class ModelledRecord:
    """What a `perf --device emu` run measures per case (`case`), recorded at its end (`finish`)."""

    def __init__(self, estimate: ModelledEstimate, cases: list[Any], jobs: int, device: Device, eps: float,
                 ahead: upfront.Upfront | None = None) -> None:
        self.estimate, self.cases, self.jobs, self.device, self.eps = estimate, cases, jobs, device, eps
        self.upfront = ahead
        self.measured: list[tuple[float, float, int, int] | None] = [None] * len(cases)

    def case(self, index: int, measured: tuple[float, float, int, int] | None) -> None:
        self.measured[index] = tuple(measured) if measured else None      # type: ignore[assignment]

    @calibration.quietly
    def finish(self) -> bool:
        """Record the run's observations and the compiles it made; False when the file could not be written."""
        from lnbench.flydsl import compile_log

        wall = self.estimate.running.clock() - self.estimate.running.start
        shapes = [(c.op, c.m, c.n) for c in self.cases]
        keys = [modelled_key(c, self.device.arch, self.eps) for c, got in zip(self.cases, self.measured) if got]
        compiled = {compile_log.cache_identity(): {"files": compile_log.cache_files(), "keys": keys}} if keys else {}
        if self.upfront is not None and all(got is not None for got in self.measured):   # a whole run
            upfront.record_run(self.upfront, wall)
        return calibration.record(modelled_observations(self.estimate, shapes, self.jobs, self.measured,
                                                        self.device, wall), compiled)


def perf_upfront(plan_cases: list[PerfCase], device: Device, model_s: float, command: str = "perf",
                 flydsl_cold: bool = False, work: str = "", slowdown: float = 1.0) -> upfront.Upfront:
    """A perf run's up-front estimate (lnbench.run.upfront) from its cases that run and its model's `model_s`;
    `work` its upfront.work_signature, `slowdown` the load the model counted."""
    runs = [c for c in plan_cases if not getattr(c, "skip", "")] or plan_cases
    backends = [c.backend for c in runs]
    key = upfront.run_key(command, backends, device_key(device), upfront.size_class(c.m * c.n for c in runs))
    pending = upfront.pending_compiles(backends, device.is_gpu, device.emulated, flydsl_cold)
    return upfront.estimate(key, model_s, pending, work=work, slowdown=slowdown)
