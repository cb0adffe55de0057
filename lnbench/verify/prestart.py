"""`verify` workers made as early as they can be, by forking the parent once it has imported what they need: a
fork shares those imports (torch, FlyDSL, the emulator: ~2 s of CPU each) instead of doing them again.

The command line calls `prestart(argv)` before it imports the verify command (stdlib only here), and
`fork_workers(worker_main)` right after: no torch operation has run yet, so no OpenMP thread exists to be lost in
a fork. They act only where the run will most likely hand cases to workers: the emulated device (installed; no --device
other than emu, no GPU device node), no --jobs 1, --devices or --self-test. `prestart` then sets
OMP_WAIT_POLICY=PASSIVE (unless set) before torch is imported, as every worker runs (WORKER_ENV): libgomp reads
it when it loads, so the forks must inherit it. A forked worker waits for the spec's path and the environment a
worker started now would get (what the parent set since: --emu-checks, kernel sources) on stdin
(lnbench.verify.parallel). run_units adopts them into its pool with `take`; any not adopted are stopped
(`discard`: when the run needs none, when it needs fewer, at exit), and each dies with the parent
(processes.die_with_parent). Workers started later (more than MAX_EARLY, or in place of one that died) are
fresh interpreters (lnbench.measure.pool.spawn). Their stderr goes to unnamed files: nothing is left behind.
"""
from __future__ import annotations

import atexit
import gc
import importlib
import importlib.util
import os
import platform
import sys
import tempfile
from typing import Callable

from lnbench.measure.pool import Worker, fork

#: OpenMP threads that sleep when idle instead of spinning: torch's threads in one worker would otherwise burn
#: the core another worker's emulation needs (the main job: ~30 s less CPU on 2 cores); values are unchanged.
#: A value the user set wins.
WORKER_ENV = {} if "OMP_WAIT_POLICY" in os.environ else {"OMP_WAIT_POLICY": "PASSIVE"}
#: device nodes of a GPU torch may see: with one, verify's default device is that GPU (no workers)
_GPU_NODES = ("/dev/kfd", "/dev/nvidia0")
#: at most this many early workers: on a many-core machine a small run would otherwise start, and then stop, one
#: per core; the run starts any further ones itself
MAX_EARLY = 8
#: what the parent imports before it forks (the emulated device's path: FlyDSL, the emulator), which a worker
#: would otherwise import itself
EARLY_IMPORTS = ("lnbench.verify.runner", "lnbench.backends.flydsl_backend", "lnbench.flydsl.launch",
                 "lnbench.emu.machine", "flydsl.compiler")


_pool: list[Worker] = []
_started = False
_to_fork = 0


def _wanted(argv: list[str]) -> int:
    """How many workers to start early for `verify ARGV` (0: none; module docstring)."""
    words = set(argv)
    if words & {"-h", "--help", "--self-test", "--devices"} or any(a.startswith("--devices=") for a in argv):
        return 0
    jobs = _value(argv, "--jobs", "-j")
    device = _value(argv, "--device", None)
    if device is not None and not device.startswith("emu"):
        return 0
    if device is None and any(os.path.exists(node) for node in _GPU_NODES):
        return 0
    if not _emulator_installed():
        return 0
    if jobs is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return 0
        return min(cores, MAX_EARLY) if cores > 1 else 0
    return int(jobs) if jobs.isdigit() and 1 < int(jobs) <= MAX_EARLY else 0


def _emulator_installed() -> bool:
    """The cheap part of lnbench.emu.runtime.availability: the platform and the packages it needs."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    return all(importlib.util.find_spec(name) is not None for name in ("ziglang", "tinygrad", "msgpack", "flydsl"))


def _value(argv: list[str], long: str, short: str | None) -> str | None:
    """The value of an option (`--x V`, `--x=V`, `-x V`, `-xV`), the last one given; None when absent."""
    found = None
    for i, word in enumerate(argv):
        if word in (long, short) and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(long + "="):
            found = word[len(long) + 1:]
        elif short and word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            found = word[len(short):]
    return found


def prestart(argv: list[str]) -> None:
    """Before torch is imported: note how many workers `verify ARGV` will most likely use (none where it likely
    runs in one process), and give this process the OpenMP setting they run with."""
    global _started, _to_fork
    if _started:
        return
    _started = True
    if "torch" in sys.modules and WORKER_ENV:   # libgomp has read its setting: forks would spin (the run spawns)
        return
    _to_fork = _wanted(argv)
    if _to_fork:
        os.environ.update(WORKER_ENV)


def fork_workers(worker_main: Callable[[list[str]], None]) -> None:
    """After the verify command's imports: import the workers' modules and fork the workers `prestart` noted,
    each running worker_main (lnbench.verify.parallel's, given by the command line)."""
    global _to_fork
    count, _to_fork = _to_fork, 0
    if not count:
        return
    import_modules(EARLY_IMPORTS)          # (a missing FlyDSL is reported where the run needs it)
    atexit.register(discard)
    gc.freeze()     # what the imports made: a fork's collections skip it (walking it would copy the shared pages);
    #                 the command line keeps it frozen until its exit (lnbench.cli)
    try:
        for _ in range(count):
            err = tempfile.TemporaryFile()        # unnamed: nothing is left behind, however the parent ends
            proc, fd = fork(worker_main, ["-"], err, [fd for worker in _pool for fd in worker.own_fds()])
            _pool.append(Worker(len(_pool), proc, err, fd))
    except Exception:      # (no early workers: the run starts its own, and reports what stops them)
        discard()


def import_modules(names: tuple[str, ...]) -> None:
    """Import each module of `names` that can be imported (one that cannot is the business of whoever uses it)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def pids() -> list[int]:
    """The process ids of the started workers nothing adopted yet."""
    return [worker.proc.pid for worker in _pool if worker.proc is not None]     # (fork's: all started)


def take() -> Worker | None:
    """A started worker for run_units (None when none is left)."""
    return _pool.pop(0) if _pool else None


def discard() -> None:
    """Stop the started workers nothing adopted."""
    while _pool:
        _pool.pop().stop()
