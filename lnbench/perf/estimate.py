"""How long a perf run will take, from its protocol (the arithmetic of blending with the run: lnbench.run.eta).

A run is P workers per GPU group: their start-ups side by side (STARTUP_S each, on the cores there are), then
their timed turns one after another, each worker every case of its order. One case, per lnbench.measure.timing:
its set-up (inputs: cold mode fills sets of at least cold_factor × the last-level cache; SETUP_S_PER_GB, SET_S), one
first call, a warm-up (at least warmup_s and min_warmup_calls calls, at most 2 × warmup_s), on a GPU one untimed
run, then R runs of I calls (I from choose_iters); with the kernel timer, the same again. A call moves the byte
model's bytes at BANDWIDTH_GBPS (the measured copy peak where there is one) plus a fixed CALL_S; a backward on
the CPU costs CPU_BWD_FACTOR more (autograd's arithmetic, not the bytes). Groups on several GPUs run side by side.

On the emulated device (`perf --device emu`: nothing is timed) each case's launches run once, in a pool of
workers taking the cases in order (in lnbench's own process for one job): a start (MODELLED_STARTUP_S), then per
case its compile (MODELLED_COMPILE_S, or MODELLED_COLD_COMPILE_S where FlyDSL's disk cache lacks its kernels), a
fixed part and a part per element of x by op (MODELLED_COST), handed out in order to the first free worker
(eta.finish_times).

The constants below are only the first guess (PerfCosts(), ModelledCosts()) on a machine that has never run, with
a worker's start-up taken from lnbench's own (calibration.process_age_s: the parent has imported torch and the
backends when it estimates): each finished run records what its parts took (lnbench.run.calibration), and the next
run's constants are fitted from those (lnbench.perf.calibrate).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from lnbench.constants import DTYPES
from lnbench.run.eta import RunningEstimate, busy_threads, finish_times, slowdown
from lnbench.measure.timing import choose_iters
from lnbench.perf.bytes_model import op_bytes
from lnbench.perf.cases import PerfCase
from lnbench.perf.protocol import PerfProtocol
from lnbench.perf.workloads import MAX_SETS

#: one worker's start-up, in seconds of one idle core (importing torch and the backends, the device context)
STARTUP_S = 1.0
#: a case's fixed set-up (building the workload, its first call, freeing it) and its inputs' cost per GB filled, on
#: one idle core: a hot case of 64x256 or 37x1000 took 0.30-0.46 s in all, its 0.2 s warm-up and 0.1 s of runs
#: included, and a cold one 0.5-1.0 s with its 96 MiB of rotated sets (`perf --shape-set tiny` at load 2.8,
#: December 2026: 0.3 s, 5 s/GB and 8e-4 s a set priced them 1.8x long)
SETUP_S, SETUP_S_PER_GB = 0.15, 3.0
#: building one rotated input set of a cold case (its own x and dy, and a forward for a backward's stats): tiny
#: shapes need thousands of sets to fill the cache (at most MAX_SETS)
SET_S = 2.5e-4
#: bytes per second of a call when no copy peak is measured, by device type (CPU: torch's bf16 LayerNorm here)
BANDWIDTH_GBPS = {"cpu": 1.0, "cuda": 2000.0}
#: a call's fixed cost (the launch on a GPU, the dispatch on the CPU)
CALL_S = {"cpu": 2e-5, "cuda": 1e-5}
#: a backward on the CPU takes this many times its bytes' time (autograd's arithmetic, not the bytes)
CPU_BWD_FACTOR = 1.5
#: rotated bytes of a cold case are at least cold_factor × this last-level cache when the device's is not known
LLC_BYTES = {"cpu": 32 << 20, "cuda": 50 << 20}


#: a worker's first case of a backend beyond the case's model, by device type and backend (the first guess): on an
#: NVIDIA H100 a worker's first Liger case (its Triton kernels loaded in that process) took 1.9-2.1 s where its
#: other cases took 0.3-0.6 s (December 2026). Fitted per backend once a run has recorded one (perf.first.BACKEND).
FIRST_USE_S = {"cuda": {"liger": 1.5}}


@dataclass(frozen=True)
class PerfCosts:
    """perf's constants on one machine and device (seconds of one idle core): a worker's start-up; the set-up's
    (fixed, per GB filled, per rotated set); the warm-up as a share of the protocol's; the calls, as recorded per
    case (`case_key` -> seconds) or fitted per backend and op, or per op ("BACKEND OP" or "OP" -> (fixed, per
    byte)), else the byte model's. The first guess is PerfCosts(); lnbench.perf.calibrate fits them."""

    startup_s: float = STARTUP_S
    setup: tuple[float, float, float] = (SETUP_S, SETUP_S_PER_GB, SET_S)
    warmup: float = 1.0
    calls: dict[str, float] = field(default_factory=dict)
    call_fits: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: a worker's first case of a backend beyond its model, by backend (recorded; else FIRST_USE_S)
    first_use: dict[str, float] = field(default_factory=dict)

    def first_use_s(self, backend: str, kind: str) -> float:
        """Seconds a worker's first case of `backend` takes beyond the case's model on a `kind` device."""
        return self.first_use.get(backend, FIRST_USE_S.get(kind, {}).get(backend, 0.0))


