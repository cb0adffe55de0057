"""The change points history reports for a measured series, and why: where e-divisive finds a change at a commit
boundary, whether it stands out against the series' noise (lnbench.history.significance) after the false
discovery rate over every series read, and whether the machine moved rather than the code (peer controls).

- Runs of one commit never hold a code change between them: e-divisive searches only the places where the commit
  changes. A shift it finds between runs of one commit (a search of each commit's runs alone, where it has
  MIN_VALUES or more) is a machine shift: reported, never gated.
- A change at a commit boundary is tested against the series' noise (worker spread and run-to-run spread), its
  p multiplied by the boundaries it was chosen among, then adjusted by Benjamini-Hochberg over all the series
  (one hypothesis a series without a candidate, one a candidate). Only changes significant after that are
  change points.
- Peer controls, as `compare` does: the other backends' series of the same case (op, dtype, shape, mode) on the
  same machine, over the same runs. When most of them step the same way (|t| >= PEER_T in their own noise) by at
  least half as much, the machine changed: the change is kept with cause `machine` and never gated."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from lnbench.history.changes import MIN_VALUES, ChangePoint, Search
from lnbench.history.significance import FDR_Q, Noise, adjusted, detectable_pct, noise, step

#: a peer's step counts as the machine's when it is this many standard errors in its own noise
PEER_T = 3.0
#: and at least this share of the series' own step (log scale)
PEER_SHARE = 0.5


@dataclass
class SeriesData:
    """One measured series as the tests take it: values oldest first, with their runs, commits and workers."""

    series_id: int
    peer_group: tuple
    values: list[float]
    labels: list[str]
    run_ids: list[int]
    workers: list[list[float]]
    noise: Noise = field(init=False)          # set by set_stretches, once the candidate changes are known

    def set_stretches(self, found: Sequence[ChangePoint]) -> None:
        """The noise around the stretches the candidate changes cut (lnbench.history.significance.noise)."""
        self.noise = noise(self.values, self.workers, [cp.index for cp in found])

    def boundaries(self) -> list[bool]:
        """Where the commit changes (index 0: never)."""
        return [False, *(a != b for a, b in zip(self.labels, self.labels[1:]))]

    def part(self, start: int, stop: int) -> tuple[list[float], list[list[float]]]:
        return self.values[start:stop], self.workers[start:stop]

    def over_runs(self, run_ids: set[int]) -> tuple[list[float], list[list[float]]]:
        keep = [i for i, r in enumerate(self.run_ids) if r in run_ids]
        return [self.values[i] for i in keep], [self.workers[i] for i in keep]


def searches(data: SeriesData) -> tuple[Search, list[tuple[int, Search]]]:
    """The e-divisive searches of a series: at its commit boundaries, and inside each commit of MIN_VALUES runs
    or more, alone (with its first index in the series): a code change next to it must not look like a shift
    inside it."""
    groups, start = [], 0
    for stop in [*(i for i, edge in enumerate(data.boundaries()) if edge), len(data.values)]:
        if stop - start >= MIN_VALUES:
            part = tuple(data.values[start:stop])
            groups.append((start, Search(part, (False, *[True] * (len(part) - 1)))))
        start = stop
    return Search(tuple(data.values), tuple(data.boundaries())), groups


@dataclass
class Tested:
    """A change at a commit boundary with its test (p_adj and cause are set once every series is tested)."""

    data: SeriesData
    index: int
    start: int                 # the runs before: [start, index), after: [index, stop)
    stop: int
    edivisive_p: float
    size_pct: float
    ratio: float
    low: float
    high: float
    p: float
    detectable: float
    p_adj: float = 1.0
    cause: str = "code"
    peer_shift_pct: float | None = None

    def as_dict(self) -> dict[str, Any]:
        d = self.data
        return {"from_commit": d.labels[self.index - 1], "to_commit": d.labels[self.index],
                "run": int(d.run_ids[self.index]), "index": self.index, "size_pct": round(self.size_pct, 3),
                "p": _round_p(self.p), "p_adj": _round_p(self.p_adj), "edivisive_p": round(self.edivisive_p, 4),
                "ratio": round(self.ratio, 4), "ci_low": round(self.low, 4), "ci_high": round(self.high, 4),
                "runs_before": self.index - self.start, "runs_after": self.stop - self.index,
                "detectable_pct": _round_pct(self.detectable), "noise_pct": round(d.noise.pct, 2),
                "cause": self.cause, "peer_shift_pct": None if self.peer_shift_pct is None
                else round(self.peer_shift_pct, 2), "exact": False}


def _round_p(p: float) -> float:
    return float(f"{p:.3g}")


def _round_pct(pct: float) -> float | None:
    return round(pct, 2) if math.isfinite(pct) else None


def tested_changes(data: SeriesData, found: Sequence[ChangePoint], alpha: float) -> list[Tested]:
    """Each change e-divisive found at a commit boundary, tested against the series' noise."""
    bounds = [0, *(cp.index for cp in found), len(data.values)]
    allowed = data.boundaries()
    out = []
    for k, cp in enumerate(found):
        start, stop = bounds[k], bounds[k + 2]
        places = sum(allowed[start + 1:stop])
        s = step(data.part(start, cp.index), data.part(cp.index, stop), data.noise, places)
        out.append(Tested(data, cp.index, start, stop, cp.p, (s.ratio - 1) * 100, s.ratio, s.low, s.high, s.p,
                          detectable_pct(data.noise, cp.index - start, stop - cp.index, alpha)))
    return out


