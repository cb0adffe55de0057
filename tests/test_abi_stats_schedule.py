"""abi-compare statistics (paired bootstrap CI, Mann–Whitney, verdicts) and measurement order (ABBA, alternation)."""
from __future__ import annotations

import numpy as np
import pytest

from lnbench.abi import schedule
from lnbench.measure import stats
from lnbench.results.verdicts import Verdict, fails_gate


def _synthetic(rng: np.random.Generator, workers: int, runs: int, tensor_us: float, ratio: float,
               noise: float = 0.03, worker_noise: float = 0.03) -> tuple[list[list[float]], list[list[float]]]:
    """Per-worker runs: a per-process offset shared by both sides (paired) plus per-run noise."""
    t, p = [], []
    for _ in range(workers):
        offset = rng.lognormal(0.0, worker_noise)
        t.append(list(tensor_us * offset * rng.lognormal(0.0, noise, runs)))
        p.append(list(tensor_us / ratio * offset * rng.lognormal(0.0, noise, runs)))
    return t, p


def test_bootstrap_interval_covers_true_ratio():
    rng = np.random.default_rng(7)
    covered = 0
    trials = 40
    for trial in range(trials):
        t, p = _synthetic(rng, workers=5, runs=5, tensor_us=10.0, ratio=1.2)
        speedup, low, high = stats.bootstrap_speedup(t, p, n_boot=2000, seed=trial)
        assert low <= speedup <= high
        covered += low <= 1.2 <= high
    assert covered >= 0.85 * trials


def test_identical_distributions_are_same():
    rng = np.random.default_rng(11)
    verdicts = [stats.paired_bootstrap(*_synthetic(rng, 3, 5, 10.0, 1.0), n_boot=2000, seed=s).verdict for s in range(30)]
    assert verdicts.count(Verdict.SAME) >= 26          # ~95 % interval: few false alarms


def test_clearly_slower_and_faster():
    rng = np.random.default_rng(3)
    slow = stats.paired_bootstrap(*_synthetic(rng, 3, 5, 10.0, 1 / 1.3), n_boot=2000)
    assert slow.verdict == Verdict.SLOWER and slow.ci_high < 1.0
    assert slow.slowdown_pct == pytest.approx(30.0, abs=6.0)
    fast = stats.paired_bootstrap(*_synthetic(rng, 3, 5, 10.0, 1.3), n_boot=2000)
    assert fast.verdict == Verdict.FASTER and fast.ci_low > 1.0


def test_bootstrap_is_reproducible_with_fixed_seed():
    rng = np.random.default_rng(5)
    t, p = _synthetic(rng, 3, 5, 10.0, 1.1)
    assert stats.bootstrap_speedup(t, p, seed=4) == stats.bootstrap_speedup(t, p, seed=4)


def test_point_estimate_is_ratio_of_median_of_medians():
    t = [[10, 11, 12], [20, 20, 20], [30, 31, 32]]
    p = [[5, 5, 5], [8, 10, 12], [15, 16, 17]]
    speedup, _, _ = stats.bootstrap_speedup(t, p, n_boot=200)
    assert speedup == pytest.approx(20 / 10)


def test_mann_whitney_exact_and_normal():
    assert stats.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)   # 2 of 20 arrangements
    assert stats.mann_whitney_p([1, 4, 2, 5], [3, 6, 0, 7]) > 0.5
    rng = np.random.default_rng(0)
    far = stats.mann_whitney_p(list(rng.normal(0, 1, 40)), list(rng.normal(3, 1, 40)))
    assert far < 1e-6


def test_speedup_verdict_and_fail_rule():
    assert stats.speedup_verdict(0.9, 1.1) == Verdict.SAME
    assert stats.speedup_verdict(1.01, 1.2) == Verdict.FASTER
    assert stats.speedup_verdict(0.7, 0.95) == Verdict.SLOWER
    slower = stats.RatioEstimate(0.8, 0.75, 0.85, 0.95, 0.01, Verdict.SLOWER)          # 25 % slower
    assert fails_gate(slower.verdict, slower.slowdown_pct, 10.0)
    assert not fails_gate(slower.verdict, slower.slowdown_pct, 30.0)
    noisy = stats.RatioEstimate(0.8, 0.5, 1.2, 0.95, 0.3, Verdict.SAME)
    assert not fails_gate(noisy.verdict, noisy.slowdown_pct, 0.0)


def test_abba_order():
    assert schedule.abba_sequence(4) == ["tensor", "pointer", "pointer", "tensor"] * 2
    assert schedule.abba_sequence(2, worker_index=1) == ["pointer", "tensor", "tensor", "pointer"]


def test_schedule_covers_everything_and_alternates_shapes():
    cases = ["32x1024", "256x2048", "4096x4096"]
    order = schedule.schedule(cases, rounds=4, worker_index=0)
    assert len(order) == 4 * len(cases) * 2
    for case in cases:
        for side in schedule.SIDES:
            assert sum(1 for _, c, s in order if c == case and s == side) == 4
    visited = [c for _, c, _ in order[::2]]
    assert all(a != b for a, b in zip(visited, visited[1:]))   # every step switches shape
    firsts = [schedule.schedule(cases, 3)[i * 6][1] for i in range(3)]
    assert firsts == cases                       # each round starts at a different case


def test_alternation_needs_two_cases():
    assert schedule.alternation(["a", "b"], repeats=2) == ["a", "b", "a", "b"]
    with pytest.raises(ValueError):
        schedule.alternation(["a"])