FIRST_GUESS = PerfCosts()


def first_of_backend(order: list[PerfCase]) -> list[bool]:
    """Whether each case of a worker's order is its first of that backend (a backend's first use in the process)."""
    seen: set[str] = set()
    firsts = []
    for case in order:
        firsts.append(case.backend not in seen)
        seen.add(case.backend)
    return firsts


def case_key(case: PerfCase) -> str:
    """What a recorded call time is of: `torch fwd bf16 4096x4096 cold`."""
    return f"{case.backend} {case.op} {case.dtype} {case.m}x{case.n} {case.mode}"


def case_bytes(case: PerfCase) -> int:
    """The byte model's bytes of one call of `case`."""
    return op_bytes(case.op, case.m, case.n, DTYPES[case.dtype].itemsize)


def call_seconds(case: PerfCase, kind: str, bandwidth_gbps: float | None = None,
                 costs: PerfCosts = FIRST_GUESS) -> float:
    """Modelled seconds of one call of `case` on an idle device of type `kind` (cpu, cuda): as recorded here for
    this case, else fitted for its backend and op, or its op, else the byte model's."""
    if case_key(case) in costs.calls:
        return costs.calls[case_key(case)]
    for fitted in (f"{case.backend} {case.op}", case.op):
        if fitted in costs.call_fits:
            fixed, per_byte = costs.call_fits[fitted]
            return fixed + per_byte * case_bytes(case)
    seconds = case_bytes(case) / ((bandwidth_gbps or BANDWIDTH_GBPS.get(kind, 1.0)) * 1e9)
    if kind == "cpu" and case.op in ("bwd", "fwd+bwd"):
        seconds *= CPU_BWD_FACTOR
    return CALL_S.get(kind, 1e-5) + seconds


def filled(case: PerfCase, protocol: PerfProtocol, kind: str) -> tuple[float, int]:
    """(bytes of inputs filled, rotated sets) of a case's set-up: cold mode fills at least cold_factor × the
    last-level cache with sets of its inputs (at most MAX_SETS)."""
    nbytes = case_bytes(case)
    if case.mode != "cold":
        return nbytes, 1
    llc = protocol.llc_mib * (1 << 20) or LLC_BYTES.get(kind, 32 << 20)
    sets = min(MAX_SETS, max(2, math.ceil(protocol.cold_factor * llc / nbytes)))
    return max(nbytes, protocol.cold_factor * llc), sets


def setup_seconds(case: PerfCase, protocol: PerfProtocol, kind: str, costs: PerfCosts = FIRST_GUESS) -> float:
    """Modelled seconds of a case's set-up on one idle core: its workload built, its inputs filled, freed."""
    nbytes, sets = filled(case, protocol, kind)
    fixed, per_gb, per_set = costs.setup
    return fixed + per_gb * nbytes / 1e9 + per_set * sets


