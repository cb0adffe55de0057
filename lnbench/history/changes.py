"""Change points of a series of values: e-divisive (lnbench.history.edivisive: energy statistics, a
permutation-tested divisive search: no fixed threshold), each with its place, size and p.

A change point at index i means values[i:] differ in distribution from the values before; its size is the
change of the median from the segment before to the segment after (%), its p the permutation p with which
e-divisive accepted it (the share of the permutations of the windows whose best split scored at least as high as
it did; a permutation test cannot say less than 1/(permutations + 1)). Fixed seeds: the same series gives the
same answer."""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Sequence

import numpy as np

from lnbench.history.edivisive import SEED, e_divisive

#: significance of each split (e-divisive's permutation test) and the permutations it runs
P_VALUE = 0.01
PERMUTATIONS = 100
#: e-divisive needs this many values to split a series (a shorter series, or a constant one, has no change point)
MIN_VALUES = 6
#: values of a deterministic series this close are one value (a float written to JSON keeps 15 digits, to CSV 17)
EXACT_REL_TOL = 1e-9


@dataclass(frozen=True)
class Search:
    """One e-divisive search: the values, and where a change point may be (lnbench.history.steps)."""

    values: tuple[float, ...]
    allowed: tuple[bool, ...]

    def run(self) -> list["ChangePoint"]:
        return change_points(self.values, allowed=self.allowed)


@dataclass(frozen=True)
class ChangePoint:
    index: int            # first value of the new regime
    size_pct: float       # median after / median before - 1, in %
    p: float              # e-divisive's permutation p of the split


def change_points(values: Sequence[float], p_value: float = P_VALUE, permutations: int = PERMUTATIONS,
                  allowed: Sequence[bool] | None = None) -> list[ChangePoint]:
    """The change points of `values` (missing values dropped by the caller), oldest first; `allowed`: the
    indexes a change point may be at (None: any; lnbench.history.summary allows only those where the commit
    changes)."""
    x = np.asarray(values, dtype=float)
    if len(x) < MIN_VALUES or np.ptp(x) == 0 or (allowed is not None and not any(allowed[1:])):
        return []
    mask = None if allowed is None else np.asarray(allowed, dtype=bool)
    found = sorted(e_divisive(x, p_value, permutations, SEED, mask))
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
