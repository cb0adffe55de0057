"""E-divisive (Matteson & James 2014, "A Nonparametric Approach for Multiple Change Point Analysis of Multivariate
Data"): change points of a one-dimensional series by a divisive search over energy statistics, each accepted by
a permutation test. numpy only.

A split of a window of n values at tau, X = window[:tau] and Y = window[tau:], scores

    q(tau) = nx * ny / n * (2 / (nx * ny) * sum|Xi - Yj| - 1 / nx**2 * sum|Xi - Xk| - 1 / ny**2 * sum|Yj - Yl|)

(alpha = 1; the within sums run over ordered pairs divided by n**2, as MongoDB's implementation does, where the
paper divides them by n(n - 1)). Each round takes the best split of the windows that the change points found so
far bound, and runs `permutations` permutations: each shuffles every window and takes the best split of any
window. The split is a change point when the share of permutations that score at least as high, out of
permutations + 1, is at most p_value; the first round without one ends the search.

It gives the change points of MongoDB's signal-processing-algorithms exactly (tests/test_edivisive.py: 201 series
recorded with that library): the same draws, and the same floating point sums. The draws come from a local
legacy `RandomState` seeded `SEED`, not a `Generator`: its stream is the library's (which seeded numpy's global
one) and numpy keeps it fixed across versions (NEP 19). With `default_rng(SEED)` 6 of the 201 series get other
change points: their candidates sit at the threshold (at most 1 of 100 permutations may beat a change point),
0 or 1 permutations beat them under one stream and 2 to 5 under the other. The sums run in the library's C
extension's order because a permutation that regroups the candidate's own split scores the same q but for
rounding, and `>=` must decide that tie as the library does (2-D prefix sums instead change 2 of the 201)."""
from __future__ import annotations

import functools
from itertools import pairwise
from typing import Sequence

import numpy as np

SEED = 0

#: a window of the series, [start, stop)
Window = tuple[int, int]


def distances(values: np.ndarray) -> np.ndarray:
    """|x_i - x_j| for every pair of values."""
    return np.abs(values[:, None] - values[None, :])


def split_scores(d: np.ndarray) -> np.ndarray:
    """q(tau) for every tau of the window whose distance matrix is `d` (q(0) = 0: no split).

    Moving the splitting value tau from Y to X moves its distances to X (`before`) out of the cross sum into X's,
    and its distances to the rest of Y (`after`) out of Y's into the cross sum: running sums, in that order
    (within sums count each pair once). A sum down axis 0 adds row after row, the C extension's order (numpy sums
    pairwise only along the contiguous axis)."""
    n = len(d)
    upper, lower = _triangles(n)
    before = d.sum(axis=0, where=upper)                     # d[:tau, tau]
    after = d.sum(axis=0, where=lower)                      # d[tau:, tau], that is d[tau, tau:]
    within_x = np.concatenate(([0.0], np.cumsum(before[:-1])))             # X gains tau's distances to X
    all_pairs = np.cumsum(after)[-1]                                        # left to right (sum() is pairwise)
    within_y = np.cumsum(np.concatenate(([all_pairs], -after[:-1])))       # Y loses tau's distances to Y
    moves = np.zeros(2 * n - 1)
    moves[1::2], moves[2::2] = -before[:-1], after[:-1]
    across = np.cumsum(moves)[::2]                          # (across - before) + after, split by split
    nx = np.arange(n)
    ny = n - nx
    some_x = np.maximum(nx, 1)                              # at tau 0 the X terms are 0 / 1
    energy = across * (2.0 / (some_x * ny)) - 2 * within_x / (some_x * some_x) - 2 * within_y / (ny * ny)
    return nx.astype(float) * ny / n * energy


@functools.lru_cache(maxsize=256)
def _triangles(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the n x n matrix's strict upper triangle and its lower triangle with the diagonal."""
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    return upper, ~upper


def e_divisive(values: Sequence[float] | np.ndarray, p_value: float, permutations: int,
               seed: int = SEED, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
    """The change points of `values` in the order found, each with its permutation p.

    `allowed` (booleans, one per value): the indexes a change point may be at (lnbench.history.changes: only where
    the commit changes); the permutations shuffle the values and keep the places, so each is scored at the same
    allowed splits. None: every index. A round's permutation test stops as soon as more permutations beat the
    candidate than p_value allows: that round finds nothing and ends the search, so the answer is the full
    test's."""
    d = distances(np.asarray(values, dtype=float))
    rng = np.random.RandomState(seed)
    best: dict[Window, tuple[int, float]] = {}              # a window's best split, kept across rounds
    found: list[tuple[int, float]] = []
    while True:
        windows = list(pairwise([0, *sorted(index for index, _ in found), len(d)]))
        for window in windows:
            if window not in best:
                best[window] = _best_split(d, window, allowed)
        index, score = max((best[window] for window in windows), key=lambda split: split[1])
        if not index:                                       # every window is constant (or has no allowed split)
            return found
        p = _permutation_p(d, windows, score, rng, p_value, permutations, allowed)
        if p is None:
            return found
        found.append((index, p))


def _scores(d: np.ndarray, start: int, allowed: np.ndarray | None) -> np.ndarray:
    """split_scores of a window starting at `start`, -inf where a split is not allowed."""
    scores = split_scores(d)
    if allowed is not None:
        scores = np.where(allowed[start:start + len(d)], scores, -np.inf)
        scores[0] = 0.0                                     # tau 0: no split
    return scores


def _best_split(d: np.ndarray, window: Window, allowed: np.ndarray | None = None) -> tuple[int, float]:
    """The window's best split (first of equals) as an index into the series, and its q (index 0: none)."""
    start, stop = window
    scores = _scores(d[start:stop, start:stop], start, allowed)
    at = int(np.argmax(scores))
    return (start + at if at else 0), float(scores[at])


def _permutation_p(d: np.ndarray, windows: list[Window], score: float, rng: np.random.RandomState,
                   p_value: float, permutations: int, allowed: np.ndarray | None = None) -> float | None:
    """The share of permutations (out of permutations + 1) whose best split scores at least `score`, or None as
    soon as it must exceed p_value."""
    beaten = 0
    for _ in range(permutations):
        beaten += _permuted_best(d, windows, rng, allowed) >= score
        if beaten / (permutations + 1) > p_value:
            return None
    return beaten / (permutations + 1)


def _permuted_best(d: np.ndarray, windows: list[Window], rng: np.random.RandomState,
                   allowed: np.ndarray | None = None) -> float:
    """The best q of any window after shuffling each window's values (one draw per window, in order)."""
    scores = []
    for start, stop in windows:
        order = np.arange(start, stop)
        rng.shuffle(order)
        scores.append(_scores(d[np.ix_(order, order)], start, allowed).max())
    return max(scores)
