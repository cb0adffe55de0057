"""Change points of a series of values: MongoDB's e-divisive (signal-processing-algorithms' energy statistics,
a permutation-tested divisive search: no fixed threshold), each with its place, size and p.

A change point at index i means values[i:] differ in distribution from the values before; its size is the
change of the median from the segment before to the segment after (%), its p the permutation p with which
e-divisive accepted it (the share of the permutations of the windows whose best split scored at least as high as
it did; a permutation test cannot say less than 1/(permutations + 1)). Fixed seeds: the same series gives the
same answer.

The search is the library's `e_divisive` step for step (its distance matrix, t statistics, memo of each window's
best split, and the same draws from numpy's generator), with one difference: a round's permutation test stops
as soon as more permutations beat the candidate than p_value allows. Such a round finds nothing, which ends the
search, so the change points are the library's exactly (tests/test_history.py compares them), while a series
without a change, the usual case, takes a few permutations instead of all of them."""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Sequence

import numpy as np

#: significance of each split (e-divisive's permutation test) and the permutations it runs
P_VALUE = 0.01
PERMUTATIONS = 100
SEED = 0
#: e-divisive needs this many values to split a series (a shorter series, or a constant one, has no change point)
MIN_VALUES = 6
#: values of a deterministic series this close are one value (a float written to JSON keeps 15 digits, to CSV 17)
EXACT_REL_TOL = 1e-9


@dataclass(frozen=True)
class ChangePoint:
    index: int            # first value of the new regime
    size_pct: float       # median after / median before - 1, in %
    p: float              # e-divisive's permutation p of the split


def change_points(values: Sequence[float], p_value: float = P_VALUE, permutations: int = PERMUTATIONS
                  ) -> list[ChangePoint]:
    """The change points of `values` (missing values dropped by the caller), oldest first."""
    es = _e_divisive()
    x = np.asarray(values, dtype=float)
    if len(x) < MIN_VALUES or np.ptp(x) == 0:
        return []
    state = np.random.get_state()
    np.random.seed(SEED)
    try:
        found = sorted(_search(es, x, p_value, permutations))
    finally:
        np.random.set_state(state)
    bounds = [0, *(index for index, _ in found), len(x)]
    return [ChangePoint(index, float((np.median(x[index:bounds[k + 2]]) / np.median(x[bounds[k]:index]) - 1) * 100),
                        max(p, 1 / (permutations + 1))) for k, (index, p) in enumerate(found)]


def exact_changes(values: Sequence[float]) -> list[ChangePoint]:
    """The change points of a deterministic series (modelled floors: the same kernel and figures give the same
    value every run, so any change is real): every value that differs from the one before, its size against that
    value, p 0 (no test). e-divisive is no use here: it needs 6 values, and on a constant series that steps it
    finds nothing before the third run after the step, nothing in 5 runs and 5 after (a permutation test of a
    perfect split of few values cannot reach p 0.01), and no step that returns (A B A); tests/test_history.py
    shows it."""
    out = []
    for index, (before, after) in enumerate(pairwise(values), 1):
        if not math.isclose(before, after, rel_tol=EXACT_REL_TOL, abs_tol=0.0):
            size = (after / before - 1) * 100 if before else math.copysign(100.0, after)
            out.append(ChangePoint(index, float(size), 0.0))
    return out


def _search(es, x: np.ndarray, p_value: float, permutations: int) -> list[tuple[int, float]]:  # noqa: ANN001
    """e-divisive (the library's `e_divisive`, module docstring): the change points found, each with its p. It
    calls the library's own helpers for the distances and t statistics (its C extension where built);
    tests/test_history.py checks the answers against `e_divisive` itself."""
    distances = es._get_distance_matrix(es._get_valid_input(x))
    memo: dict[tuple[int, int], tuple[int, float]] = {}
    found: list[tuple[int, float]] = []
    while True:
        windows = list(pairwise([0, *sorted(index for index, _ in found), len(distances)]))
        for a, b in windows:
            if (a, b) not in memo:
                stats = es._calculate_t_stats(distances[a:b, a:b])
                at = int(np.argmax(stats))
                memo[(a, b)] = (at + a, stats[at])
        index, best = max((memo[w] for w in windows), key=lambda candidate: candidate[1])
        better = 0
        for _ in range(permutations):
            permuted = []
            for a, b in windows:
                rows = np.arange(b - a) + a
                np.random.shuffle(rows)
                permuted.append(max(es._calculate_t_stats(distances[np.ix_(rows, rows)])))
            better += max(permuted) >= best
            if better / (permutations + 1) > p_value:
                return found                       # not significant however the rest would fall
        if not index:                              # the library's loop also ends at a split at 0
            return found
        found.append((index, better / (permutations + 1)))


INSTALL = ("pip install --no-deps signal-processing-algorithms structlog more-itertools (its numpy<2 pin is "
           "stale: the e-divisive code runs on numpy 2)")


def _e_divisive():  # noqa: ANN202 - the library's module
    try:
        from signal_processing_algorithms.energy_statistics import energy_statistics
    except ImportError as exc:
        from lnbench.errors import LnbenchUsageError
        raise LnbenchUsageError(f"change points need MongoDB's e-divisive ({exc.name} is missing): {INSTALL}") from None
    return energy_statistics


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 24) -> str:
    """The last `width` values as block characters, low to high."""
    x = np.asarray([v for v in values if v == v], dtype=float)[-width:]
    if not len(x):
        return ""
    low, high = x.min(), x.max()
    if high == low:
        return _BARS[3] * len(x)
    return "".join(_BARS[int((v - low) / (high - low) * (len(_BARS) - 1))] for v in x)
