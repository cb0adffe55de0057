"""A/B statistics of repeated timings: abi-compare's paired bootstrap (speed-up, interval, Mann–Whitney U), the
paired worker interval of `compare`, and the worker flags of `perf`. Both comparisons say their verdict in the
shared words of lnbench.results.verdicts.

The two sides are BASE and NEW (abi-compare: BASE = the Tensor ABI, NEW = the Pointer ABI). Input per
measurement: for each worker process, the R per-run µs/call values of each side, measured in the same
process (ABBA order), so the two sides are *paired by worker*. The headline speed-up is

    speedup = median of BASE worker medians / median of NEW worker medians

(> 1: NEW is faster; abi-compare's Pointer ABI, the seed's "1.23× throughput"). Its interval comes from a
*paired bootstrap*, two-level, with a fixed seed: resample workers (both sides together, keeping the
pairing), then runs inside each chosen worker, and recompute the ratio of medians. The verdict (verdicts.judge
of the time ratio, the inverse interval) is SAME when the interval contains 1.0 (a difference inside the
noise), else FASTER/SLOWER.

`lnbench compare` judges two *separate* invocations instead (worker_ratio_interval): there the runs inside one
worker process are correlated (same process, same memory layout, same minute of machine load), so resampling
them as if independent gives intervals far too narrow. Its unit is the worker median: a paired interval of
the log ratio of worker medians, worker w of NEW against worker w of BASE, widened by the run noise floor
(what separates two invocations that none of one invocation's workers can show).
"""
from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lnbench.output.tables import plain_number
from lnbench.results.verdicts import Verdict, judge


@dataclass(frozen=True)
class RatioEstimate:
    """Speed-up of the NEW side over the BASE side (time_base / time_new), its paired bootstrap interval and
    verdict."""

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float          # Mann–Whitney U, two-sided, on the pooled per-run values (informational)
    verdict: Verdict

    @property
    def slowdown_pct(self) -> float:
        """How much slower the NEW side is, in percent of the BASE time (negative: faster)."""
        return (1.0 / self.speedup - 1.0) * 100.0 if self.speedup > 0 else math.inf


def worker_medians(runs_per_worker: Sequence[Sequence[float]]) -> list[float]:
    """Median of each worker's run values."""
    return [float(np.median(runs)) for runs in runs_per_worker]


def across_workers(medians: Sequence[float]) -> tuple[float, float, float]:
    """The headline figure and its range: (median, min, max) of the worker medians (non-empty)."""
    return float(statistics.median(medians)), float(min(medians)), float(max(medians))


def _rectangular(runs_per_worker: Sequence[Sequence[float]]) -> np.ndarray:
    """Workers × runs array; ragged inputs are cut to the shortest worker (rare: a partial worker)."""
    shortest = min(len(r) for r in runs_per_worker)
    if shortest == 0:
        raise ValueError("a worker reported no run values")
    return np.array([list(r)[:shortest] for r in runs_per_worker], dtype=float)


