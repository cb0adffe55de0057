"""perf's cases on one device or spread over several GPUs (lnbench.run.gpus): which cases run where (the plan's
groups), the worker specs of each GPU's group, and running the groups (lnbench.perf.workers). Their results become
rows in lnbench.perf.aggregate.

One device: one group, every case, the protocol as always. Several GPUs: the runnable cases are dealt out over
the GPUs in case order (lnbench.run.gpus.deal, a shape's cold and hot cases together); every GPU runs its group of P
workers at the same time as the others, and the workers of all GPUs share one host lock
(lnbench.measure.host_lock): a case's timed runs hold it shared while the GPU sets their time, exclusive when
the host does (`alone`: fewer bytes per call than [perf] alone_below_mib, "size"; or a host share of at least
[perf] alone_host_fraction in the untimed run before them, "measured"), so a host-bound case is timed while no
other GPU is timing. Every row names its GPU (`gpu`, `gpu_model`) and whether it was timed alone
(`timed_alone`, `alone_reason`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from lnbench.constants import DTYPES
from lnbench.run.gpus import GpuSlot, SlotRun, deal, run_spread
from lnbench.measure.host_lock import lock_environment
from lnbench.perf.bytes_model import op_bytes
from lnbench.perf.cases import PerfCase, worker_order
from lnbench.perf.messages import CaseSpec, PerfWorkerSpec
from lnbench.perf.protocol import PerfProtocol
from lnbench.run.workers import WorkerResult

MIB = 1 << 20


def host_bound(case: PerfCase, alone_below_mib: float) -> bool:
    """A case whose time the host sets more than the GPU: fewer model bytes per call than the threshold."""
    return op_bytes(case.op, case.m, case.n, DTYPES[case.dtype].itemsize) < alone_below_mib * MIB


@dataclass
class Group:
    """One run_workers call: the cases of one GPU (or of the one device)."""

    slot: GpuSlot | None               # None: the one device of a plain run
    cases: list[PerfCase]
    orders: list[list[PerfCase]]       # per worker
    device: str = ""                   # the one device's name (a plain run)
    alone_ids: set[int] = field(default_factory=set)    # cases host-bound by size (timed alone)
    lock_env: dict[str, str] = field(default_factory=dict)    # the host lock all GPUs' workers share
    results: list[WorkerResult] = field(default_factory=list)
    error: str = ""

    @property
    def gpu(self) -> str:
        """The device every row of this group names: cuda:N in this process's numbering."""
        return self.slot.label if self.slot else self.device

    def env(self) -> dict[str, str | None]:
        return {**self.slot.env(), **self.lock_env} if self.slot else {}


def plan_groups(cases: list[PerfCase], backends: list[str], processes: int, device: str,
                slots: list[GpuSlot] | None, alone_below_mib: float) -> list[Group]:
    """The groups of a run, one per GPU (module docstring); `device` names a plain run's device."""
    runnable = [c for c in cases if not c.skip]

    def group(slot: GpuSlot | None, chosen: list[PerfCase]) -> Group:
        alone = {c.id for c in chosen if host_bound(c, alone_below_mib)} if slot else set()
        return Group(slot, chosen, [worker_order(chosen, backends, w) for w in range(processes)], device, alone)

    if not slots:
        return [group(None, runnable)]
    shares = deal(runnable, len(slots), lambda c: (c.backend, c.op, c.dtype, c.shape))
    return [group(slot, share) for slot, share in zip(slots, shares) if share]


def group_spec(group: Group, device: str, protocol: PerfProtocol | dict[str, Any], phases: int,
               alone_host_fraction: float | None = None) -> list[PerfWorkerSpec]:
    """The worker specs of a group; a GPU's workers see only that GPU (as cuda:0). On several GPUs a case says
    whether it is host-bound by size (`alone`), and the spec the host share that makes one host-bound."""
    where = group.slot.worker_device if group.slot else device
    if isinstance(protocol, dict):
        protocol = PerfProtocol.from_dict(protocol)
    share = alone_host_fraction if group.slot else None
    return [PerfWorkerSpec(where, protocol, [CaseSpec.of(c, c.id in group.alone_ids) for c in order], phases, share)
            for order in group.orders]


def run_groups(groups: list[Group], run_group: Callable[[Group, threading.Event | None], list[WorkerResult]]
               ) -> None:
    """Run every group: one device in this thread; several GPUs all at once through lnbench.run.gpus.run_spread,
    their workers sharing one host lock. Each group's results, or the error that ended it, are stored in it."""
    if len(groups) == 1 and groups[0].slot is None:
        groups[0].results = run_group(groups[0], None)
        return
    by_slot = {g.slot.index: g for g in groups if g.slot}
    slots = sorted((g.slot for g in groups if g.slot), key=lambda s: s.index)

    def done(record: SlotRun[list[WorkerResult]]) -> None:
        group = by_slot[record.slot.index]
        group.results, group.error = record.result or group.results, record.error

    with lock_environment() as lock:
        for group in groups:
            group.lock_env = lock
        run_spread(slots, [[by_slot[s.index]] for s in slots], lambda slot, items, stop: run_group(items[0], stop),
                   done)
