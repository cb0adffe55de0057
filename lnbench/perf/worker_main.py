"""The perf worker process: `python -m lnbench.perf.worker_main SPEC_JSON RESULT_JSON PROGRESS_TXT`.

It imports torch and the backends once, runs every case of its spec in the given order (the parent rotates
the backend order between workers), and rewrites its result file after each case, so a later crash or hang
still leaves the finished cases behind. One case raising never stops the others.

Start-up (context, backend imports) runs side by side with the other workers; then two passes, each a turn
given by the parent (lnbench.run.workers): first every case is stream-timed (lnbench.measure.timing); then,
when the spec has the KERNEL_PHASES, the profiler is set up (side by side, once every worker's stream pass
is over) and every case that ran is built again, briefly re-warmed and given R profiled runs
(lnbench.measure.kernel_timer): no profiler is loaded in any worker while a stream-timed run goes on. Where
there is no GPU activity to record, each case gets an "n/a" kernel summary with the reason and no second
pass runs (no progress lines either).

Spec: lnbench.perf.messages.PerfWorkerSpec (its cases: CaseSpec). Result: PerfWorkerPayload (its cases:
CaseResult), rewritten as JSON after each case.

Test hook: LNBENCH_PERF_FAULT="<worker index>:<crash|hang>[:<after N cases>][,...]" makes that worker exit
with status 3 (after a line on stderr) or sleep forever once N cases are done; LNBENCH_PERF_FAULT_MARK, where set,
names a file created once the line is written (a test's clock waits for it, not for the machine). It exists for
the unit tests.
"""
from __future__ import annotations

import gc
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from lnbench.errors import one_line
from lnbench.measure.host_lock import Section, host_lock_from_env
from lnbench.run.workers import PARALLEL, SEQUENTIAL, read_spec, report_progress, wait_turn, write_result
from lnbench.perf.messages import CaseResult, CaseSpec, PerfWorkerPayload, PerfWorkerSpec
from lnbench.perf.protocol import PerfProtocol

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.run.device import Device


def _fault(index: int, done: int) -> None:
    """Honour LNBENCH_PERF_FAULT for this worker (test hook; comma-separated entries allowed)."""
    for item in os.environ.get("LNBENCH_PERF_FAULT", "").split(","):
        parts = item.strip().split(":")
        if len(parts) < 2 or parts[0] != str(index):
            continue
        after = int(parts[2]) if len(parts) > 2 else 0
        if done != after:
            continue
        sys.stderr.write(f"lnbench test fault: worker {index} {parts[1]} after {done} case(s)\n")
        sys.stderr.flush()
        if os.environ.get("LNBENCH_PERF_FAULT_MARK"):       # tells a test's clock that the fault is reached
            open(os.environ["LNBENCH_PERF_FAULT_MARK"], "w").close()
        if parts[1] == "crash":
            os._exit(3)
        if parts[1] == "hang":
            time.sleep(3600)


def _workload(case: CaseSpec, dev: Device, protocol: PerfProtocol, backends: dict[str, Any]) -> tuple[Any, str]:
    """(workload, '') for a case, or (None, why the backend cannot run here)."""
    from lnbench.backends import get_backend
    from lnbench.constants import DTYPES
    from lnbench.perf.workloads import build_workload

    name = case.backend
    if name not in backends:
        backends[name] = get_backend(name)
    backend = backends[name]
    avail = backend.availability(dev)
    if not avail.runnable:
        return None, avail.reason
    return build_workload(
        backend, case.op, case.mode, int(case.m), int(case.n), DTYPES[case.dtype], dev.torch_device,
        eps=float(case.eps), seed=int(case.seed), cold_factor=float(protocol.cold_factor),
        cold_mem_fraction=float(protocol.cold_mem_fraction), llc_override=int(float(protocol.llc_mib) * (1 << 20))), ""


def _release(device: Any) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_case(case: CaseSpec, dev: Device, spec: PerfWorkerSpec, backends: dict[str, Any]) -> CaseResult:
    """Time one case on `dev` (stream time); exceptions become an `error` entry. On several GPUs its warm-up
    and runs hold the host lock (lnbench.measure.host_lock): the entry's `alone` says why it was timed alone."""
    from lnbench.measure.timing import measure, synchronize

    out = CaseResult(case.id, "ok")
    device = dev.torch_device
    start = time.perf_counter()
    workload = None
    try:
        workload, why_not = _workload(case, dev, spec.protocol, backends)
        if workload is None:
            out.status, out.detail = "not run", why_not
            return out
        lock = host_lock_from_env()
        if lock is not None:            # first use (a JIT compile) before taking the lock: other GPUs need not wait
            workload.fn()
            synchronize(device)
        with Section(lock, case.alone, spec.alone_host_fraction) as held:
            result = measure(workload.fn, device, timer=workload.timer, **spec.protocol.timing_kwargs(),
                             before_runs=held.before_runs)
        out.measurement, out.nbytes, out.sets = result.to_dict(), workload.nbytes, workload.sets
        out.working_set_bytes, out.llc_bytes, out.note = workload.working_set_bytes, workload.llc_bytes, workload.note
        out.alone, out.lock_spans = held.alone, held.spans
    except Exception as exc:  # one broken case must not lose the others
        out.status, out.detail = "error", one_line(exc, 500)
    finally:
        del workload
        _release(device)
        out.seconds = time.perf_counter() - start
    return out


#: a worker's phases with the kernel timer on (lnbench.run.workers): its stream pass (one worker at a time),
#: the profiler's set-up (all workers side by side: CUPTI stays loaded once set up, and slows launches, so
#: it never happens before every worker's stream pass is over), its kernel pass (one at a time)
KERNEL_PHASES = (SEQUENTIAL, PARALLEL, SEQUENTIAL)
STREAM_PHASES = (SEQUENTIAL,)

