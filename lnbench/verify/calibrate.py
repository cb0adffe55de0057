"""verify's run-time model on this machine: its constants fitted from the runs recorded in the calibration file
(lnbench.run.calibration), and what a finished run records there.

A run records, on the device it ran on (DEVICE: `device_key`), in seconds of one idle core (the wall seconds
divided by the slowdown the run was at, eta.slowdown):

    verify.KIND@DEVICE          each unit that ran (all its rows PASS or FAIL): its seconds less its compiles',
                                x = the elements of its case, b = its backend (emulated kinds); KIND as
                                estimate.unit_kind
    verify.compile@DEVICE       each compile (a backend, dtype, N and eps: estimate.compile_key) FlyDSL's disk
                                cache had: the compile seconds of all its units together
    verify.compile.cold@DEVICE  the same for one that compiled at least one kernel cold
    verify.first.BACKEND@DEVICE off the emulated device, a backend's first unit beyond OUTLIER × the median of its
                                kind and size (BACKEND.cold where its compile cache was cold at the start)
    verify.startup@DEVICE       the rest of the wall time from the estimate line to the end (the start, the
                                finish): wall − the makespan of the units' seconds − the compiles' / jobs
    verify.startup.cold@DEVICE  the same for a run that compiled cold, its workers' first units beyond
                                COLD_FIRST_CALL × their size's median counted as start (a fresh HOME's)

and, on the emulated device, the compiles it made as compiled into FlyDSL's disk cache (compile_log). The next
estimate fits each kind to its units: (fixed, per element) on the host and GPU (calibration.fit: a run of one size
scales the first guess, runs of several sizes fit both); on the emulated device (fixed, per √element, per element)
with a factor per backend, and each size recorded SIZE_UNITS times or more at its own median (`_emulated`: the
emulated units' seconds do not grow smoothly with their elements). It takes the mean compile (what a total of
them comes to: warm ones took 0.001 s or 0.1-0.8 s, and the median priced the total short) and the median start.
"""
from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from lnbench.results.records import Cells

from lnbench.backends import runs_flydsl
from lnbench.run import calibration, upfront
from lnbench.run.calibration import device_key
from lnbench.run.device import Device
from lnbench.run.eta import makespan
from lnbench.verify.cases import Case
from lnbench.verify.estimate import (COLD_COMPILE_S, COMPILE_S, EMULATED_AUTOGRAD, FIRST_GUESS, FIRST_USE_CACHE,
                                     GPU_STARTUP_S, INLINE_EMULATED, first_units, first_use_seconds,
                                     KINDS, STARTUP_S, Estimate, VerifyCosts, compile_key, compile_keys, compile_shares,
                                     shared_units, unit_costs, unit_kind)
from lnbench.verify.summary import status_word


def costs_here(device: Device, recorded: calibration.Calibration | None = None) -> VerifyCosts:
    """The model's constants for `device` on this machine: fitted to the recorded runs (`recorded`, default the
    calibration file's), each kind's first guess where none is recorded (an autograd-3d unit: EMULATED_AUTOGRAD ×
    the fitted 2-D unit; a unit in one process: INLINE_EMULATED × the unit in workers)."""
    cal = calibration.load() if recorded is None else recorded
    at = device_key(device)
    units: dict[str, tuple[float, ...]] = {kind: cal.linear(f"verify.{kind}@{at}", FIRST_GUESS.unit(kind)[:2])
                                           for kind in KINDS if not kind.startswith("emulated")}
    fixed, per_element = FIRST_GUESS.units["emulated"][:2]
    sizes: dict[str, tuple[tuple[float, float], ...]] = {}
    backends = _emulated(cal, at, units, (fixed, 0.0, per_element), "", sizes=sizes)
    for kind in KINDS:
        if cal.get(f"verify.{kind}.inline@{at}") and not kind.startswith("emulated"):
            fixed, per_element = units[kind][:2]
            units[f"{kind}.inline"] = cal.linear(f"verify.{kind}.inline@{at}",
                                                 (fixed * INLINE_EMULATED, per_element * INLINE_EMULATED))
    if cal.get(f"verify.emulated.inline@{at}") or cal.get(f"verify.emulated-autograd.inline@{at}"):
        fixed, per_element, *root = units["emulated"]          # (fixed, per element) where the fit held √ at 0
        per_root = root[0] if root else 0.0
        _emulated(cal, at, units, (fixed * INLINE_EMULATED, per_root * INLINE_EMULATED,
                                   per_element * INLINE_EMULATED), ".inline", backends, sizes)
    return VerifyCosts(units, compile_s=cal.mean(f"verify.compile@{at}", COMPILE_S),
                       cold_compile_s=cal.mean(f"verify.compile.cold@{at}", COLD_COMPILE_S),
                       startup_s=cal.median(f"verify.startup@{at}", GPU_STARTUP_S if device.is_gpu else STARTUP_S),
                       cold_startup_s=cal.median(f"verify.startup.cold@{at}", -1.0),
                       backends=backends, sizes=sizes, first_use=cal.medians("verify.first.", at))


