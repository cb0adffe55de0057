"""One colour and marker per backend, the same in every panel and picture: lnbench's own backends by their
fixed order (torch is always the first colour), any other name after them in sorted order."""
from __future__ import annotations

from typing import Iterable

from lnbench.backends import BUILTIN_NAMES

#: matplotlib's tab10 colours, written out so a style never depends on the active rcParams
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
MARKERS = "osD^vP*X"


def backend_order(backends: Iterable[str]) -> list[str]:
    """Built-in names first in their fixed order, then the others sorted; each name once."""
    names = set(map(str, backends))
    return [n for n in BUILTIN_NAMES if n in names] + sorted(names - set(BUILTIN_NAMES))


def backend_styles(backends: Iterable[str]) -> dict[str, dict[str, str]]:
    """backend -> {"color", "marker"} for one figure set: a built-in name keeps its slot even when absent, so
    the same backend looks the same in pictures of different results too."""
    names = backend_order(backends)
    slot = {name: i for i, name in enumerate(BUILTIN_NAMES)}
    others = [n for n in names if n not in slot]
    slot.update({name: len(BUILTIN_NAMES) + i for i, name in enumerate(others)})
    return {name: {"color": COLOURS[slot[name] % len(COLOURS)], "marker": MARKERS[slot[name] % len(MARKERS)]}
            for name in names}
