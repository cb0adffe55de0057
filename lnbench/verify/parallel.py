"""`verify --jobs N`: the cases of an emulated run in N worker processes, with the same rows as one process.

A unit is one case on one backend (index = backend position × number of cases + case position). The parent
starts N workers (`python -m lnbench.verify.parallel SPEC FD`), hands each one unit at a time on its stdin
(longest first, by the estimate, each worker keeping to the kernels it has: lnbench.verify.affinity) and reads
back one JSON line per unit on a pipe of its own: the unit's rows and how long it took. Rows are built by the
same code as in one process (runner.backend_case_rows), on the same seeded inputs, with torch on as many threads
as the parent uses (torch's CPU reductions split work by thread count), and JSON keeps every float exactly: the
files are bitwise those of --jobs 1, whatever worker runs a unit and whatever order units finish in
(lnbench.result_sink orders them by index).

A worker that dies (a segfault, the OOM killer) costs only the unit it was running: that unit gets an `error`
row naming the exit status and the last line of the worker's stderr, and a fresh worker takes over. On any
exit of `run_units` (done, Ctrl-C, SIGTERM) every worker is stopped (processes.kill_group) and the temporary
folder removed; a worker also dies with the parent when the parent is killed hard (processes.die_with_parent).
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Sequence

from lnbench.gpus import GpuSlot
from lnbench.processes import child_environment, die_with_parent, kill_group, pin_to_gpu_cpus
from lnbench.results import VerifyRow, plain
from lnbench.tolerance import Tolerance
from lnbench.verify import prestart
from lnbench.verify.affinity import AffinityQueue
from lnbench.verify.cases import Case

#: characters of a dead worker's stderr kept for its error row
_TAIL_CHARS = 2000
#: what a worker started by lnbench.verify.prestart imports while it waits for its spec (the emulated device's
#: path: FlyDSL, the emulator), so that those imports too overlap the parent's
_EARLY_IMPORTS = ("lnbench.verify.runner", "lnbench.backends.flydsl_backend", "lnbench.flydsl.launch",
                  "lnbench.emu.machine", "flydsl.compiler")


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


OnDone = Callable[[int, list[dict[str, Any]], float], None]


@dataclass
class _Worker:
    proc: subprocess.Popen
    fd: int
    stderr: Path | IO[bytes]
    number: int
    slot: GpuSlot | None = None
    unit: int | None = None
    started: float = 0.0
    buffer: bytes = b""
    finished: int = 0


#: a GPU whose workers die this many times in a row without finishing a unit takes no more units
SLOT_DEATHS = 2


def _tail(stderr: Path | IO[bytes]) -> str:
    """The last non-empty line a worker wrote to its stderr (a file, or the unnamed file of an early worker)."""
    try:
        if isinstance(stderr, Path):
            data = stderr.read_bytes()[-_TAIL_CHARS:]
        else:
            data = os.pread(stderr.fileno(), _TAIL_CHARS, max(0, os.fstat(stderr.fileno()).st_size - _TAIL_CHARS))
        text = data.decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


def _start(spec_path: Path, root: Path, number: int, slot: GpuSlot | None) -> _Worker:
    """A worker for `slot` (None: the emulated device), adopted from lnbench.verify.prestart where one waits."""
    early = prestart.take() if slot is None else None
    if early is not None:
        env = child_environment(prestart.WORKER_ENV)      # what the parent set since (--emu-checks, ...)
        try:
            early.proc.stdin.write(f"{spec_path}\n{json.dumps(env)}\n".encode())
            early.proc.stdin.flush()
        except (OSError, ValueError):   # it died already: its EOF makes a fresh one
            pass
        return _Worker(early.proc, early.fd, early.stderr, number, slot)
    stderr = root / f"worker{number}.err"
    with open(stderr, "wb") as err:
        proc, fd = prestart.start_worker(err, slot.env() if slot else {}, spec_path)
    return _Worker(proc, fd, stderr, number, slot)


def _give(worker: _Worker, unit: int) -> None:
    worker.unit, worker.started = unit, time.monotonic()
    try:
        worker.proc.stdin.write(f"{unit}\n".encode())
        worker.proc.stdin.flush()
    except (OSError, ValueError):   # it died already: its EOF reports the unit
        pass


def _crash_rows(spec: VerifySpec, unit: int, worker: _Worker) -> list[dict[str, Any]]:
    from lnbench.verify.runner import status_rows

    name, case = spec.unit(unit)
    code = worker.proc.returncode
    last = _tail(worker.stderr)
    detail = f"worker process died (exit {code}) while running this case" + (f": {last}" if last else "")
    return [row.with_(backend=name) for row in status_rows(case, "error", detail)]


def _named(rows: list[dict[str, Any]], slot: GpuSlot | None) -> list[dict[str, Any]]:
    """A spread run's rows name the GPU that ran them."""
    return [row.with_(gpu=slot.label, gpu_model=slot.model) for row in rows] if slot else rows