def warmup_seconds(call: float, protocol: PerfProtocol) -> float:
    """The protocol's warm-up for calls of `call` seconds (at least warmup_s and min_warmup_calls calls, at most
    2 × warmup_s), its first call not counted."""
    return min(max(protocol.warmup_s, protocol.min_warmup_calls * call), 2 * protocol.warmup_s)


def case_seconds(case: PerfCase, protocol: PerfProtocol, kind: str, bandwidth_gbps: float | None = None,
                 scale: float = 1.0, costs: PerfCosts = FIRST_GUESS) -> float:
    """Modelled wall seconds of one worker's turn at `case` (one pass) on a machine `scale` times slower than
    idle: set-up and calls scale, while the warm-up and the runs are bounded in wall time by the protocol."""
    call = call_seconds(case, kind, bandwidth_gbps, costs) * (scale if kind == "cpu" else 1.0)
    warm = warmup_seconds(call, protocol) * costs.warmup + call
    iters = choose_iters(call, protocol.target_run_s, protocol.min_iters, protocol.max_iters, protocol.max_run_s)
    runs = (protocol.runs + (1 if kind == "cuda" else 0)) * iters * call
    return setup_seconds(case, protocol, kind, costs) * scale + call + warm + runs


class PerfEstimate:
    """The wall time of a perf run's groups of workers (`wall_s`), and what is left as workers report cases
    done (`update(group, worker, done)`, `remaining_s`)."""

    def __init__(self, orders: list[list[list[PerfCase]]], protocol: PerfProtocol, kind: str,
                 bandwidth_gbps: float | None = None, kernel_pass: bool = False, others: float | None = None,
                 cpus: int | None = None, costs: PerfCosts = FIRST_GUESS) -> None:
        """orders: per group, per worker, the cases it times in order (with the kernel timer, twice over)."""
        self.others = measured = busy_threads() if others is None else others
        self.scale = scale = slowdown(1, measured, cpus)
        self.workers = workers = sum(len(group) for group in orders)
        self.startup_scale = slowdown(workers, measured, cpus)
        self.startup = costs.startup_s * self.startup_scale if workers else 0.0
        passes = 2 if kernel_pass else 1
        self.costs: list[list[list[float]]] = []
        for group in orders:
            self.costs.append([])
            for order in group:
                plain = [case_seconds(c, protocol, kind, bandwidth_gbps, scale, costs) for c in order]
                first = [cost + (costs.first_use_s(c.backend, kind) if is_first else 0.0)
                         for c, cost, is_first in zip(order, plain, first_of_backend(order))]
                self.costs[-1].append(first + plain * (passes - 1))
        self.done = {(g, w): 0 for g, group in enumerate(orders) for w in range(len(group))}
        self.wall_s = self.startup + max((sum(map(sum, group)) for group in self.costs), default=0.0)
        self.running = RunningEstimate(self.wall_s, in_flight_s=self.startup + self._next(0))

    def _next(self, group: int) -> float:
        """Modelled seconds of the case group `group` times now: its first worker with a case left, that case."""
        for w, costs in enumerate(self.costs[group] if group < len(self.costs) else []):
            if self.done[(group, w)] < len(costs):
                return costs[self.done[(group, w)]]
        return 0.0

    def update(self, group: int, worker: int, done: int) -> None:
        """Worker `worker` of group `group` has reported `done` units (its cases, then again in a kernel pass)."""
        self.done[(group, worker)] = done
        finished = [sum(sum(costs[:self.done[(g, w)]]) for w, costs in enumerate(grp))
                    for g, grp in enumerate(self.costs)]
        longest = max(range(len(finished)), key=finished.__getitem__, default=0)
        self.running.done(self.startup + max(finished, default=0.0), self._next(longest))

    def remaining_s(self) -> float:
        return self.running.remaining_s()