def bootstrap_speedup(base_runs: Sequence[Sequence[float]], new_runs: Sequence[Sequence[float]], *,
                      n_boot: int = 4000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(speed-up, low, high): paired two-level percentile bootstrap of the ratio of medians of medians.

    `base_runs[w]` and `new_runs[w]` are the per-run µs values of worker w for each side.
    """
    if len(base_runs) != len(new_runs) or not base_runs:
        raise ValueError("both sides need run values from the same, non-empty set of workers")
    t, p = _rectangular(base_runs), _rectangular(new_runs)
    point = float(np.median(np.median(t, axis=1)) / np.median(np.median(p, axis=1)))
    rng = np.random.default_rng(seed)
    workers = t.shape[0]
    pick = rng.integers(0, workers, size=(n_boot, workers))            # same workers for both sides

    def resampled(values: np.ndarray) -> np.ndarray:
        runs = values.shape[1]
        inner = rng.integers(0, runs, size=(n_boot, workers, runs))
        chosen = values[pick[:, :, None], inner]                         # n_boot × workers × runs
        return np.median(np.median(chosen, axis=2), axis=1)

    ratios = resampled(t) / resampled(p)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return point, float(low), float(high)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann–Whitney U p-value: exact for small samples, normal approximation (tie-corrected) else."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return math.nan
    pooled = np.array(a + b)
    ranks = _ranks(pooled)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    mean_u = n1 * n2 / 2.0
    if math.comb(n1 + n2, n1) <= 20000 and len(set(pooled.tolist())) == n1 + n2:
        # exact null distribution of U: every way of choosing which ranks belong to sample a
        observed = abs(u1 - mean_u)
        total = extreme = 0
        for combo in itertools.combinations(range(1, n1 + n2 + 1), n1):
            u = sum(combo) - n1 * (n1 + 1) / 2
            total += 1
            extreme += abs(u - mean_u) >= observed - 1e-9
        return extreme / total
    _, counts = np.unique(pooled, return_counts=True)
    n = n1 + n2
    tie = float((counts ** 3 - counts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie)
    if var <= 0:
        return 1.0
    z = (abs(u1 - mean_u) - 0.5) / math.sqrt(var)                       # continuity correction
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    return pd.Series(values).rank(method="average").to_numpy()


def speedup_verdict(ci_low: float, ci_high: float) -> Verdict:
    """The verdict of a speed-up interval (BASE/NEW time): verdicts.judge of the NEW/BASE time ratio's interval,
    [1 / ci_high, 1 / ci_low]: SAME when it contains 1, FASTER when the speed-up lies above 1, else SLOWER."""
    def inverse(x: float) -> float:
        return 1.0 / x if x > 0 else math.inf
    return judge(inverse(ci_high), inverse(ci_low))


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided Mann–Whitney p that n_a against n_b runs can give: every run of one side below
    every run of the other, 2 of the C(n_a + n_b, n_a) equally likely orders."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def too_few(n_a: int, n_b: int, confidence: float) -> bool:
    """No difference between n_a and n_b runs can be significant at `confidence` (a handful of runs gives a
    narrow bootstrap interval that means nothing: 2 against 2 runs cannot reach p < 0.33)."""
    return smallest_p(n_a, n_b) > 1.0 - confidence


def too_few_warning(count: int, what: str, confidence: float) -> str:
    """The one warning line of compare and abi-compare when `count` of their `what` (cases, measurements) have
    too few runs for a verdict ('' when none has)."""
    if not count:
        return ""
    return (f"lnbench: warning: {count} {what}(s) have too few runs for any difference to be significant at "
            f"{confidence:.0%} (see their detail); time more runs (-R, -P) to get a verdict")


def paired_bootstrap(base_runs: Sequence[Sequence[float]], new_runs: Sequence[Sequence[float]], *,
                     n_boot: int = 4000, confidence: float = 0.95, seed: int = 0) -> RatioEstimate:
    """abi-compare's statistics for one measurement of one case: speed-up, paired bootstrap interval,
    Mann–Whitney p and verdict (TOO_FEW when the runs are too few for any verdict at this confidence)."""
    speedup, low, high = bootstrap_speedup(base_runs, new_runs, n_boot=n_boot,
                                           confidence=confidence, seed=seed)
    pooled_t = [v for runs in base_runs for v in runs]
    pooled_p = [v for runs in new_runs for v in runs]
    verdict = Verdict.TOO_FEW if too_few(len(pooled_t), len(pooled_p), confidence) else speedup_verdict(low, high)
    return RatioEstimate(speedup, low, high, confidence, mann_whitney_p(pooled_t, pooled_p), verdict)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            out *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return out


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    return _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(confidence: float, df: float) -> float:
    """The t with P(|T| <= t) = confidence (two-sided critical value), by bisection."""
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > 1.0 - confidence:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if t_two_sided_p(middle, df) > 1.0 - confidence else (low, middle)
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2.0


@dataclass(frozen=True)
class WorkerInterval:
    """NEW/BASE time ratio of paired worker medians: the centre, its interval and p (H0: ratio 1)."""

    ratio: float
    low: float
    high: float
    p_value: float
    workers: int


#: above this many degrees of freedom the t distribution is taken as the normal one
_NORMAL_DF = 1e4


def _critical(confidence: float, df: float) -> float:
    if df > _NORMAL_DF:
        return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return t_quantile(confidence, df)


def _two_sided_p(t: float, df: float) -> float:
    if df > _NORMAL_DF:
        return 2.0 * (1.0 - statistics.NormalDist().cdf(abs(t)))
    return t_two_sided_p(t, df)


def run_noise_variance(run_noise_pct: float) -> float:
    """The variance a run noise floor of `run_noise_pct` % adds to log(NEW headline / BASE headline): each of
    the two invocations carries its own session shift, sd ln(1 + pct/100) on the log scale."""
    return 2.0 * math.log1p(run_noise_pct / 100.0) ** 2


def worker_ratio_interval(base_runs: Sequence[Sequence[float]], new_runs: Sequence[Sequence[float]],
                          confidence: float = 0.95, center: float | None = None,
                          run_noise_pct: float = 0.0) -> WorkerInterval:
    """Random-effects interval of log(NEW / BASE) from paired worker medians (w of NEW against w of BASE),
    back on the ratio scale; around `center` (compare passes its headline ratio, the ratio of the medians of
    worker medians, so the interval holds the figure it is shown with) else the mean log ratio.

    Each worker is its own process, so the spread of the paired differences d_w holds the process-to-process
    variance that the runs inside one worker lack. What the workers of one invocation share (the minute's
    load, clocks, the host's state: a session shift) they cannot show, yet it differs between invocations: a
    variance component of its own. So the log ratio's variance is

        var(d_w) / n  +  2 τ²,    τ = ln(1 + run_noise_pct / 100)

    (the worker part estimated with n − 1 degrees of freedom, τ known: measured by A/A runs, see
    run_noise_estimate), with Welch–Satterthwaite degrees of freedom (var)² / ((var(d_w)/n)² / (n − 1));
    run_noise_pct = 0 is the paired t interval. Needs at least 2 workers (see too_few_workers)."""
    if len(base_runs) != len(new_runs) or len(base_runs) < 2:
        raise ValueError("a paired interval needs the same 2 or more workers on both sides")
    diffs = np.log(worker_medians(new_runs)) - np.log(worker_medians(base_runs))
    n = len(diffs)
    mean = float(diffs.mean()) if center is None else math.log(center)
    workers_var = float(diffs.var(ddof=1)) / n
    variance = workers_var + run_noise_variance(run_noise_pct)
    if variance < 1e-24:          # identical worker ratios and no floor: the interval is the point
        p = 1.0 if mean == 0.0 else 0.0
        return WorkerInterval(math.exp(mean), math.exp(mean), math.exp(mean), p, n)
    df = variance ** 2 / (workers_var ** 2 / (n - 1)) if workers_var > 0 else math.inf
    se = math.sqrt(variance)
    half = _critical(confidence, df) * se
    return WorkerInterval(math.exp(mean), math.exp(mean - half), math.exp(mean + half),
                          _two_sided_p(mean / se, df), n)


def run_noise_estimate(log_changes: Sequence[float], workers_vars: Sequence[float]) -> float:
    """The run noise floor, in %, from A/A comparisons (nothing changed between the runs): each gives the
    headline log ratio c and its worker part v = var(d_w) / n. E[c²] = v + 2 τ², so the moment estimate
    (DerSimonian–Laird's, for the between-study variance of a random-effects meta-analysis) is
    τ² = max(0, mean(c² − v) / 2)."""
    c, v = np.asarray(log_changes, dtype=float), np.asarray(workers_vars, dtype=float)
    if c.size == 0:
        return math.nan
    tau2 = max(0.0, float(np.mean(c ** 2 - v)) / 2.0)
    return math.expm1(math.sqrt(tau2)) * 100.0


def too_few_workers(workers: int) -> bool:
    """Fewer than 2 paired workers: no spread between worker processes to judge a difference by."""
    return workers < 2


#: worker flag rule (see worker_flags)
SPREAD_FACTOR = 3.0
SPREAD_FLOOR_PCT = 1.0


def spread_pct(runs: list[float]) -> float:
    """(max − min) / median of a worker's runs, in % (NaN without a positive median)."""
    median = float(statistics.median(runs)) if runs else math.nan
    return (max(runs) - min(runs)) / median * 100 if median > 0 else math.nan


def worker_flags(runs_per_worker: list[list[float]], names: list[str] | None = None) -> dict[int, str]:
    """Index -> why that worker stands out; {} with fewer than 2 workers. Informational, not a failure.

    With s_w = (max − min) / median of worker w's runs in %, typical = the median s of the *other* workers and
    bar = SPREAD_FACTOR × max(typical, SPREAD_FLOOR_PCT) (3 × at least 1 %), worker w is flagged when
        noisy:  s_w > bar (its own runs scatter far more than the others'), or
        off:    with 3+ workers, |median_w − median of worker medians| / that median, in %, > bar
                (it sits further from the others than their own run-to-run noise explains)."""
    names = names or [f"worker {i}" for i in range(len(runs_per_worker))]
    spreads = [spread_pct(runs) for runs in runs_per_worker]
    medians = worker_medians(runs_per_worker)
    center = across_workers(medians)[0] if medians else math.nan
    flags: dict[int, str] = {}
    if len(runs_per_worker) < 2 or not center > 0:
        return flags
    for i, spread in enumerate(spreads):
        others = [s for j, s in enumerate(spreads) if j != i and math.isfinite(s)]
        if not others or not math.isfinite(spread):
            continue
        typical = float(statistics.median(others))
        bar = SPREAD_FACTOR * max(typical, SPREAD_FLOOR_PCT)
        off = (medians[i] - center) / center * 100
        if spread > bar:
            flags[i] = f"{names[i]} noisy: run spread {plain_number(spread, 3)}% (others {plain_number(typical, 2)}%)"
        elif len(runs_per_worker) >= 3 and abs(off) > bar:
            flags[i] = (f"{names[i]} off: median {'+' if off > 0 else ''}{plain_number(off, 3)}% from the median of "
                        f"workers (run spread {plain_number(typical, 2)}%)")
    return flags
