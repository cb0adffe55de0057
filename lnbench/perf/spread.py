"""perf's cases on one device or spread over several GPUs (lnbench.gpus): which cases run where and when,
the worker specs of each group, and the rows of every group joined into one run's rows.

One device: one group, every case, the protocol as always. Several GPUs: the runnable cases are dealt out over
the GPUs in case order (lnbench.gpus.deal); on each GPU one group of P workers times the cases the GPU sets the
time of, side by side with the other GPUs, then a second group the host-bound ones (`alone`: fewer bytes per
call than [perf] alone_below_mib), one GPU at a time. Every row names its GPU (`gpu`, `gpu_model`) and
whether it was timed alone (`timed_alone`, with `alone_reason`: "size" when its bytes per call were below the
threshold, "measured" when its side-by-side worker measured it host-bound and deferred it).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from lnbench.constants import DTYPES
from lnbench.gpus import GpuSlot, SlotRun, deal, run_spread
from lnbench.perf.aggregate import add_speedups, build_rows
from lnbench.perf.bytes_model import op_bytes
from lnbench.perf.cases import PerfCase, worker_order
from lnbench.measure.workers import WorkerResult, run_workers

MIB = 1 << 20


def host_bound(case: PerfCase, alone_below_mib: float) -> bool:
    """A case whose time the host sets more than the GPU: fewer model bytes per call than the threshold."""
    return op_bytes(case.op, case.m, case.n, DTYPES[case.dtype].itemsize) < alone_below_mib * MIB


@dataclass
class Group:
    """One run_workers call: the cases of one GPU (or of the one device), side by side or alone."""

    slot: GpuSlot | None               # None: the one device of a plain run
    alone: bool
    cases: list[PerfCase]
    orders: list[list[PerfCase]]       # per worker
    device: str = ""                   # the one device's name (a plain run)
    results: list[WorkerResult] = field(default_factory=list)
    error: str = ""
    measured: set[int] = field(default_factory=set)     # alone: cases deferred by their host_fraction

    @property
    def gpu(self) -> str:
        """The device every row of this group names: cuda:N in this process's numbering."""
        return self.slot.label if self.slot else self.device

    def env(self) -> dict[str, str | None]:
        return self.slot.env() if self.slot else {}


def plan_groups(cases: list[PerfCase], backends: list[str], processes: int, device: str,
                slots: list[GpuSlot] | None, alone_below_mib: float) -> list[Group]:
    """The groups of a run, side-by-side ones first (module docstring); `device` names a plain run's device."""
    runnable = [c for c in cases if not c.skip]

    def group(slot: GpuSlot | None, alone: bool, chosen: list[PerfCase]) -> Group:
        return Group(slot, alone, chosen, [worker_order(chosen, backends, w) for w in range(processes)], device)

    if not slots:
        return [group(None, False, runnable)]
    shares = deal(runnable, len(slots), lambda c: (c.backend, c.op, c.dtype, c.shape))
    side = [group(slot, False, [c for c in share if not host_bound(c, alone_below_mib)])
            for slot, share in zip(slots, shares)]
    alone = [group(slot, True, [c for c in share if host_bound(c, alone_below_mib)])
             for slot, share in zip(slots, shares)]
    return [g for g in side + alone if g.cases]


def group_spec(group: Group, device: str, protocol: dict[str, Any], phases: int,
               defer_host_bound: float | None = None) -> list[dict[str, Any]]:
    """The worker specs of a group; a GPU's workers see only that GPU (as cuda:0). In a side-by-side group
    on several GPUs, a case measured host-bound (host_fraction >= defer_host_bound) is deferred, not timed."""
    where = group.slot.worker_device if group.slot else device
    if group.slot and not group.alone and defer_host_bound is not None:
        protocol = {**protocol, "defer_host_bound": defer_host_bound}
    return [{"device": where, "protocol": protocol, "phases": phases, "cases": [c.to_spec() for c in order]}
            for order in group.orders]


def deferred_ids(group: Group) -> set[int]:
    """Cases some worker of a side-by-side group measured host-bound and did not time."""
    return {int(e["id"]) for r in group.results for e in (r.payload or {}).get("cases", [])
            if isinstance(e, dict) and e.get("status") == "deferred"}