#: a modelled case (perf --device emu) on one idle core of the 2-core development machine, by op: (a fixed part,
#: seconds per element of x), its compile apart. Its launches run once: a forward took 1.1e-7 s per element at
#: 4 M elements and 2.1e-7 s at 16–33 M, a backward 3.6e-7 s at 4 M and 4.6e-7 s at 16 M (December 2026; the
#: table of runs is in docs/running.md)
MODELLED_COST = {"fwd": (0.05, 2.0e-7), "bwd": (0.05, 4.5e-7)}
#: a modelled case's compile, FlyDSL's disk cache warm (with the fixed part above, the 0.2 s a case took beyond
#: its elements), and cold (its two to four kernels compiled: 0.1-0.3 s each more than cached)
MODELLED_COMPILE_S, MODELLED_COLD_COMPILE_S = 0.15, 0.6
#: a modelled run's start left once the estimate is printed, by how it runs: in lnbench's own process (one job:
#: FlyDSL and the emulator imported, the first launch) or in spawned workers (torch imported again in each).
#: Measured after the estimate line of a 64x256 forward: 0.80-0.90 s in process, 2.6-2.8 s in 2 workers on an
#: idle 2-core machine (December 2026), less the case's own 0.2 s
MODELLED_STARTUP_S = {"in process": 0.6, "workers": 2.5}


@dataclass(frozen=True)
class ModelledCosts:
    """`perf --device emu`'s constants on one machine (seconds of one idle core): (fixed, per element) by op, a
    compile warm and cold, the start in process and in workers. The first guess is ModelledCosts()."""

    cases: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(MODELLED_COST))
    compile_s: float = MODELLED_COMPILE_S
    cold_compile_s: float = MODELLED_COLD_COMPILE_S
    startup_s: dict[str, float] = field(default_factory=lambda: dict(MODELLED_STARTUP_S))


def modelled_case_seconds(op: str, m: int, n: int, costs: ModelledCosts | None = None, cold: bool = False) -> float:
    """Modelled seconds of one case of `perf --device emu` on one idle core, its compile (cold or not) included."""
    costs = costs or ModelledCosts()
    fixed, per_element = costs.cases.get(op, costs.cases["bwd"])
    return (costs.cold_compile_s if cold else costs.compile_s) + fixed + per_element * m * n


def how_modelled(jobs: int) -> str:
    """How a modelled run runs its cases: `in process` (one job) or in `workers`."""
    return "in process" if jobs == 1 else "workers"


class ModelledEstimate:
    """The wall time of a `perf --device emu` run (`wall_s`) of cases of `(op, M, N)` in `jobs` workers taking
    them in order, and what is left as cases are reported in that order (`update(done)`, `remaining_s`); `cold`:
    per case, whether FlyDSL's disk cache lacks its kernels (default: every case cached)."""

    def __init__(self, cases: list[tuple[str, int, int]], jobs: int, others: float | None = None,
                 cpus: int | None = None, costs: ModelledCosts | None = None, cold: list[bool] | None = None) -> None:
        costs = costs or ModelledCosts()
        self.others = busy_threads() if others is None else others
        self.scale = slowdown(jobs, self.others, cpus)
        self.finish = finish_times([modelled_case_seconds(*case, costs, bool(cold and cold[i]))
                                    for i, case in enumerate(cases)], jobs)
        self.startup = costs.startup_s[how_modelled(jobs)]
        self.wall_s = (self.startup + max(self.finish, default=0.0)) * self.scale
        self.running = RunningEstimate(self.wall_s, in_flight_s=(self.startup + self._next(0)) * self.scale)

    def _next(self, done: int) -> float:
        """Modelled seconds from the last reported case's finish to the next one's."""
        if done >= len(self.finish):
            return 0.0
        return self.finish[done] - max(self.finish[:done], default=0.0)

    def update(self, done: int) -> None:
        """The first `done` cases are reported (the pool answers in case order)."""
        self.running.done((self.startup + max(self.finish[:done], default=0.0)) * self.scale,
                          max(0.0, self._next(done)) * self.scale)

    def remaining_s(self) -> float:
        return self.running.remaining_s()
