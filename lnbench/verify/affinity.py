"""Which pending unit a free `verify --jobs` worker takes next: kernel affinity, then balance.

A process compiles each FlyDSL kernel, decodes each of its instructions (emulated device) and sets up each
case (inputs, fp64 reference, torch baseline) once and keeps it, so units that share them cost less in the
worker that already has them. The units of one group (lnbench.verify.parallel.VerifySpec.group: one row
width in one dtype, every backend) share kernels and set-ups. A free worker takes, in priority order (the
order given: longest first), the first pending unit of a group it owns; else the first unit of a group no
worker owns, and owns that group; else the first pending unit of any group (it helps the busiest: a
worker never idles while a unit is pending). Which worker runs a unit changes nothing in its rows.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, Iterator


class AffinityQueue:
    """Pending units in priority order, dealt to workers by the groups they own."""

    def __init__(self, order: Iterable[int], group: Callable[[int], Hashable]) -> None:
        self._pending = list(order)
        self._group = group
        self._owner: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._pending))

    def take(self, worker: int) -> int:
        """The unit worker `worker` runs next (module docstring); the queue must not be empty."""
        chosen = None
        for position, unit in enumerate(self._pending):
            owner = self._owner.get(self._group(unit))
            if owner == worker:
                chosen = position
                break
            if owner is None and chosen is None:
                chosen = position
        if chosen is None:                 # every group is another worker's: help with the first pending unit
            chosen = 0
        unit = self._pending.pop(chosen)
        self._owner.setdefault(self._group(unit), worker)
        return unit

    def release(self, worker: int) -> None:
        """A worker is gone: its groups are free for the next worker that takes one."""
        self._owner = {group: owner for group, owner in self._owner.items() if owner != worker}