def run_kernel_case(case: CaseSpec, entry: CaseResult, dev: Device, protocol: PerfProtocol,
                    backends: dict[str, Any], timer: Any) -> dict[str, Any]:
    """Kernel time of a case that was stream-timed: the workload built again, briefly re-warmed, then R
    profiled runs of isolated calls (lnbench.measure.kernel_timer; cold-cache calls for a cold workload).
    Returns the kernel_stats summary; exceptions become an "error" summary."""
    from lnbench.measure import kernel_stats
    from lnbench.measure.kernel_timer import measure_kernels
    from lnbench.measure.timing import REWARM_CALLS, REWARM_S, warm_up

    workload = None
    try:
        workload, why_not = _workload(case, dev, protocol, backends)
        if workload is None:
            return kernel_stats.not_available(why_not)
        with Section(host_lock_from_env(), False, None):      # device time: other GPUs may time meanwhile
            per_call = warm_up(workload.fn, dev.torch_device, min(float(protocol.warmup_s), REWARM_S),
                               REWARM_CALLS)[2]     # a case this process already compiled and timed
            measured = entry.measurement or {}
            return measure_kernels(workload.fn, dev.torch_device, iters=int(measured["iters_per_run"]),
                                   runs=int(protocol.runs), clean=workload.sets > 1,
                                   host_us_per_call=per_call * 1e6, timer=timer)
    except Exception as exc:  # noqa: BLE001 - the stream-time result stands
        return kernel_stats.not_available(one_line(exc, 500), "error")
    finally:
        del workload
        _release(dev.torch_device)


def kernel_pass(payload: PerfWorkerPayload, cases: list[CaseSpec], dev: Device, protocol: PerfProtocol,
                backends: dict[str, Any], write: Callable[[PerfWorkerPayload], None],
                progress: Callable[[str], None]) -> None:
    """Second pass: a kernel summary for every case that ran (see the module docstring)."""
    from lnbench.measure import kernel_stats, kernel_timer

    reason = kernel_timer.unavailable_reason(dev)   # where it cannot run, say so: turning it on would not help
    if not reason and not protocol.kernel_timer:
        reason = "kernel timer off: --kernel-timer turns it on"
    timer = None if reason else kernel_timer.KernelTimer(dev.torch_device)
    for case, entry in zip(cases, payload.cases):
        if entry.status == "ok":
            entry.kernel = (kernel_stats.not_available(reason) if reason
                            else run_kernel_case(case, entry, dev, protocol, backends, timer))
        if timer is not None:
            write(payload)
            progress(f"{case.id} kernel {(entry.kernel or {}).get('status', entry.status)}")
    write(payload)


def start_up(cases: list[CaseSpec], dev: Device) -> dict[str, Any]:
    """What a worker does before its turn (side by side with the other workers): create the device context
    and import every backend its cases name. Nothing is launched on the device here."""
    import torch

    import lnbench.measure.timing  # noqa: F401 - what the first case would import, inside its turn
    import lnbench.perf.workloads  # noqa: F401
    from lnbench.backends import get_backend

    if dev.torch_device.type == "cuda":
        torch.empty(1, device=dev.torch_device)          # the context, with no kernel launched
    backends: dict[str, Any] = {}
    for name in dict.fromkeys(case.backend for case in cases):
        try:
            backend = get_backend(name)
            if backend.availability(dev).runnable:
                backend.preload()
            backends[name] = backend
        except Exception:  # noqa: BLE001 - the same failure is reported per case when its turn comes
            pass
    return backends


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    wire, result_path, progress_path = read_spec(argv)
    spec = PerfWorkerSpec.from_wire(wire)
    index = int(os.environ.get("LNBENCH_WORKER_INDEX", 0))
    payload = PerfWorkerPayload(index, os.getpid(), spec.device)

    def write(payload: PerfWorkerPayload) -> None:
        write_result(result_path, payload.to_wire())

    write(payload)
    _fault(index, 0)
    import torch

    from lnbench.run.device import torch_device_info

    device = torch.device(spec.device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    dev = torch_device_info(device)
    backends = start_up(spec.cases, dev)
    payload.startup_s = time.monotonic() - started
    gc.freeze()     # the modules and backends live as long as the worker: each case's collection (_release)
    wait_turn()     # need not scan them (~0.1 s a case with torch loaded)
    turn = time.monotonic()
    for case in spec.cases:
        entry = run_case(case, dev, spec, backends)
        payload.cases.append(entry)
        write(payload)
        report_progress(progress_path, f"{case.id} {entry.status}")
        _fault(index, len(payload.cases))
    payload.stream_s = time.monotonic() - turn
    lock = host_lock_from_env()
    if lock is not None:
        payload.lock_wait_s = round(lock.waited_s, 3)
    write(payload)
    if spec.phases == len(KERNEL_PHASES):
        wait_turn()                                       # every worker's stream pass is over: side by side,
        try:                                              # the profiler's set-up (seconds, no device work)
            from lnbench.measure.kernel_timer import KernelTimer
            KernelTimer.set_up_profiler()
        except Exception:  # noqa: BLE001 - the kernel pass reports the same failure per case
            pass
        wait_turn()                                       # then the kernel passes, one worker at a time
    turn = time.monotonic()
    kernel_pass(payload, spec.cases, dev, spec.protocol, backends, write,
                lambda label: report_progress(progress_path, label))
    payload.kernel_s = time.monotonic() - turn
    payload.complete = True
    write(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