#: a backend's own factor (`VerifyCosts.backends`) is fitted from at least this many of its emulated units
BACKEND_UNITS = 3
#: in a run that compiled FlyDSL kernels cold (a fresh HOME: the emulator's build and trace caches empty too), a
#: worker's first unit beyond this many times the median of its kind and size is the start's (the first units of
#: both workers took 8.2 s, 1.7 s of it compiles, where the others of their size took 0.5-0.7 s), recorded as
#: verify.startup.cold and priced for a run with compiles pending
COLD_FIRST_CALL = 4.0
#: a size's own seconds (`VerifyCosts.sizes`) are the median of at least this many units of the kind at that size
SIZE_UNITS = 3


def _emulated(cal: calibration.Calibration, at: str, units: dict[str, tuple[float, ...]],
              prior: tuple[float, float, float], inline: str, backends: dict[str, float] | None = None,
              sizes: dict[str, tuple[tuple[float, float], ...]] | None = None) -> dict[str, float]:
    """The emulated kinds' costs (`emulated`, `emulated-autograd`, with `inline`'s suffix) fitted into `units` as
    (fixed, per element, per √element), and each backend's factor over them (VerifyCosts.backends; `backends`
    given: kept, not fitted). The shape (calibration.shape_features) is fitted to the units' seconds over their
    backend's factor, the factors to the median of each backend's seconds over the shape, twice: flydsl-atomic's
    units took 0.6× flydsl's and flydsl-tensor's about flydsl's, and a run's sizes are not spread evenly over them."""
    kinds = (f"emulated{inline}", f"emulated-autograd{inline}")
    observed = {kind: [o for o in cal.get(f"verify.{kind}@{at}") if calibration._number(o.get("x"))]
                for kind in kinds}
    fitted = dict(backends or {})

    def autograd(c: tuple[float, float, float]) -> tuple[float, float, float]:
        return c[0] * EMULATED_AUTOGRAD, c[1] * EMULATED_AUTOGRAD, c[2] * EMULATED_AUTOGRAD

    priors = {kinds[0]: prior, kinds[1]: autograd(prior)}
    shapes: dict[str, tuple[float, float, float]] = {}
    for _ in range(2):
        for kind in kinds:
            scaled = calibration.Calibration({kind: [{**o, "s": o["s"] / fitted.get(str(o.get("b")), 1.0)}
                                                     for o in observed[kind]]})
            shapes[kind] = scaled.shape([kind], priors[kind])
            if kind == kinds[0]:
                priors[kinds[1]] = autograd(shapes[kind])
        if backends is not None:
            break
        ratios: dict[str, list[float]] = {}
        for kind in kinds:
            for o in observed[kind]:
                model = sum(c * v for c, v in zip(shapes[kind], calibration.shape_features(o["x"])))
                if model > 0 and isinstance(o.get("b"), str):
                    ratios.setdefault(o["b"], []).append(o["s"] / model)
        everything = sorted(r for values in ratios.values() for r in values)
        if everything:
            middle = statistics.median(everything)
            fitted = {b: statistics.median(values) / middle for b, values in ratios.items()
                      if len(values) >= BACKEND_UNITS and middle > 0}
    for kind in kinds:
        fixed, per_root, per_element = shapes[kind]
        units[kind] = (fixed, per_element, per_root) if per_root else (fixed, per_element)
        by_size: dict[float, list[float]] = {}
        for o in observed[kind]:
            by_size.setdefault(float(o["x"]), []).append(o["s"] / fitted.get(str(o.get("b")), 1.0))
        known = tuple((x, statistics.median(values)) for x, values in sorted(by_size.items())
                      if len(values) >= SIZE_UNITS and statistics.median(values) > 0)
        if sizes is not None and known:
            sizes[kind] = known
    return fitted


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
    cold = bool(compile_keys(units, device) - warm)
    pending = upfront.pending_compiles([b for b, _ in units], device.is_gpu, device.emulated,
                                       cold)
    first = first_use_seconds(units, device, pending, costs)      # each backend's first unit, where it runs
    estimate = Estimate({i: cost + shares.get(i, 0.0) + first.get(i, 0.0)
                         for i, cost in unit_costs(units, device, inline, costs).items()},
                        jobs, startup_s=costs.start(cold))
    key = upfront.run_key("verify", [b for b, _ in units], device_key(device),
                          upfront.size_class(c.rows * c.n for _, c in units))
    work = upfront.work_signature([(backend, repr(case)) for backend, case in units], estimate.jobs, inline)
    ahead = upfront.estimate(key, estimate.wall_s, pending, cal, work, estimate.scale)
    estimate.running.set_prior(ahead.ratio)
    return estimate, VerifyRecord(estimate, units, device, inline, ahead)


