"""The workers stage of `lnbench perf` (plan → workers → aggregate → outputs): every group's worker processes
(lnbench.perf.spread.run_groups, lnbench.run.workers.run_workers) under one progress bar and estimate."""
from __future__ import annotations

import os
import threading
from typing import Callable

from rich.markup import escape

from lnbench.cli_common import err_console
from lnbench.run.workers import WorkerResult, run_workers
from lnbench.perf.calibrate import costs_here, perf_upfront
from lnbench.perf.estimate import PerfEstimate
from lnbench.perf.plan import PerfPlan
from lnbench.perf.spread import Group, group_spec, run_groups
from lnbench.perf.worker_main import KERNEL_PHASES, STREAM_PHASES
from lnbench.run.eta import busy_threads, cores
from lnbench.run import upfront
from lnbench.run.upfront import record_run
from lnbench.run.progress import CommandProgress

WORKER_MODULE = "lnbench.perf.worker_main"


def _worker_env() -> dict[str, str]:
    """Extra worker environment: Inductor compiles in-process (no compile-worker pool to start or leave
    behind; kernel speed is unaffected) unless the user set TORCHINDUCTOR_COMPILE_THREADS."""
    return {} if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ else {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def time_groups(plan: PerfPlan, peak_gbps: float | None, quiet: bool,
                checkpoint: Callable[[int], None]) -> PerfEstimate:
    """Run every group's workers with one progress bar; each group's results are stored in it (Group.results).
    After each finished worker `checkpoint(workers finished ok)` keeps what is done, so an interrupt loses
    nothing. Returns the run's estimate (its model, and when it was made)."""
    groups, protocol = plan.groups, plan.protocol
    phases = KERNEL_PHASES if plan.kernel_pass else STREAM_PHASES
    each = 2 if plan.kernel_pass else 1               # the kernel pass reports each case again
    done_units: dict[tuple[int, int], int] = {}
    total = sum(len(o) * each for g in groups for o in g.orders)
    guard = threading.Lock()
    kind, others = plan.dev.torch_device.type, busy_threads()
    bandwidth = peak_gbps if kind == "cuda" else None
    estimate = PerfEstimate([g.orders for g in groups], protocol, kind, bandwidth, plan.kernel_pass, others,
                            costs=costs_here(plan.dev, others, bandwidth))
    work = upfront.work_signature([[[repr(c) for c in order] for order in g.orders] for g in groups], repr(protocol),
                                  plan.kernel_pass)
    ahead = perf_upfront([c for g in groups for c in g.cases], plan.dev, estimate.wall_s, work=work,
                         slowdown=estimate.scale)
    estimate.running.set_prior(ahead.ratio)
    ahead.keep(plan.run)
    if not quiet:
        workers = sum(len(g.orders) for g in groups)
        err_console.print(escape(ahead.line(f"{workers} worker{'s' if workers > 1 else ''}, "
                                            f"{sum(len(g.cases) for g in groups)} cases", estimate.others, cores())),
                          soft_wrap=True, highlight=False)
    with CommandProgress(err_console, "timing", total, quiet, estimate.remaining_s) as progress:

        def run_group(group: Group, stop: threading.Event | None) -> list[WorkerResult]:
            number = groups.index(group)

            def on_progress(index: int, done: int, label: str) -> None:
                order = group.orders[index]
                case = order[(done - 1) % len(order)] if order and done else None
                what = (f"{case.backend} {case.op} {case.dtype} {case.shape} {case.mode}"
                        f"{' kernel time' if done > len(order) else ''} {label.rsplit(' ', 1)[-1]}") if case else label
                where = f"{group.gpu} " if plan.slots else ""
                with guard:
                    done_units[(number, index)] = done
                    estimate.update(number, index, done)
                    progress.update(sum(done_units.values()), what, f"{where}worker {index + 1}/{protocol.processes}")

            def on_done(result: WorkerResult) -> None:
                with guard:
                    group.results.append(result)
                    checkpoint(sum(r.ok for g in groups for r in g.results))

            specs = group_spec(group, str(plan.dev.torch_device), protocol.to_dict(), len(phases),
                               plan.host_share if plan.spread else None)
            return run_workers(WORKER_MODULE, specs, protocol.worker_timeout_s, env={**_worker_env(), **group.env()},
                               on_progress=on_progress, on_done=on_done, phases=phases, stop=stop)

        run_groups(groups, run_group)
    actual = estimate.running.clock() - estimate.running.start
    ahead.keep(plan.run, actual)                  # the rest (aggregate, files) takes a moment more
    if all(r.ok for g in groups for r in g.results) and not any(g.error for g in groups):
        record_run(ahead, actual)
    return estimate
