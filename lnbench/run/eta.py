"""How long a run will take, before it starts and while it runs: a cost model's prediction, corrected by the run.

A command models its work in seconds of one idle core (verify: lnbench.verify.estimate; perf:
lnbench.perf.estimate) and turns that into wall seconds here: `makespan` spreads the units over its jobs
(longest first, as verify hands them out), `slowdown` scales for a busy machine (more runnable threads than
cores share them, counted at the start: busy_threads), and `RunningEstimate` says what is left while the run goes on.

The running estimate never trusts one observation alone: it scales the modelled seconds left by the ratio of
the wall time so far to the modelled seconds of the work finished so far, with the model itself counted as if
PRIOR_SHARE of the run had already gone exactly as modelled:

    ratio = (prior + elapsed) / (prior + modelled done),   prior = PRIOR_SHARE × modelled total
    left  = ratio × (modelled total − modelled done)

So a first unit that costs 50× its model (a first call's set-up) moves the ratio by little, and after the first
tenth of the work no single unit can move it far: the estimate drifts to the observed rate instead of jumping.
The prior's weight falls as the work is done and is gone at PRIOR_UNTIL of it: from then on the ratio is the
run's own (wall over modelled seconds of the work done), so a model 3× off is not still pulling the time left
toward itself at a quarter of the run. The prior counts at `prior_ratio` (what this machine's earlier runs of the
kind say the model comes to: lnbench.run.upfront), not at 1.

Between two reports the time left counts down: the work in flight (`in_flight_s`, the modelled seconds of what
the workers are running) is credited as done at the last report's rate, up to its modelled size; past that, a
case taking longer than its share makes the time left grow again.
"""
from __future__ import annotations

import heapq
import os
import time
from typing import Callable, Iterable

#: the model counts as this share of the modelled run having gone as modelled (the running ratio's prior)
PRIOR_SHARE = 0.1
#: the prior's weight falls linearly to nothing as this share of the modelled work is done
PRIOR_UNTIL = 0.4


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _running(pid: int) -> bool:
    """Whether process `pid` is running or runnable now (state R in /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "R"
    except (OSError, IndexError):
        return False


def busy_threads(own: Iterable[int] = (), samples: int = 10, interval_s: float = 0.005) -> float:
    """Runnable threads of other work on this machine now: the kernel's count of running tasks (procs_running in
    /proc/stat), averaged over a few samples, less this process and those of `own` (pids: workers already
    started) that are running; the 1-minute load average where there is no /proc. The load average lags a
    minute: after a busy spell it still counts threads that have finished (a previous run's workers), and an
    estimate made from it came out 2.5× long when the load fell from 12 to 8."""
    own = list(own)
    counts = []
    for i in range(samples):
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                running = [int(line.split()[1]) for line in stat if line.startswith("procs_running")]
        except (OSError, ValueError, IndexError):
            break
        counts += [n - 1 - sum(map(_running, own)) for n in running]
        if i + 1 < samples:
            time.sleep(interval_s)
    if counts:
        return max(0.0, sum(counts) / len(counts))
    try:
        return max(0.0, os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def slowdown(threads: int, others: float | None = None, cpus: int | None = None) -> float:
    """How many times slower than on an idle machine a run of `threads` busy threads goes next to `others`
    runnable threads of other work (busy_threads when None): the runnable threads per core, at least 1."""
    if others is None:
        others = busy_threads()
    return max(1.0, (max(0.0, others) + max(1, threads)) / max(1, cpus or cores()))


def makespan(costs: Iterable[float], jobs: int) -> float:
    """Seconds until `jobs` workers finish `costs` handed out longest first (each to the first free worker)."""
    return max(finish_times(sorted(costs, reverse=True), jobs), default=0.0)


def finish_times(costs: Iterable[float], jobs: int) -> list[float]:
    """When each of `costs`, handed out in this order to the first free of `jobs` workers, is finished (a pool
    taking its tasks in the order they were submitted)."""
    free = [0.0] * max(1, jobs)
    done = []
    for cost in costs:
        done.append(heapq.heappop(free) + cost)
        heapq.heappush(free, done[-1])
    return done


class RunningEstimate:
    """Seconds left of a run whose whole is modelled as `total_s` wall seconds; `done(s)` reports the modelled
    wall seconds of the work finished so far (and of the work in flight)."""

    def __init__(self, total_s: float, clock: Callable[[], float] | None = None, prior_ratio: float = 1.0,
                 in_flight_s: float = 0.0) -> None:
        self.total_s = max(0.0, total_s)
        self.done_s = 0.0
        self.prior_ratio = prior_ratio if prior_ratio > 0 else 1.0
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.in_flight_s, self._reported, self._rate = max(0.0, in_flight_s), self.start, self.prior_ratio

    def set_prior(self, ratio: float) -> None:
        """What the model's seconds come to on this machine (lnbench.run.upfront: its earlier runs of the kind)."""
        if ratio > 0:
            self.prior_ratio = ratio
            self._rate = self._ratio_at(self._reported, 0.0)

    def done(self, modelled_s: float, in_flight_s: float = 0.0) -> None:
        """The modelled wall seconds of all the work finished so far (not an increment), and of the work that is
        running now (credited between reports)."""
        self.done_s = min(self.total_s, max(0.0, modelled_s))
        self.in_flight_s, self._reported = max(0.0, in_flight_s), self.clock()
        self._rate = self._ratio_at(self._reported, 0.0)

    def _credit(self, now: float) -> float:
        """Modelled seconds of the work in flight counted as done: the time since the last report at its rate."""
        return min(self.in_flight_s, max(0.0, now - self._reported) / self._rate, self.total_s - self.done_s)

    def _ratio_at(self, now: float, credit: float) -> float:
        done = self.done_s + credit
        weight = max(0.0, 1.0 - done / (PRIOR_UNTIL * self.total_s)) if self.total_s > 0 else 0.0
        prior = PRIOR_SHARE * self.total_s * weight
        if prior + done <= 0:
            return self.prior_ratio
        return (prior * self.prior_ratio + max(0.0, now - self.start)) / (prior + done)

    @property
    def ratio(self) -> float:
        """Observed over modelled seconds so far, the model weighing PRIOR_SHARE of the run until PRIOR_UNTIL."""
        now = self.clock()
        return self._ratio_at(now, self._credit(now))

    def remaining_s(self) -> float:
        """Wall seconds left: the modelled seconds left (less the work in flight's credit), scaled by `ratio`."""
        now = self.clock()
        credit = self._credit(now)
        return self._ratio_at(now, credit) * max(0.0, self.total_s - self.done_s - credit)


def announce(wall_s: float, what: str, others: float) -> str:
    """The line a command prints before it starts: `estimated time: ~130 s (60 cases, 2 jobs; 7 other busy
    threads on 2 cores)`; `what` is the part in brackets before the load, `others` the busy threads counted."""
    from lnbench.output.tables import fmt_duration

    shown = f"{wall_s:.0f} s" if wall_s < 600 else fmt_duration(wall_s)     # seconds: rounding to minutes costs 1.2×
    return f"estimated time: ~{shown} ({what}; {others:.0f} other busy threads on {cores()} cores)"
