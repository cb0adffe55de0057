"""`verify --jobs N`: the cases of an emulated run in N worker processes, with the same rows as one process.

A unit is one case on one backend (index = backend position × number of cases + case position). The parent
starts N workers (`python -m lnbench.verify.parallel SPEC FD`) in a pool of lnbench.run.pool and deals
them the units through lnbench.run.units: one at a time on stdin (longest first, by the estimate, each
worker keeping to the kernels it has: lnbench.verify.affinity), one JSON line back per unit on the worker's
answer pipe: the unit's rows and how long it took. Rows are built by the same code as in one process
(runner.backend_case_rows), on the same seeded inputs, with torch on as many threads as the parent uses
(torch's CPU reductions split work by thread count), and JSON keeps every float exactly: the files are bitwise
those of --jobs 1, whatever worker runs a unit and whatever order units finish in (lnbench.scaffold.sink orders
them by index). On the emulated device the workers are forks of the parent (lnbench.run.pool: they share its
imports of torch, FlyDSL and the emulator) where the command allowed it before importing torch (`may_fork`).

A worker that dies (a segfault, the OOM killer) costs only the unit it was running: that unit gets an `error`
row naming the exit status and the last line of the worker's stderr, and a fresh worker takes over. On any
exit of `run_units` (done, Ctrl-C, SIGTERM) every worker is stopped and the temporary folder removed (the
pool); a worker also dies with the parent when the parent is killed hard (processes.die_with_parent).
"""
from __future__ import annotations

import gc
import importlib.util
import os
import platform
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from lnbench.run.gpus import GpuSlot
from lnbench.run import units
from lnbench.run.pool import WORKER_ENV, Pool, Worker, allow_fork, worker_setup
from lnbench.results import VerifyRow, plain
from lnbench.verify.affinity import AffinityQueue

if TYPE_CHECKING:      # (both import torch: may_fork runs before torch loads)
    from lnbench.backends.tolerance import Tolerance
    from lnbench.verify.cases import Case

#: what a forked worker's parent imports before it forks (the emulated device's path: FlyDSL, the emulator), which a
#: worker would otherwise import itself (lnbench.run.pool.Pool.start)
WORKER_IMPORTS = ("lnbench.verify.runner", "lnbench.backends.flydsl_backend", "lnbench.flydsl.launch",
                  "lnbench.emu.machine", "flydsl.compiler")
#: device nodes of a GPU torch may see: with one, verify's default device is that GPU (no workers)
_GPU_NODES = ("/dev/kfd", "/dev/nvidia0")


