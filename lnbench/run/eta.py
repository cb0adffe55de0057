"""How long a run will take, before it starts and while it runs: a cost model's prediction, corrected by the run.

A command models its work in seconds of one idle core (verify: lnbench.verify.estimate; perf:
lnbench.perf.estimate) and turns that into wall seconds here: `makespan` spreads the units over its jobs
(longest first, as verify hands them out), `slowdown` scales for a busy machine (more runnable threads than
cores share them, counted at the start: busy_threads), and `RunningEstimate` says what is left while the run goes on.

The load at the start is a reading of a moment, and it may leave as soon as the run starts (other developers' test
suites come and go): `busy_threads` averages the count of running tasks now with the 1-minute load average, and
`slowdown` lets the load multiply the estimate by LOAD_CAP at most. A held-out perf read 8 busy threads at its
start on 2 cores, was priced 5× slower than idle, and came out 1.93× long once they had gone.

The running estimate prices what is left at the rate of the recent work: wall seconds per modelled second,
averaged over the work done with the newest weighing most (an exponentially weighted rate, as tqdm and rich smooth
theirs). Each stretch of work between two reports adds its modelled seconds m and its wall seconds w to two sums W
and M that first decay by exp(-m / window), the window being WINDOW of the modelled total (or WINDOW_UNITS mean
units, where the units are few):

    rate = (W + prior × prior_ratio) / (M + prior),   prior = PRIOR_SHARE × modelled total × exp(-done / window)
    left = rate × (modelled total − modelled done)

So each remaining unit is priced at its modelled cost times the speed of about the last tenth of the work: a load
that arrives or leaves mid-run is followed within about two windows of work (tests/test_eta.py replays one). A
report's w counts at most CLIP times what the rate put it at (and at least 1/CLIP): one unit far over its model
(a first call's set-up, a cold compile) moves the rate by that much at most, while a load that stays moves it on
with each report. The model (at `prior_ratio`: what this machine's earlier runs of the kind say its seconds come
to, lnbench.run.upfront) is the prior: it counts as PRIOR_SHARE of the run done as modelled and fades with the
work done, to under a tenth of the rate's weight at a quarter of the run (0.8% of the run against about 9%).

Between two reports the time left counts down: the work in flight (`in_flight_s`, the modelled seconds of what
the workers are running) is credited as done at the current rate, up to its modelled size; past that, a case
taking longer than its share makes the rate, and the time left, grow again, and its credit falls to the share of it
the time expected is of the time taken (a last case overdue showed `~1 s left` for 6 s while all of it was credited).
"""
from __future__ import annotations

import heapq
import json
import math
import os
import time
from typing import Callable, Iterable

#: the model counts as this share of the modelled run having gone as modelled (the running rate's prior)
PRIOR_SHARE = 0.1
#: a report's wall seconds count at most this many times (at least 1/this) what the rate so far puts them at: one
#: unit far over its model (a first call, a cold compile) moves the rate by that much at most
CLIP = 3.0
#: the running rate's memory: work this share of the modelled total back weighs 1/e of the newest
WINDOW = 0.1
#: ... or, where the units are few, the mean unit this many times over (a rate of fewer is one unit's noise)
WINDOW_UNITS = 4
#: set to a file's path: each report of work done and each time left asked for is appended to it as a JSON line
#: (the clock, the modelled seconds done and in flight, the rate, the time left): why a run's "~left" was off
TRACE_VAR = "LNBENCH_ETA_TRACE"

#: the most the load counted at the start may multiply a run's modelled time by (beyond its own threads per core):
#: a load that stays is learnt by this machine's history of the kind (lnbench.run.upfront) and the running rate
LOAD_CAP = 2.0


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
    """Runnable threads of other work on this machine: the kernel's count of running tasks now (procs_running in
    /proc/stat, averaged over a few samples, less this process and those of `own`, pids of workers already
    started, that are running), averaged with the 1-minute load average. Either alone misled: the
    count now caught 8 threads of a test suite that were gone a second later (an estimate 1.93× long); the load
    average lags a minute and still counts a previous run's finished workers (2.5× long as it fell from 12 to 8).
    The load average alone where there is no /proc."""
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
    try:
        lagging: float | None = max(0.0, os.getloadavg()[0])        # this run's own start has hardly counted yet
    except (AttributeError, OSError):
        lagging = None
    readings = ([max(0.0, sum(counts) / len(counts))] if counts else []) + ([lagging] if lagging is not None else [])
    return sum(readings) / len(readings) if readings else 0.0