def machine_shifts(data: SeriesData, offset: int, found: Sequence[ChangePoint]) -> list[dict[str, Any]]:
    """The shifts e-divisive found between runs of one commit (the commit's runs from `offset` on): the
    machine's, never the code's."""
    return [{"commit": data.labels[offset + cp.index], "run": int(data.run_ids[offset + cp.index]),
             "index": offset + cp.index, "size_pct": round(cp.size_pct, 3), "edivisive_p": round(cp.p, 4)}
            for cp in found]


def _peer_share(change: Tested, peers: Sequence[SeriesData]) -> tuple[bool, float | None]:
    """Did the peers step with the change over the same runs (most of them), and their median step (%)?"""
    d = change.data
    before = set(d.run_ids[change.start:change.index])
    after = set(d.run_ids[change.index:change.stop])
    own = math.log(change.ratio)
    shifts, agreeing = [], 0
    for peer in peers:
        b, a = peer.over_runs(before), peer.over_runs(after)
        if not b[0] or not a[0]:
            continue
        s = step(b, a, peer.noise)
        shifts.append((s.ratio - 1) * 100)
        log_step = math.log(s.ratio)
        agreeing += abs(s.t) >= PEER_T and log_step * own > 0 and abs(log_step) >= PEER_SHARE * abs(own)
    if not shifts:
        return False, None
    return agreeing >= max(1, math.ceil(len(shifts) / 2)), float(np.median(shifts))


def judge(series: Sequence[SeriesData], changes_of: Callable[[list[Search]], dict[Search, list[ChangePoint]]]
          ) -> dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Per series id: (its change points, significant after the FDR, oldest first; its machine shifts).
    `changes_of` runs the e-divisive searches of every series at once (lnbench.history.cache keeps them)."""
    wanted = {data.series_id: searches(data) for data in series}
    found = changes_of([s for at_commits, inside in wanted.values() for s in (at_commits, *(g for _, g in inside))])
    alpha = FDR_Q / max(len(series), 1)
    tested: dict[int, list[Tested]] = {}
    shifts: dict[int, list[dict[str, Any]]] = {}
    for data in series:
        at_commits, inside = wanted[data.series_id]
        data.set_stretches(found[at_commits])
        tested[data.series_id] = tested_changes(data, found[at_commits], alpha)
        shifts[data.series_id] = [shift for offset, group in inside for shift in machine_shifts(data, offset,
                                                                                                  found[group])]
    family = [c for changes in tested.values() for c in changes]
    idle = sum(not changes for changes in tested.values())           # a series without a candidate: p 1
    for change, q in zip(family, adjusted([c.p for c in family] + [1.0] * idle)):
        change.p_adj = q
    groups: dict[tuple, list[SeriesData]] = {}
    for data in series:
        groups.setdefault(data.peer_group, []).append(data)
    out = {}
    for data in series:
        kept = [c for c in tested[data.series_id] if c.p_adj <= FDR_Q]
        peers = [p for p in groups[data.peer_group] if p.series_id != data.series_id]
        for change in kept:
            by_machine, change.peer_shift_pct = _peer_share(change, peers)
            change.cause = "machine" if by_machine else "code"
        out[data.series_id] = ([c.as_dict() for c in kept], shifts[data.series_id])
    return out


def reference_detectable(data: SeriesData, alpha: float, new_runs: int = 2) -> float:
    """The series' detectable size as the gate meets it: `new_runs` runs of a new commit judged against the runs
    read (history --with new.json --with new2.json), at a lone discovery's level `alpha`."""
    return detectable_pct(data.noise, max(len(data.values), 1), new_runs, alpha)