@dataclass(frozen=True)
class VerifySpec:
    """Everything a worker needs to run any unit."""

    backends: tuple[str, ...]
    cases: tuple[Case, ...]
    device: str
    tol: Tolerance
    torch_threads: int

    def unit(self, index: int) -> tuple[str, Case]:
        """(backend name, case) of unit `index`."""
        return self.backends[index // len(self.cases)], self.cases[index % len(self.cases)]

    def group(self, index: int) -> tuple[str, int]:
        """Units that share compiled kernels and case set-ups in a worker: one row width in one dtype."""
        case = self.cases[index % len(self.cases)]
        return case.dtype, case.n


OnDone = Callable[[int, list[VerifyRow], float], None]
OnCompiled = Callable[[int, float, int, int], None]
#: a GPU whose workers die this many times in a row without finishing a unit takes no more units
SLOT_DEATHS = units.SLOT_DEATHS


def _start(pool: Pool, spec_path: Path, number: int, slot: GpuSlot | None) -> Worker:
    """A worker for `slot` (None: the emulated device, a fork of this process where the command allowed it)."""
    return pool.start(number, "lnbench.verify.parallel", [str(spec_path)], {**WORKER_ENV, **(slot.env() if slot else {})},
                      pool.folder(f"w{number}"), answers=True, fork=slot is None)


def may_fork(device: str | None, jobs: int | None, devices: str | None, self_test: bool) -> bool:
    """After verify's arguments are parsed, before torch is imported: where the run will most likely hand its cases
    to workers on the emulated device (installed; no --device other than emu, no GPU device node; no --jobs 1,
    --devices or --self-test), let them be forks of this process (lnbench.run.pool.allow_fork: the workers'
    OpenMP setting, given to this process before torch loads, and their modules imported). Starts nothing;
    returns whether forks may come."""
    if self_test or devices is not None or (jobs is not None and jobs <= 1):
        return False
    if device is not None and not device.startswith("emu"):
        return False
    if device is None and any(os.path.exists(node) for node in _GPU_NODES):
        return False
    if jobs is None:
        try:
            if len(os.sched_getaffinity(0)) <= 1:
                return False
        except (AttributeError, OSError):
            return False
    return _emulator_installed() and allow_fork(WORKER_IMPORTS)


def _emulator_installed() -> bool:
    """The cheap part of lnbench.emu.runtime.availability: the platform and the packages it needs."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    return all(importlib.util.find_spec(name) is not None for name in ("ziglang", "tinygrad", "msgpack", "flydsl"))


def _unit_rows(spec: VerifySpec, unit: int, status: str, detail: str) -> list[VerifyRow]:
    from lnbench.verify.runner import status_rows

    name, case = spec.unit(unit)
    return [row.with_(backend=name) for row in status_rows(case, status, detail)]


def _named(rows: list[VerifyRow], slot: GpuSlot | None) -> list[VerifyRow]:
    """A spread run's rows name the GPU that ran them."""
    return [row.with_(gpu=slot.label, gpu_model=slot.model) for row in rows] if slot else rows


def run_units(spec: VerifySpec, order: Sequence[int], jobs: int, on_done: OnDone,
              slots: Sequence[GpuSlot] = (), on_compiled: OnCompiled | None = None) -> None:
    """Run the units of `order` (indices; handed out in this order) in up to `jobs` workers; on_done(unit, rows,
    seconds) as each finishes, after on_compiled(unit, seconds, compiles, cold ones) for the FlyDSL compiles it
    made (lnbench.flydsl.compile_log). Returns when all have; stops every worker on any exception.

    slots: GPUs (--devices): one worker per GPU, which sees only that GPU (jobs is ignored); a unit's rows name
    the GPU. A GPU whose workers die SLOT_DEATHS times in a row without finishing a unit is given no more units:
    the others take them (its lost units have their error rows)."""

    def answered(unit: int, answer: dict[str, Any], slot: GpuSlot | None) -> None:
        if on_compiled is not None:
            on_compiled(unit, *answer.get("compiled", (0.0, 0, 0)))
        on_done(unit, _named([VerifyRow.of(r) for r in answer["rows"]], slot), float(answer["seconds"]))

    def lost(gone: units.Lost, slot: GpuSlot | None) -> None:
        detail = f"worker process died (exit {gone.exit_code}) while running this case" + (
            f": {gone.last_line}" if gone.last_line else "")
        on_done(gone.unit, _named(_unit_rows(spec, gone.unit, "error", detail), slot), gone.seconds)

    with Pool("lnbench-verify-") as pool:
        spec_path = pool.root / "spec.pickle"
        spec_path.write_bytes(pickle.dumps(spec))
        every: list[GpuSlot | None] = [*slots] or [None] * jobs

        def start(number: int, slot: GpuSlot | None) -> Worker:
            return _start(pool, spec_path, number, slot)

        left = units.run_units(pool, start, AffinityQueue(order, spec.group), every, answered, lost, SLOT_DEATHS)
    for unit in left:       # every GPU failed: what is left cannot run
        on_done(unit, _unit_rows(spec, unit, "error", "not run: the workers of every GPU died (see the errors above)"),
                0.0)


def worker_main(argv: list[str]) -> None:
    """Worker side (`python -m lnbench.verify.parallel SPEC FD`, or a fork calling it): activate the device, then
    run each unit named on stdin and answer on the pipe (lnbench.run.units.serve)."""
    worker_setup()
    spec_path = argv[0]
    spec: VerifySpec = pickle.loads(Path(spec_path).read_bytes())
    import torch

    from lnbench.backends import get_backend
    from lnbench.run.device import resolve_device
    from lnbench.flydsl import compile_log
    from lnbench.verify.runner import backend_case_rows

    torch.set_num_threads(spec.torch_threads)
    device = resolve_device(spec.device)
    backends = {name: get_backend(name) for name in spec.backends}
    avail = {name: backend.availability(device) for name, backend in backends.items()}
    compiled: dict[str, dict[tuple[int, str, float], str]] = {name: {} for name in backends}
    gc.freeze()     # the modules live as long as the worker: the collections while it runs need not scan them

    def answer(unit: int) -> dict[str, Any]:
        name, case = spec.unit(unit)
        before = len(compile_log.COMPILES)
        rows = backend_case_rows(backends[name], case, device, spec.tol, avail[name], compiled[name])
        return {"rows": [plain(r) for r in rows], "compiled": compile_log.since(before)}

    units.serve(answer, int(argv[1]))


if __name__ == "__main__":
    worker_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)     # every answer is written: skip the interpreter's teardown (torch, MLIR: ~1 s the parent waits)