def slowdown(threads: int, others: float | None = None, cpus: int | None = None) -> float:
    """How many times slower than on an idle machine a run of `threads` busy threads goes next to `others`
    runnable threads of other work (busy_threads when None): the runnable threads per core, at least 1, and at
    most LOAD_CAP × what its own threads alone come to (the load counted at the start may leave)."""
    if others is None:
        others = busy_threads()
    cpus = max(1, cpus or cores())
    own = max(1.0, max(1, threads) / cpus)
    return min(LOAD_CAP * own, max(1.0, (max(0.0, others) + max(1, threads)) / cpus))


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
    wall seconds of the work finished so far (and of the work in flight). The rate is the module docstring's."""

    def __init__(self, total_s: float, clock: Callable[[], float] | None = None, prior_ratio: float = 1.0,
                 in_flight_s: float = 0.0) -> None:
        self.total_s = max(0.0, total_s)
        self.done_s = 0.0
        self.prior_ratio = prior_ratio if prior_ratio > 0 else 1.0
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.wall_sum = self.model_sum = 0.0          # the decayed sums of the work reported: wall, modelled seconds
        self.steps = 0                                # the reports of new work
        self.in_flight_s, self._reported = max(0.0, in_flight_s), self.start

    def set_prior(self, ratio: float) -> None:
        """What the model's seconds come to on this machine (lnbench.run.upfront: its earlier runs of the kind)."""
        if ratio > 0:
            self.prior_ratio = ratio

    def _decay(self, modelled_s: float) -> float:
        """The weight left to what was done `modelled_s` modelled seconds ago."""
        window = max(WINDOW * self.total_s, WINDOW_UNITS * self.done_s / max(1, self.steps))
        return math.exp(-modelled_s / window) if window > 0 else 0.0

    def _prior(self, done_s: float) -> float:
        """The modelled seconds the prior counts as with `done_s` done: PRIOR_SHARE of the total, fading."""
        fade = WINDOW * self.total_s
        return PRIOR_SHARE * self.total_s * math.exp(-done_s / fade) if fade > 0 else 0.0

    def done(self, modelled_s: float, in_flight_s: float = 0.0) -> None:
        """The modelled wall seconds of all the work finished so far (not an increment), and of the work that is
        running now (credited between reports). A report of no new work keeps the time since the last one open."""
        now, modelled_s = self.clock(), min(self.total_s, max(0.0, modelled_s))
        step = modelled_s - self.done_s
        if step > 0:
            decay, expected = self._decay(step), self._rate() * step
            took = min(CLIP * expected, max(expected / CLIP, now - self._reported))
            self.wall_sum = self.wall_sum * decay + took
            self.model_sum = self.model_sum * decay + step
            self.done_s, self._reported, self.steps = modelled_s, now, self.steps + 1
        self.in_flight_s = max(0.0, in_flight_s)
        self._trace("done", now)

    def _trace(self, event: str, now: float, left: float | None = None) -> None:
        """Append this estimate's state to $LNBENCH_ETA_TRACE (nothing when it is unset or cannot be written)."""
        path = os.environ.get(TRACE_VAR)
        if not path:
            return
        state = {"event": event, "t": round(now - self.start, 3), "total": round(self.total_s, 3),
                 "done": round(self.done_s, 3), "in_flight": round(self.in_flight_s, 3),
                 "rate": round(self._rate(), 4), "left": None if left is None else round(left, 3)}
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(state) + "\n")
        except OSError:
            pass

    def _rate(self, wall: float = 0.0, model: float = 0.0) -> float:
        """Wall over modelled seconds: the decayed sums with `model` seconds done in `wall` more, and the prior."""
        decay = self._decay(model)
        prior = self._prior(self.done_s + model)
        weight = self.model_sum * decay + model + prior
        if weight <= 0:
            return self.prior_ratio
        return (self.wall_sum * decay + wall + prior * self.prior_ratio) / weight

    def _now(self) -> tuple[float, float]:
        """(rate, credit) now: the work in flight credited as done for the time since the last report at the
        reported rate, up to its modelled size; once it has run longer than that (`expected`), only the share
        expected / gap of it (it is going that much slower), so the time left of a last unit overdue grows."""
        gap = max(0.0, self.clock() - self._reported)
        expected = self.in_flight_s * self._rate()
        credit = min(self.in_flight_s * expected / gap if gap > expected else gap / self._rate(),
                     self.total_s - self.done_s)
        return self._rate(gap, credit), credit

    @property
    def ratio(self) -> float:
        """The wall seconds a modelled second takes now (the module docstring's rate)."""
        return self._now()[0]

    def remaining_s(self) -> float:
        """Wall seconds left: the modelled seconds left (less the work in flight's credit) at the current rate."""
        rate, credit = self._now()
        left = rate * max(0.0, self.total_s - self.done_s - credit)
        if os.environ.get(TRACE_VAR):
            self._trace("left", self.clock(), left)
        return left


def announce(wall_s: float, what: str, others: float) -> str:
    """The line a command prints before it starts: `estimated time: ~130 s (60 cases, 2 jobs; 7 other busy
    threads on 2 cores)`; `what` is the part in brackets before the load, `others` the busy threads counted."""
    from lnbench.output.tables import fmt_duration

    shown = f"{wall_s:.0f} s" if wall_s < 600 else fmt_duration(wall_s)     # seconds: rounding to minutes costs 1.2×
    return f"estimated time: ~{shown} ({what}; {others:.0f} other busy threads on {cores()} cores)"
