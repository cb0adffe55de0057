"""Change points of a series of values: MongoDB's e-divisive (signal-processing-algorithms' energy statistics,
a permutation-tested divisive search: no fixed threshold), each with its place, size and p.

A change point at index i means values[i:] differ in distribution from the values before; its size is the
change of the median from the segment before to the segment after (%), its p the energy statistic's
permutation p between those two segments. Fixed seeds: the same series gives the same answer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: significance of each split (e-divisive's permutation test) and the permutations it runs
P_VALUE = 0.01
PERMUTATIONS = 100
SEED = 0


@dataclass(frozen=True)
class ChangePoint:
    index: int            # first value of the new regime
    size_pct: float       # median after / median before - 1, in %
    p: float              # permutation p of the two segments' energy statistic


def change_points(values: Sequence[float], p_value: float = P_VALUE, permutations: int = PERMUTATIONS
                  ) -> list[ChangePoint]:
    """The change points of `values` (missing values dropped by the caller), oldest first."""
    es = _e_divisive()
    x = np.asarray(values, dtype=float)
    if len(x) < 6 or np.ptp(x) == 0:
        return []
    state = np.random.get_state()
    np.random.seed(SEED)
    try:
        found = sorted(es.e_divisive(x, pvalue=p_value, permutations=permutations))
        bounds = [0, *found, len(x)]
        out = []
        for k, index in enumerate(found):
            before, after = x[bounds[k]:index], x[index:bounds[k + 2]]
            stats = es.get_energy_statistics_and_probabilities(before, after, permutations=permutations)
            # a permutation test cannot say less than 1/(permutations + 1)
            out.append(ChangePoint(int(index), float((np.median(after) / np.median(before) - 1) * 100),
                                   max(float(stats.e_pvalue), 1 / (permutations + 1))))
        return out
    finally:
        np.random.set_state(state)


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
