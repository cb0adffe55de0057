"""verify's run-time model on this machine: its constants fitted from the runs recorded in the calibration file
(lnbench.run.calibration), and what a finished run records there.

A run records, on the device it ran on (DEVICE: `device_key`), in seconds of one idle core (the wall seconds
divided by the slowdown the run was at, eta.slowdown):

    verify.KIND@DEVICE          each unit that ran (all its rows PASS or FAIL): its seconds less its compiles',
                                x = the elements of its case; KIND as estimate.unit_kind
    verify.compile@DEVICE       the compiles of a unit that FlyDSL's disk cache had, their seconds
    verify.compile.cold@DEVICE  the same for a unit that compiled at least one kernel cold
    verify.startup@DEVICE       the rest of the wall time from the estimate line to the end (the start, the
                                finish): wall − the makespan of the units' seconds − the compiles' / jobs

and, on the emulated device, the compiles it made as compiled into FlyDSL's disk cache (compile_log). The next
estimate fits (fixed, per element) of each kind to its units (calibration.fit: a run of one size scales the first
guess, runs of several sizes fit both), and takes the median compile and start-up.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from lnbench.run import calibration, upfront
from lnbench.run.calibration import device_key
from lnbench.run.device import Device
from lnbench.run.eta import makespan
from lnbench.verify.cases import Case
from lnbench.verify.estimate import (COLD_COMPILE_S, COMPILE_S, EMULATED_AUTOGRAD, FIRST_GUESS, GPU_STARTUP_S,
                                     INLINE_EMULATED,
                                     KINDS, STARTUP_S, Estimate, VerifyCosts, compile_key, compile_keys, compile_shares,
                                     shared_units, unit_costs, unit_kind)
from lnbench.verify.summary import status_word


def costs_here(device: Device, recorded: calibration.Calibration | None = None) -> VerifyCosts:
    """The model's constants for `device` on this machine: fitted to the recorded runs (`recorded`, default the
    calibration file's), each kind's first guess where none is recorded (an autograd-3d unit: EMULATED_AUTOGRAD ×
    the fitted 2-D unit; a unit in one process: INLINE_EMULATED × the unit in workers)."""
    cal = calibration.load() if recorded is None else recorded
    at = device_key(device)
    units = {kind: cal.linear(f"verify.{kind}@{at}", FIRST_GUESS.units[kind]) for kind in KINDS
             if kind != "emulated-autograd"}
    fixed, per_element = units["emulated"]
    units["emulated-autograd"] = cal.linear(f"verify.emulated-autograd@{at}",
                                            (fixed * EMULATED_AUTOGRAD, per_element * EMULATED_AUTOGRAD))
    for kind in KINDS:
        if cal.get(f"verify.{kind}.inline@{at}"):
            fixed, per_element = units[kind]
            units[f"{kind}.inline"] = cal.linear(f"verify.{kind}.inline@{at}",
                                                 (fixed * INLINE_EMULATED, per_element * INLINE_EMULATED))
    return VerifyCosts(units, compile_s=cal.median(f"verify.compile@{at}", COMPILE_S),
                       cold_compile_s=cal.median(f"verify.compile.cold@{at}", COLD_COMPILE_S),
                       startup_s=cal.median(f"verify.startup@{at}", GPU_STARTUP_S if device.is_gpu else STARTUP_S))


def warm_compiles(device: Device, recorded: calibration.Calibration | None = None) -> set[str]:
    """The compiles (estimate.compile_key) FlyDSL's disk cache has, as recorded by earlier runs ({} off the
    emulated device, or where the cache has been emptied since)."""
    if not device.emulated:
        return set()
    from lnbench.flydsl import compile_log

    cal = calibration.load() if recorded is None else recorded
    return cal.warm(compile_log.cache_identity(), compile_log.cache_files())


def estimate_run(units: list[tuple[str, Case]], device: Device, jobs: int, inline: bool
                 ) -> tuple[Estimate, VerifyRecord]:
    """A run's estimate from this machine's constants (`costs_here`, the compiles FlyDSL's disk cache has), and
    the record it keeps of what its parts take; the up-front estimate (lnbench.run.upfront: this machine's earlier
    runs of the kind, else a range with the compiles pending) is the record's `upfront`, and the running
    estimate's prior."""
    cal = calibration.load()
    costs = costs_here(device, cal)
    warm = warm_compiles(device, cal)
    shares = compile_shares(units, device, costs, warm)             # each compile with the units that make it
    estimate = Estimate({i: cost + shares.get(i, 0.0) for i, cost in unit_costs(units, device, inline, costs).items()},
                        jobs, startup_s=costs.startup_s)
    key = upfront.run_key("verify", [b for b, _ in units], device_key(device),
                          upfront.size_class(c.rows * c.n for _, c in units))
    pending = upfront.pending_compiles([b for b, _ in units], device.is_gpu, device.emulated,
                                       bool(compile_keys(units, device) - warm))
    ahead = upfront.estimate(key, estimate.wall_s, pending, cal)
    estimate.running.set_prior(ahead.ratio)
    return estimate, VerifyRecord(estimate, units, device, inline, ahead)


def _without_first_calls(seconds: list[float], sizes: list[tuple[str, int]]) -> list[float]:
    """Units' seconds with what a process's first unit carries beyond its kind (the CUDA context, torch's first
    calls: 2 s on a unit of 3 ms on the H200) left out: each unit at most calibration.OUTLIER times the median of
    the units of its kind and size (a kind and size met once keeps its seconds). What is cut counts as the run's
    start-up. (Against the run's typical ratio to the model instead, a run of small and large units kept the
    small first unit whole: the median ratio was the large units'.)"""
    groups: dict[tuple[str, int], list[float]] = {}
    for value, size in zip(seconds, sizes):
        groups.setdefault(size, []).append(value)
    typical = {size: sorted(values)[len(values) // 2] for size, values in groups.items() if len(values) > 1}
    return [min(value, calibration.OUTLIER * typical[size]) if size in typical else value
            for value, size in zip(seconds, sizes)]


class VerifyRecord:
    """What a verify run measures, as it goes (`unit`, `compiled`), recorded at its end (`finish`)."""

    def __init__(self, estimate: Estimate, units: list[tuple[str, Case]], device: Device, inline: bool,
                 ahead: upfront.Upfront | None = None) -> None:
        self.estimate, self.pairs, self.device = estimate, units, device
        self.upfront = ahead or upfront.Upfront("", estimate.wall_s, estimate.wall_s, estimate.wall_s, estimate.wall_s)
        self.kinds = [unit_kind(b, c, device, inline, shared) for (b, c), shared in zip(units, shared_units(units))]
        self.seconds: dict[int, float] = {}
        self.compiles: dict[int, tuple[float, int, int]] = {}

    def unit(self, unit: int, rows: Sequence[Mapping[str, Any]], seconds: float) -> None:
        """Unit `unit` took `seconds` (its compiles included); it counts when all its rows are PASS or FAIL."""
        if rows and all(status_word(row) in ("PASS", "FAIL") for row in rows):
            self.seconds[unit] = seconds

    def compiled(self, unit: int, seconds: float, count: int, cold: int) -> None:
        """Unit `unit` made `count` compiles (`cold` of them not in FlyDSL's disk cache) taking `seconds`."""
        if count:
            self.compiles[unit] = (seconds, count, cold)

    def elapsed_s(self) -> float:
        """Seconds since the estimate was made (its line printed)."""
        return self.estimate.running.clock() - self.estimate.running.start

    def observations(self, wall_s: float) -> dict[str, list[dict[str, float]]]:
        """The series a run of `wall_s` seconds from the estimate to its end adds (module docstring)."""
        at, scale, jobs = device_key(self.device), self.estimate.scale, self.estimate.jobs
        series: dict[str, list[dict[str, float]]] = {}
        clean = []
        for unit, seconds in sorted(self.seconds.items()):
            compile_s = self.compiles.get(unit, (0.0, 0, 0))[0] if self.device.emulated else 0.0   # else in units
            backend, case = self.pairs[unit]
            clean.append(max(0.0, seconds - compile_s) / scale)
            series.setdefault(f"verify.{self.kinds[unit]}@{at}", []).append({"x": case.rows * case.n, "s": clean[-1]})
        for seconds, _, cold in self.compiles.values() if self.device.emulated else ():
            series.setdefault(f"verify.compile{'.cold' if cold else ''}@{at}", []).append({"s": seconds / scale})
        if len(self.seconds) == len(self.pairs):         # every unit ran: the rest is the start and the finish
            compiles = sum(s for s, _, _ in self.compiles.values()) / scale if self.device.emulated else 0.0
            sizes = [(self.kinds[unit], self.pairs[unit][1].rows * self.pairs[unit][1].n)
                     for unit in sorted(self.seconds)]
            rest = wall_s / scale - makespan(_without_first_calls(clean, sizes), jobs) - compiles / jobs
            series[f"verify.startup@{at}"] = [{"s": max(0.0, rest)}]
        return series

    @calibration.quietly
    def finish(self, wall_s: float) -> bool:
        """Record the run's observations and, on the emulated device, the compiles it made; False when the file
        could not be written."""
        compiled = {}
        if self.device.emulated:
            from lnbench.backends import runs_flydsl
            from lnbench.flydsl import compile_log

            keys = [compile_key(b, c, self.device) for unit, (b, c) in enumerate(self.pairs)
                    if unit in self.seconds and runs_flydsl(b)]
            if keys:
                compiled = {compile_log.cache_identity(): {"files": compile_log.cache_files(), "keys": keys}}
        if self.upfront.key and len(self.seconds) == len(self.pairs):       # a whole run: its kind's history
            upfront.record_run(self.upfront, wall_s)
        return calibration.record(self.observations(wall_s), compiled)
