"""The workers stage of abi-compare's runtime part (plan → workers → aggregate → tables): which metrics can be
measured here, and P worker processes timing them, on one device or on every GPU of --devices at once.

With --devices the shapes are dealt out over the GPUs and every GPU's workers start at once; each worker's timed
turn holds the host lock exclusive (lnbench.measure.host_lock), so it times while no other GPU is timing: what
abi-compare measures is the host's cost of a launch, which any other timing on the host would move."""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable

from lnbench.abi.aggregate import NOT_RUN_EMULATED, NOT_RUN_NO_FLYDSL, NOT_RUN_NO_ROCM, NOT_RUN_NULL_DEVICE_TIME
from lnbench.abi.cases import flydsl_pair
from lnbench.abi.messages import AbiWorkerPayload, AbiWorkerSpec, Share
from lnbench.abi.plan import AbiPlan, check_elements
from lnbench.abi.static import flydsl_installed
from lnbench.cli_common import err_console
from lnbench.measure.host_lock import lock_environment
from lnbench.run.device import Device
from lnbench.run.gpus import GpuSlot, deal, run_spread
from lnbench.run.progress import CommandProgress

WORKER_MODULE = "lnbench.abi.worker_main"


def not_run_status(pair: str, device: Device, metric: str) -> str:
    """`not run (reason)` when no worker can measure `metric` of `pair` on `device`, else ''."""
    if not device.host_times_are_real:
        return NOT_RUN_EMULATED
    if flydsl_pair(pair) and not device.launches_flydsl:
        return NOT_RUN_NO_ROCM
    if flydsl_pair(pair) and not flydsl_installed():
        return NOT_RUN_NO_FLYDSL
    if metric == "device" and not device.times_are_real:     # the null device: launches execute nothing
        return NOT_RUN_NULL_DEVICE_TIME
    return ""


def probe_shapes(shapes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """An extra, untimed shape for the alternation check when all shapes share one N."""
    if len({n for _, n in shapes}) >= 2:
        return []
    m, n = shapes[0]
    return [(m, n * 2 if n <= 8192 else n // 2)]


def time_shares(plan: AbiPlan, measured: list[str], quiet: bool) -> list[Share]:
    """Every share's workers timing the `measured` metrics of its shapes (none when nothing can be measured)."""
    slots: list[GpuSlot] = plan.slots or []
    dealt = zip(slots, deal(plan.shapes, len(slots))) if slots else [(None, plan.shapes)]
    shares = [Share(slot, list(shapes)) for slot, shapes in dealt if shapes] if measured else []
    if not shares:
        return []
    protocol = plan.protocol
    total = sum(len(s.shapes) * len(plan.ops) * len(plan.dtypes) + protocol.runs for s in shares) * protocol.processes
    done: dict[tuple[int, int], int] = {}
    guard = threading.Lock()
    with CommandProgress(err_console, f"abi-compare {plan.pair}", total, quiet) as progress:

        def on_progress(number: int, worker: int, count: int, label: str) -> None:
            with guard:
                done[(number, worker)] = count
                where = f"{slot.label} " if (slot := shares[number].slot) else ""
                progress.update(sum(done.values()), label, f"abi-compare {plan.pair} {where}worker {worker + 1}/"
                                                           f"{protocol.processes}")

        def run_share(number: int, stop: threading.Event | None, lock: dict[str, str]) -> None:
            share = shares[number]
            env = {**share.slot.env(), **lock} if share.slot else None
            where = share.slot.worker_device if share.slot else str(plan.dev.torch_device)
            share.payloads, share.problems = _run_workers(plan, share.shapes, measured, where, env,
                                                          lambda *a: on_progress(number, *a), stop)
            share.ran = True

        if slots:
            numbers = {s.slot.index: k for k, s in enumerate(shares) if s.slot is not None}     # (all are)

            def slot_done(record) -> None:                 # a GPU whose run raised: its error, no payloads
                share = shares[numbers[record.slot.index]]
                if not share.ran:
                    share.problems, share.ran = [record.error] if record.error else [], True

            with lock_environment() as lock:
                run_spread([s.slot for s in shares if s.slot is not None], [[k] for k in range(len(shares))],
                           lambda slot, items, stop: run_share(items[0], stop, lock), slot_done)
        else:
            run_share(0, None, {})
    for share in shares:
        if not share.ran:
            share.problems = ["no result"]
    return shares


def _run_workers(plan: AbiPlan, shapes: list[tuple[int, int]], metrics: list[str], where: str,
                 env: dict[str, str | None] | None, on_progress: Callable[[int, int, str], None],
                 stop: threading.Event | None = None) -> tuple[list[AbiWorkerPayload], list[str]]:
    """(payloads, problems) of P workers timing `metrics` of every case on `where` (in this process with
    --in-process), with `env` added to theirs (a GPU's visibility and the host lock, --devices).
    on_progress(worker, units done, label)."""
    spec = AbiWorkerSpec(plan.pair, list(plan.ops), list(plan.dtypes), list(shapes), plan.eps, plan.seed,
                         plan.protocol, probe_shapes(shapes), where, list(metrics), plan.pair_options)
    if plan.dev.is_null:                          # each worker activates it (and checks by execution on the emulator)
        spec = replace(spec, lnbench_device=plan.dev.name, check_elements=check_elements(plan.table))
    specs = [replace(spec, worker_index=i) for i in range(plan.protocol.processes)]
    payloads: list[AbiWorkerPayload] = []
    problems: list[str] = []
    if plan.in_process:
        from lnbench.abi.worker_main import run_spec
        for i, one in enumerate(specs):
            count = [0]

            def advance(label: str, i: int = i, count: list[int] = count) -> None:
                count[0] += 1
                on_progress(i, count[0], label)

            payloads.append(run_spec(one, on_progress=advance))
        return payloads, problems
    from lnbench.run.workers import run_workers
    for result in run_workers(WORKER_MODULE, specs, plan.protocol.worker_timeout_s, env=env, on_progress=on_progress,
                              stop=stop):
        if result.payload:
            payloads.append(AbiWorkerPayload.from_wire(result.payload))
        if not result.ok:
            problems.append(result.problem())
    return payloads, problems
