"""Worker process of `lnbench abi-compare` (`python -m lnbench.abi.worker_main SPEC RESULT [PROGRESS]`).

Spec: lnbench.abi.messages.AbiWorkerSpec. The worker builds its cases once, then runs
lnbench.abi.pair_timing.run_worker, writing the (possibly partial) payload (AbiWorkerPayload) after the checks
and after every round. On the null device the cases are first checked by execution on the
emulated device, in this process, and then timed on the null device (lnbench.abi.null_device).
"""
from __future__ import annotations

import os
from typing import Callable

import torch

from lnbench.abi import null_device
from lnbench.abi.cases import build_cases
from lnbench.abi.checks import Checker, run_checks
from lnbench.abi.messages import AbiWorkerPayload, AbiWorkerSpec
from lnbench.abi.pair_timing import run_worker
from lnbench.run.device import activate, parse_device
from lnbench.measure.host_lock import host_lock_from_env
from lnbench.run.workers import read_spec, report_progress, wait_turn, write_result


def run_spec(spec: AbiWorkerSpec, on_update: Callable[[AbiWorkerPayload], None] | None = None,
             on_progress: Callable[[str], None] | None = None) -> AbiWorkerPayload:
    """Build the cases a spec describes and run one worker over them (also used in-process by tests)."""
    device = torch.device(spec.device)
    if device.type == "cuda":
        if device.index is not None:
            torch.cuda.set_device(device)
    else:
        torch.set_num_threads(spec.cpu_threads)   # no thread oversubscription noise
    shapes, probes, options = spec.shapes, spec.probe_shapes, spec.pair_options
    checker: Checker = run_checks
    dev = parse_device(spec.lnbench_device) if spec.lnbench_device else None
    if dev is not None and dev.is_null:
        budget = null_device.CHECK_ELEMENTS if spec.check_elements is None else int(spec.check_elements)
        executed = null_device.executed_checks(spec.pair, spec.ops, spec.dtypes, shapes, probes, dev.arch, spec.eps,
                                               spec.seed, options, budget)
        checker, probes = null_device.checker(executed), []
    if dev is not None:
        activate(dev)
    cases = build_cases(spec.pair, spec.ops, spec.dtypes, shapes, device, spec.eps, spec.seed, options)
    probe_cases = (build_cases(spec.pair, spec.ops[:1], spec.dtypes[:1], probes, device, spec.eps, spec.seed + 1000,
                               options) if probes else [])
    index = int(os.environ.get("LNBENCH_WORKER_INDEX", 0)) if spec.worker_index is None else spec.worker_index
    return run_worker(cases, spec.protocol, device, worker_index=index, metrics=spec.metrics, probe_cases=probe_cases,
                      on_update=on_update, on_progress=on_progress, checker=checker)


def main() -> None:
    wire, result_path, progress_path = read_spec()
    spec = AbiWorkerSpec.from_wire(wire)
    if torch.device(spec.device).type == "cuda":
        torch.empty(1, device=spec.device)          # start-up: the context, with no kernel launched
    wait_turn()
    lock = host_lock_from_env()          # --devices: no other GPU times while this worker does (its whole turn)
    if lock is not None:
        lock.acquire(exclusive=True)
    try:
        run_spec(spec, on_update=lambda payload: write_result(result_path, payload.to_wire()),
                 on_progress=lambda label: report_progress(progress_path, label))
    finally:
        if lock is not None:
            lock.release()


if __name__ == "__main__":
    main()