def _without_first_calls(seconds: list[float], sizes: list[tuple[str, int]], cap: float = calibration.OUTLIER
                         ) -> list[float]:
    """Units' seconds with what a process's first unit carries beyond its kind (the CUDA context, torch's first
    calls: 2 s on a unit of 3 ms on the H200) left out: each unit at most calibration.OUTLIER times the median of
    the units of its kind and size (a kind and size met once keeps its seconds). What is cut counts as the run's
    start-up. (Against the run's typical ratio to the model instead, a run of small and large units kept the
    small first unit whole: the median ratio was the large units'.)"""
    groups: dict[tuple[str, int], list[float]] = {}
    for value, size in zip(seconds, sizes):
        groups.setdefault(size, []).append(value)
    typical = {size: sorted(values)[len(values) // 2] for size, values in groups.items() if len(values) > 1}
    return [min(value, cap * typical[size]) if size in typical else value for value, size in zip(seconds, sizes)]


class VerifyRecord:
    """What a verify run measures, as it goes (`unit`, `compiled`), recorded at its end (`finish`)."""

    def __init__(self, estimate: Estimate, units: list[tuple[str, Case]], device: Device, inline: bool,
                 ahead: upfront.Upfront | None = None) -> None:
        self.estimate, self.pairs, self.device = estimate, units, device
        self.upfront = ahead or upfront.Upfront("", estimate.wall_s, estimate.wall_s, estimate.wall_s, estimate.wall_s)
        self.kinds = [unit_kind(b, c, device, inline, shared) for (b, c), shared in zip(units, shared_units(units))]
        self.seconds: dict[int, float] = {}
        self.compiles: dict[int, tuple[float, int, int]] = {}

    def unit(self, unit: int, rows: Sequence[Cells], seconds: float) -> None:
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

    def observations(self, wall_s: float) -> dict[str, list[dict[str, Any]]]:
        """The series a run of `wall_s` seconds from the estimate to its end adds (module docstring)."""
        at, scale, jobs = device_key(self.device), self.estimate.scale, self.estimate.jobs
        series: dict[str, list[dict[str, Any]]] = {}
        clean = []
        for unit, seconds in sorted(self.seconds.items()):
            compile_s = self.compiles.get(unit, (0.0, 0, 0))[0] if self.device.emulated else 0.0   # else in units
            backend, case = self.pairs[unit]
            clean.append(max(0.0, seconds - compile_s) / scale)
            observed: dict[str, Any] = {"x": case.rows * case.n, "s": clean[-1]}
            if self.kinds[unit].startswith("emulated"):
                observed["b"] = backend
            series.setdefault(f"verify.{self.kinds[unit]}@{at}", []).append(observed)
        keys: dict[str, tuple[float, int]] = {}            # each compile: all its units' compile seconds, any cold
        for unit, (seconds, _, cold) in self.compiles.items() if self.device.emulated else ():
            if unit in self.seconds and runs_flydsl(self.pairs[unit][0]):
                key = compile_key(*self.pairs[unit], self.device)
                total, colds = keys.get(key, (0.0, 0))
                keys[key] = (total + seconds, colds + cold)
        for seconds, cold in keys.values():
            series.setdefault(f"verify.compile{'.cold' if cold else ''}@{at}", []).append({"s": seconds / scale})
        if len(self.seconds) == len(self.pairs):         # every unit ran: the rest is the start and the finish
            compiles = sum(s for s, _, _ in self.compiles.values()) / scale if self.device.emulated else 0.0
            sizes = [(self.kinds[unit], self.pairs[unit][1].rows * self.pairs[unit][1].n)
                     for unit in sorted(self.seconds)]
            cold = self.device.emulated and any(c for _, _, c in self.compiles.values())
            capped = _without_first_calls(clean, sizes, COLD_FIRST_CALL if cold else calibration.OUTLIER)
            first_use = self._record_first_use(clean, capped, series, at)
            rest = wall_s / scale - makespan(capped, jobs) - compiles / jobs - first_use / jobs
            series[f"verify.startup{'.cold' if cold else ''}@{at}"] = [{"s": max(0.0, rest)}]
        return series

    def _record_first_use(self, clean: list[float], capped: list[float], series: dict[str, list[dict[str, Any]]],
                   at: str) -> float:
        """Off the emulated device, each backend's first unit beyond its cap (clean and capped: the units' seconds
        in unit order) as verify.first.BACKEND[.cold] in `series`; returns their sum (not the start's)."""
        if self.device.emulated:
            return 0.0
        order = {unit: position for position, unit in enumerate(sorted(self.seconds))}
        total = 0.0
        for unit, backend in first_units(self.pairs).items():
            if unit not in order:
                continue
            extra = clean[order[unit]] - capped[order[unit]]
            cold = FIRST_USE_CACHE.get(backend, "") in self.upfront.pending
            series.setdefault(f"verify.first.{backend}{'.cold' if cold else ''}@{at}", []).append({"s": extra})
            total += extra
        return total

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