def run_units(spec: VerifySpec, order: Sequence[int], jobs: int, on_done: OnDone,
              slots: Sequence[GpuSlot] = ()) -> None:
    """Run the units of `order` (indices; handed out in this order) in up to `jobs` workers; on_done(unit, rows,
    seconds) as each finishes. Returns when all have; stops every worker on any exception.

    slots: GPUs (--devices): one worker per GPU, which sees only that GPU (jobs is ignored); a unit's rows name
    the GPU. A GPU whose workers die SLOT_DEATHS times in a row without finishing a unit is given no more units:
    the others take them (its lost units have their error rows)."""
    pending = AffinityQueue(order, spec.group)
    root = Path(tempfile.mkdtemp(prefix="lnbench-verify-"))
    workers: dict[int, _Worker] = {}
    selector = selectors.DefaultSelector()
    started = 0
    deaths: dict[int, int] = {}
    try:
        spec_path = root / "spec.pickle"
        spec_path.write_bytes(pickle.dumps(spec))

        def launch(slot: GpuSlot | None) -> None:
            nonlocal started
            worker = _start(spec_path, root, started, slot)
            started += 1
            workers[worker.fd] = worker
            selector.register(worker.fd, selectors.EVENT_READ)
            _give(worker, pending.take(worker.number))

        for number in range(min(len(slots) or jobs, len(pending))):
            launch(slots[number] if slots else None)
        prestart.discard()                                     # early workers this run has no unit for
        while workers:
            for key, _ in selector.select(timeout=0.5):
                worker = workers[key.fd]
                data = os.read(key.fd, 1 << 16)
                if not data:                                   # the worker is gone
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    del workers[key.fd]
                    worker.proc.wait()
                    pending.release(worker.number)
                    if worker.unit is not None:
                        on_done(worker.unit, _named(_crash_rows(spec, worker.unit, worker), worker.slot),
                                time.monotonic() - worker.started)
                    gpu = worker.slot.index if worker.slot else -1
                    deaths[gpu] = 0 if worker.finished else deaths.get(gpu, 0) + 1
                    if pending and (worker.slot is None or deaths[gpu] < SLOT_DEATHS):
                        launch(worker.slot)
                    continue
                worker.buffer += data
                while b"\n" in worker.buffer:
                    line, worker.buffer = worker.buffer.split(b"\n", 1)
                    message = json.loads(line)
                    unit, worker.unit = worker.unit, None
                    if unit != message["unit"]:
                        raise RuntimeError(f"verify worker answered unit {message['unit']}, was given {unit}")
                    worker.finished += 1
                    on_done(unit, _named([VerifyRow.of(r) for r in message["rows"]], worker.slot),
                            float(message["seconds"]))
                    if pending:
                        _give(worker, pending.take(worker.number))
                    else:
                        worker.proc.stdin.close()              # no more work: it exits, EOF follows
        from lnbench.verify.runner import status_rows

        for unit in pending:       # every GPU failed: what is left cannot run
            name, case = spec.unit(unit)
            on_done(unit, [row.with_(backend=name) for row in status_rows(
                case, "error", "not run: the workers of every GPU died (see the errors above)")], 0.0)
    finally:
        for worker in workers.values():
            if worker.proc.poll() is None:
                kill_group(worker.proc)
            os.close(worker.fd)
        selector.close()
        shutil.rmtree(root, ignore_errors=True)


def _worker_main(argv: list[str]) -> None:
    """Worker side: activate the device, then run each unit named on stdin and answer on the pipe. SPEC `-`
    (lnbench.verify.prestart): import first, then read the spec's path from stdin."""
    die_with_parent()
    pin_to_gpu_cpus()
    if argv[0] == "-":
        import importlib

        for module in _EARLY_IMPORTS:
            try:
                importlib.import_module(module)
            except ImportError:          # (a missing FlyDSL is reported where the run needs it)
                pass
        spec_path = sys.stdin.readline().strip()
        if not spec_path:                # stopped before a run adopted it
            return
        env = json.loads(sys.stdin.readline())
        os.environ.clear()               # the environment a worker started now would get
        os.environ.update(env)
    else:
        spec_path = argv[0]
    spec: VerifySpec = pickle.loads(Path(spec_path).read_bytes())
    out = os.fdopen(int(argv[1]), "w")
    import torch

    from lnbench.backends import get_backend
    from lnbench.device import resolve_device
    from lnbench.verify.runner import backend_case_rows

    torch.set_num_threads(spec.torch_threads)
    device = resolve_device(spec.device)
    backends = {name: get_backend(name) for name in spec.backends}
    avail = {name: backend.availability(device) for name, backend in backends.items()}
    compiled: dict[str, dict[tuple[int, str, float], str]] = {name: {} for name in backends}
    gc.freeze()     # the modules live as long as the worker: the collections while it runs need not scan them
    for line in sys.stdin:
        unit = int(line)
        name, case = spec.unit(unit)
        start = time.monotonic()
        rows = backend_case_rows(backends[name], case, device, spec.tol, avail[name], compiled[name])
        out.write(json.dumps({"unit": unit, "rows": [plain(r) for r in rows],
                             "seconds": time.monotonic() - start}) + "\n")
        out.flush()


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)     # every answer is written: skip the interpreter's teardown (torch, MLIR: ~1 s the parent waits)
