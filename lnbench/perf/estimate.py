"""How long a perf run will take, from its protocol (the arithmetic of blending with the run: lnbench.eta).

A run is P workers per GPU group: their start-ups side by side (STARTUP_S each, on the cores there are), then
their timed turns one after another, each worker every case of its order. One case, per lnbench.measure.timing:
its set-up (inputs: cold mode fills sets of at least cold_factor × the last-level cache; SETUP_S_PER_GB, SET_S), one
first call, a warm-up (at least warmup_s and min_warmup_calls calls, at most 2 × warmup_s), on a GPU one untimed
run, then R runs of I calls (I from choose_iters); with the kernel timer, the same again. A call moves the byte
model's bytes at BANDWIDTH_GBPS (the measured copy peak where there is one) plus a fixed CALL_S; a backward on
the CPU costs CPU_BWD_FACTOR more (autograd's arithmetic, not the bytes). Groups on several GPUs run side by side.

On the emulated device (`perf --device emu`: nothing is timed) each case's launches run once, in a pool of
workers taking the cases in order (in lnbench's own process for one job): a start (MODELLED_STARTUP_S), then per
case a fixed part and a part per element of x by op (MODELLED_COST), handed out in order to the first free worker
(eta.finish_times).
"""
from __future__ import annotations

import math

from lnbench.constants import DTYPES
from lnbench.eta import RunningEstimate, busy_threads, finish_times, slowdown
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


def call_seconds(case: PerfCase, kind: str, bandwidth_gbps: float | None = None) -> float:
    """Modelled seconds of one call of `case` on an idle device of type `kind` (cpu, cuda)."""
    nbytes = op_bytes(case.op, case.m, case.n, DTYPES[case.dtype].itemsize)
    seconds = nbytes / ((bandwidth_gbps or BANDWIDTH_GBPS.get(kind, 1.0)) * 1e9)
    if kind == "cpu" and case.op in ("bwd", "fwd+bwd"):
        seconds *= CPU_BWD_FACTOR
    return CALL_S.get(kind, 1e-5) + seconds


def case_seconds(case: PerfCase, protocol: PerfProtocol, kind: str, bandwidth_gbps: float | None = None,
                 scale: float = 1.0) -> float:
    """Modelled wall seconds of one worker's turn at `case` (one pass) on a machine `scale` times slower than
    idle: set-up and calls scale, while the warm-up and the runs are bounded in wall time by the protocol."""
    call = call_seconds(case, kind, bandwidth_gbps) * (scale if kind == "cpu" else 1.0)
    nbytes = op_bytes(case.op, case.m, case.n, DTYPES[case.dtype].itemsize)
    llc = protocol.llc_mib * (1 << 20) or LLC_BYTES.get(kind, 32 << 20)
    sets = min(MAX_SETS, max(2, math.ceil(protocol.cold_factor * llc / nbytes))) if case.mode == "cold" else 1
    filled = max(nbytes, protocol.cold_factor * llc) if case.mode == "cold" else nbytes
    warm = min(max(protocol.warmup_s, protocol.min_warmup_calls * call), 2 * protocol.warmup_s) + call
    iters = choose_iters(call, protocol.target_run_s, protocol.min_iters, protocol.max_iters, protocol.max_run_s)
    runs = (protocol.runs + (1 if kind == "cuda" else 0)) * iters * call
    return (SETUP_S + SETUP_S_PER_GB * filled / 1e9 + SET_S * sets) * scale + call + warm + runs


class PerfEstimate:
    """The wall time of a perf run's groups of workers (`wall_s`), and what is left as workers report cases
    done (`update(group, worker, done)`, `remaining_s`)."""

    def __init__(self, orders: list[list[list[PerfCase]]], protocol: PerfProtocol, kind: str,
                 bandwidth_gbps: float | None = None, kernel_pass: bool = False, others: float | None = None,
                 cpus: int | None = None) -> None:
        """orders: per group, per worker, the cases it times in order (with the kernel timer, twice over)."""
        self.others = measured = busy_threads() if others is None else others
        scale = slowdown(1, measured, cpus)
        workers = sum(len(group) for group in orders)
        self.startup = STARTUP_S * slowdown(workers, measured, cpus) if workers else 0.0
        passes = 2 if kernel_pass else 1
        self.costs = [[[case_seconds(c, protocol, kind, bandwidth_gbps, scale) for c in order] * passes
                       for order in group] for group in orders]
        self.done = {(g, w): 0 for g, group in enumerate(orders) for w in range(len(group))}
        self.wall_s = self.startup + max((sum(map(sum, group)) for group in self.costs), default=0.0)
        self.running = RunningEstimate(self.wall_s)

    def update(self, group: int, worker: int, done: int) -> None:
        """Worker `worker` of group `group` has reported `done` units (its cases, then again in a kernel pass)."""
        self.done[(group, worker)] = done
        finished = max((sum(sum(costs[:self.done[(g, w)]]) for w, costs in enumerate(grp))
                        for g, grp in enumerate(self.costs)), default=0.0)
        self.running.done(self.startup + finished)

    def remaining_s(self) -> float:
        return self.running.remaining_s()


#: a modelled case (perf --device emu) on one idle core of the 2-core development machine, by op: (a fixed part:
#: the compile, FlyDSL's disk cache warm; seconds per element of x). Its launches run once: a forward took
#: 1.1e-7 s per element at 4 M elements and 2.1e-7 s at 16–33 M, a backward 3.6e-7 s at 4 M and 4.6e-7 s at 16 M
#: (December 2026; the table of runs is in docs/running.md)
MODELLED_COST = {"fwd": (0.2, 2.0e-7), "bwd": (0.2, 4.5e-7)}
#: a modelled run's start left once the estimate is printed, by how it runs: in lnbench's own process (one job:
#: FlyDSL and the emulator imported, the first launch) or in spawned workers (torch imported again in each).
#: Measured after the estimate line of a 64x256 forward: 0.80-0.90 s in process, 2.6-2.8 s in 2 workers on an
#: idle 2-core machine (December 2026), less the case's own 0.2 s
MODELLED_STARTUP_S = {"in process": 0.6, "workers": 2.5}


def modelled_case_seconds(op: str, m: int, n: int) -> float:
    """Modelled seconds of one case of `perf --device emu` on one idle core."""
    fixed, per_element = MODELLED_COST.get(op, MODELLED_COST["bwd"])
    return fixed + per_element * m * n


class ModelledEstimate:
    """The wall time of a `perf --device emu` run (`wall_s`) of cases of `(op, M, N)` in `jobs` workers taking
    them in order, and what is left as cases are reported in that order (`update(done)`, `remaining_s`)."""

    def __init__(self, cases: list[tuple[str, int, int]], jobs: int, others: float | None = None,
                 cpus: int | None = None) -> None:
        self.others = busy_threads() if others is None else others
        self.scale = slowdown(jobs, self.others, cpus)
        self.finish = finish_times([modelled_case_seconds(*case) for case in cases], jobs)
        self.startup = MODELLED_STARTUP_S["in process" if jobs == 1 else "workers"]
        self.wall_s = (self.startup + max(self.finish, default=0.0)) * self.scale
        self.running = RunningEstimate(self.wall_s)

    def update(self, done: int) -> None:
        """The first `done` cases are reported (the pool answers in case order)."""
        self.running.done((self.startup + max(self.finish[:done], default=0.0)) * self.scale)

    def remaining_s(self) -> float:
        return self.running.remaining_s()