def run_groups(groups: list[Group], run_group: Callable[[Group, threading.Event | None], list[WorkerResult]],
               backends: list[str] | None = None) -> None:
    """Run every group: one device in this thread; several GPUs through lnbench.gpus.run_spread, the
    side-by-side groups first, then, one GPU at a time, the alone groups, each with the cases its GPU's
    side-by-side group deferred (a new alone group where there was none; appended to `groups`). Each group's
    results, or the error that ended it, are stored in the group."""
    if len(groups) == 1 and groups[0].slot is None:
        groups[0].results = run_group(groups[0], None)
        return
    by_slot: dict[tuple[int, bool], Group] = {(g.slot.index, g.alone): g for g in groups if g.slot}
    slots = sorted({g.slot for g in groups if g.slot}, key=lambda s: s.index)

    def run(slot: GpuSlot, items: list[Group], stop: threading.Event) -> list[WorkerResult]:
        return run_group(items[0], stop)

    def done(record: SlotRun[list[WorkerResult]]) -> None:
        group = by_slot[(record.slot.index, record.alone)]
        group.results, group.error = record.result or group.results, record.error

    side = [[by_slot[(s.index, False)]] if (s.index, False) in by_slot else [] for s in slots]
    run_spread(slots, side, [[] for _ in slots], run, done)
    for slot in slots:                       # what the side-by-side groups deferred joins its GPU's alone group
        side_group = by_slot.get((slot.index, False))
        deferred = deferred_ids(side_group) if side_group else set()
        later = [c for c in side_group.cases if c.id in deferred] if deferred else []
        if not later:
            continue
        alone = by_slot.get((slot.index, True))
        if alone is None:
            alone = by_slot[(slot.index, True)] = Group(slot, True, [], [], side_group.device)
            groups.append(alone)
        alone.cases = sorted(alone.cases + later, key=lambda c: c.id)
        alone.measured |= {c.id for c in later}
        alone.orders = [worker_order(alone.cases, backends or sorted({c.backend for c in alone.cases}), w)
                        for w in range(len(side_group.orders))]
    alone_lists = [[by_slot[(s.index, True)]] if (s.index, True) in by_slot else [] for s in slots]
    run_spread(slots, [[] for _ in slots], alone_lists, run, done)


def group_rows(group: Group, peak_gbps: float | None, baseline: str, headline: str) -> dict[int, list[dict[str, Any]]]:
    """Case id -> its rows from this group's results, each naming the GPU and whether it ran alone (a case the
    group deferred has none here: its rows come from its GPU's alone group)."""
    results = group.results or []
    if group.error and not results:
        results = [WorkerResult(i, False, None, False, None, group.error, 0.0) for i in range(len(group.orders))]
    rows = build_rows(group.cases, group.orders, results, peak_gbps, baseline, headline)
    out: dict[int, list[dict[str, Any]]] = {}
    cases = iter(group.cases)
    case = next(cases, None)
    for row in rows:
        why = ("measured" if case.id in group.measured else "size") if group.alone else ""
        row.update(gpu=group.gpu, gpu_model=group.slot.model if group.slot else "", timed_alone=group.alone,
                   alone_reason=why)
        out.setdefault(case.id, []).append(row)
        if row["row_kind"] == "aggregate":
            case = next(cases, None)
    for case_id in deferred_ids(group) if not group.alone else ():
        out.pop(case_id, None)
    return out


def joined_rows(cases: list[PerfCase], groups: list[Group], peak_gbps: float | None, baseline: str,
                headline: str, finished_only: bool = False) -> list[dict[str, Any]]:
    """Every case's rows in case order (a case no group ran: its `not run` row); speed-ups across groups.
    finished_only: only cases some worker already reported (a checkpoint while the run goes on)."""
    by_case: dict[int, list[dict[str, Any]]] = {}
    for group in groups:
        if group.results or group.error:
            by_case.update(group_rows(group, peak_gbps, baseline, headline))
    skipped = [c for c in cases if c.skip]
    plain = next((g.device for g in groups if g.slot is None), "")
    for case_id, rows in group_rows(Group(None, False, skipped, [], plain), peak_gbps, baseline, headline).items():
        by_case[case_id] = rows
    if finished_only:
        reported = {int(e["id"]) for g in groups for r in g.results for e in (r.payload or {}).get("cases", [])
                    if isinstance(e, dict) and "id" in e} | {c.id for c in skipped}
        by_case = {k: v for k, v in by_case.items() if k in reported}
    rows = [row for case in cases for row in by_case.get(case.id, [])]
    add_speedups(rows, baseline)
    return rows
