"""The perf worker process: `python -m lnbench.perf.worker_main SPEC_JSON RESULT_JSON PROGRESS_TXT`.

It imports torch and the backends once, runs every case of its spec in the given order (the parent rotates
the backend order between workers), and rewrites its result file after each case, so a later crash or hang
still leaves the finished cases behind. One case raising never stops the others.

Spec: {"device": "cuda:0", "protocol": {timing + cold settings}, "cases": [{"id", "backend", "op", "mode",
"dtype", "m", "n", "eps", "seed"}, ...]}.
Result: {"worker", "pid", "device", "complete", "cases": [{"id", "status": "ok" | "error" | "not run",
"detail", "measurement": Measurement.to_dict(), "nbytes", "sets", "working_set_bytes", "llc_bytes",
"note", "seconds"}, ...]}.

Test hook: LNBENCH_PERF_FAULT="<worker index>:<crash|hang>[:<after N cases>][,...]" makes that worker exit
with status 3 (after a line on stderr) or sleep forever once N cases are done. It exists for the unit tests.
"""
from __future__ import annotations

import gc
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from lnbench.perf.workers import read_spec, report_progress, write_result

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.device import Device


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
        if parts[1] == "crash":
            os._exit(3)
        if parts[1] == "hang":
            time.sleep(3600)


def run_case(case: dict[str, Any], dev: Device, protocol: dict[str, Any], backends: dict[str, Any]
             ) -> dict[str, Any]:
    """Time one case on `dev`; exceptions become an `error` entry."""
    import torch

    from lnbench.backends import get_backend
    from lnbench.config import DTYPES
    from lnbench.perf.timing import measure
    from lnbench.perf.workloads import build_workload

    out: dict[str, Any] = {"id": case["id"], "status": "ok", "detail": ""}
    device = dev.torch_device
    start = time.perf_counter()
    workload = None
    try:
        name = case["backend"]
        if name not in backends:
            backends[name] = get_backend(name)
        backend = backends[name]
        avail = backend.availability(dev)
        if not avail.runnable:
            out.update(status="not run", detail=avail.reason)
            return out
        workload = build_workload(
            backend, case["op"], case["mode"], int(case["m"]), int(case["n"]), DTYPES[case["dtype"]], device,
            eps=float(case.get("eps", 1e-5)), seed=int(case.get("seed", 0)),
            cold_factor=float(protocol.get("cold_factor", 3.0)),
            cold_mem_fraction=float(protocol.get("cold_mem_fraction", 0.4)),
            llc_override=int(float(protocol.get("llc_mib", 0)) * (1 << 20)))
        timing = {k: protocol[k] for k in ("runs", "warmup_s", "min_warmup_calls", "target_run_s",
                                           "min_iters", "max_iters")}
        result = measure(workload.fn, device, timer=workload.timer, **timing)
        out.update(measurement=result.to_dict(), nbytes=workload.nbytes, sets=workload.sets,
                   working_set_bytes=workload.working_set_bytes, llc_bytes=workload.llc_bytes,
                   note=workload.note)
    except Exception as exc:  # one broken case must not lose the others
        out.update(status="error", detail=(f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:500])
    finally:
        del workload
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        out["seconds"] = time.perf_counter() - start
    return out


def main(argv: list[str] | None = None) -> int:
    spec, result_path, progress_path = read_spec(argv)
    index = int(os.environ.get("LNBENCH_WORKER_INDEX", spec.get("worker", 0)))
    payload: dict[str, Any] = {"worker": index, "pid": os.getpid(), "device": spec.get("device", "cpu"),
                               "complete": False, "cases": []}
    write_result(result_path, payload)
    _fault(index, 0)
    import torch

    from lnbench.device import torch_device_info

    device = torch.device(spec.get("device", "cpu"))
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    dev = torch_device_info(device)
    backends: dict[str, Any] = {}
    for case in spec["cases"]:
        entry = run_case(case, dev, spec["protocol"], backends)
        payload["cases"].append(entry)
        write_result(result_path, payload)
        report_progress(progress_path, f"{case['id']} {entry['status']}")
        _fault(index, len(payload["cases"]))
    payload["complete"] = True
    write_result(result_path, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
