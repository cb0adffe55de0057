"""Does a step in a timed series stand out against its noise? The test behind history's change points.

e-divisive (lnbench.history.changes) says where a series most likely changed; this module says whether that
change is bigger than what the series does without one. A run's value carries two kinds of noise:

- within the run: its worker processes' medians spread (a host-bound case: 95-223 us in one run); the run's value
  is their median, so it carries about their spread over the square root of their count;
- between runs: the machine's state moves from run to run (clocks, the host's timing), which the workers of one
  run all share. It is the standard deviation of the run values around the median of their stretch, the stretches
  cut where e-divisive found a candidate change (so a step does not count as noise; a shift the machine made inside
  a commit does, and an outlier run too: both make the test more careful, never less).

A run value's noise is the larger of the two, on the log scale (a relative noise), never under MIN_SIGMA. A step
between the runs before a change point and those after it is the log ratio of their levels (the median of the
segment's worker medians, pooled over its runs, so runs of one commit count together); its standard error is
1.2533 (a median's) x noise x sqrt(1/runs before + 1/runs after), its p two-sided from Student's t with the
series' runs - 2 degrees of freedom, multiplied by the number of places the change could have been at (the
commit boundaries e-divisive chose among: a best-of-K place is tested at K times its p). Across the series one
history reads, the p values are adjusted by Benjamini-Hochberg at a false discovery rate of FDR_Q.

The smallest step the test can find in a series (its detectable size) follows from the same numbers: a step
must be (t at the adjusted level + t at POWER) standard errors to be found POWER of the time."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special

#: the false discovery rate over the series of one history (Benjamini-Hochberg)
FDR_Q = 0.05
#: the share of steps of the detectable size the test finds
POWER = 0.8
#: no measured series is steadier than this (relative SD of a run's value): a store of values printed to few
#: digits (FlyDSL's TB/s) can repeat exactly, and a zero noise would make any step significant
MIN_SIGMA = 0.001
#: a median's standard error over a mean's, for normal noise
MEDIAN_SE = 1.2533
#: the method in words (history's run record, its summary line and the report)
METHOD_TEXT = (f"e-divisive at commit boundaries; each change tested against the within-run and run-to-run noise "
               f"(t on run medians, p x places searched); Benjamini-Hochberg FDR {FDR_Q:g} over the series")


@dataclass(frozen=True)
class Noise:
    """A series' noise on the log scale (relative SD of one run's value)."""

    sigma: float          # what a run's value carries: max(between, within, MIN_SIGMA)
    between: float        # run to run, from successive differences
    within: float         # the workers' spread inside a run over sqrt(workers)
    runs: int

    @property
    def pct(self) -> float:
        """About 95% of the runs fall within ± this many % of the level (2 SD)."""
        return (math.exp(2 * self.sigma) - 1) * 100

    @property
    def df(self) -> int:
        return max(self.runs - 2, 1)


@dataclass(frozen=True)
class Step:
    """One change tested: the ratio after/before with its 95% interval, t and p (p already x places)."""

    ratio: float
    low: float
    high: float
    t: float
    p: float
    runs_before: int
    runs_after: int


def worker_values(text: object) -> list[float]:
    """A point's worker medians (the store's JSON list; [] when it has none)."""
    if not isinstance(text, str) or not text:
        return []
    try:
        values = [float(v) for v in json.loads(text)]
    except (TypeError, ValueError):
        return []
    return [v for v in values if v > 0 and math.isfinite(v)]


def noise(values: Sequence[float], workers: Sequence[Sequence[float]], bounds: Sequence[int] = ()) -> Noise:
    """The noise of a series of positive run values, each with its workers' values (maybe none); `bounds`: the
    first index of each stretch after a candidate change (the runs are compared with their stretch's median)."""
    logs = np.log(np.asarray(values, dtype=float))
    edges = [0, *sorted(b for b in bounds if 0 < b < len(logs)), len(logs)]
    residuals = np.concatenate([logs[a:b] - np.median(logs[a:b]) for a, b in zip(edges, edges[1:]) if b > a])
    free = len(logs) - (len(edges) - 1)
    between = float(math.sqrt(np.sum(residuals ** 2) / free)) if free > 0 else 0.0
    spreads = [np.var(np.log(w), ddof=1) for w in workers if len(w) >= 2]
    counts = [len(w) for w in workers if len(w) >= 2]
    within = float(math.sqrt(np.median(spreads) / np.median(counts))) if spreads else 0.0
    return Noise(max(between, within, MIN_SIGMA), between, within, len(values))


def level(values: Sequence[float], workers: Sequence[Sequence[float]]) -> float:
    """A segment's level: the median of its runs' values (each run's value is already its workers' median; the
    runs of one commit count together). `workers` only carry the noise (noise())."""
    return float(np.median(values))


def step(before: tuple[Sequence[float], Sequence[Sequence[float]]],
         after: tuple[Sequence[float], Sequence[Sequence[float]]], series_noise: Noise, places: int = 1) -> Step:
    """The step from the runs `before` to those `after` (values, workers), in a series of that noise."""
    n1, n2 = len(before[0]), len(after[0])
    d = math.log(level(*after) / level(*before))
    se = MEDIAN_SE * series_noise.sigma * math.sqrt(1 / n1 + 1 / n2)
    t = d / se
    p = min(1.0, 2 * _t_sf(abs(t), series_noise.df) * max(places, 1))
    half = _t_ppf(0.975, series_noise.df) * se
    return Step(math.exp(d), math.exp(d - half), math.exp(d + half), t, p, n1, n2)


def detectable_pct(series_noise: Noise, runs_before: int, runs_after: int, alpha: float) -> float:
    """The smallest step (%, as a slowdown of a time) that a test at level `alpha` finds POWER of the time."""
    if runs_before < 1 or runs_after < 1:
        return math.inf
    df = series_noise.df
    z = _t_ppf(1 - alpha / 2, df) + _t_ppf(POWER, df)
    se = MEDIAN_SE * series_noise.sigma * math.sqrt(1 / runs_before + 1 / runs_after)
    return (math.exp(z * se) - 1) * 100


def adjusted(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p values, in the order given: p x m / rank, made monotone from the largest
    down, at most 1. scipy.stats.false_discovery_control computes the same (tests/test_history_gate.py checks it),
    but importing scipy.stats costs `history` 0.5-1 s on this 2-core machine (scipy.special: 0.3 s)."""
    p = np.asarray(p_values, dtype=float)
    if not len(p):
        return []
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    out = np.empty_like(p)
    out[order] = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    return [float(q) for q in out]


def _t_sf(t: float, df: int) -> float:
    """Student's t survival function (scipy.special.stdtr: the t CDF)."""
    return float(special.stdtr(df, -t))


def _t_ppf(q: float, df: int) -> float:
    """Student's t quantile (scipy.special.stdtrit)."""
    return float(special.stdtrit(df, q))
