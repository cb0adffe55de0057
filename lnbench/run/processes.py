"""Process lifetime: the lnbench parent turns SIGINT/SIGTERM/SIGHUP into an exception (so that its cleanup runs),
and a worker process dies with its parent even when the parent is killed hard.

Parent side: `terminate_on_signals()` (a context manager used by cli_common.guarded) makes SIGINT raise
KeyboardInterrupt and SIGTERM and SIGHUP raise `Terminated`, a BaseException like KeyboardInterrupt: every
try/finally and context manager on the way out (lnbench.run.pool.Pool stops its workers and removes
its temp folder; lnbench.output.files writes the finished cases, marked incomplete) runs. Only the first signal
raises; later ones are ignored while that cleanup runs. A signal that is ignored when lnbench starts (SIGHUP
under nohup, SIGINT of a background job) stays ignored.

The first signal also stays *pending* (`pending_stop()`): code that swallows exceptions on its way, such as
the emulated device's launch callback (which may not unwind into C), calls `check_stop()` to raise it again,
so a stop is never turned into a result (the emulator's scheduler calls it between steps: lnbench.run.device
installs it when it activates the emulated device).

Worker side: `die_with_parent()` (called by lnbench.run.pool.worker_setup, the first thing every worker does)
asks Linux to send the worker SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), and exits at once if the
parent is already gone. A no-op where prctl is not available.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Iterator, Mapping, Protocol


#: the environment variable holding the pid of the process that started a worker (set by the parent)
PARENT_PID_VAR = "LNBENCH_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


#: the signal that asked this process to stop (None: none yet); set by the handlers of terminate_on_signals
_stop_signal: int | None = None


class Stopped(BaseException):
    """A run asked to stop from another thread (its `stop` event set, after the main thread was interrupted):
    its worker processes are stopped and what they finished is kept, as on Ctrl-C (lnbench.run.gpus)."""


class Terminated(BaseException):
    """The process got SIGTERM or SIGHUP: stop, clean up, exit 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_exception(signum: int) -> BaseException:
    """What a stop signal raises: KeyboardInterrupt for SIGINT (exit 130), else Terminated (exit 128 + signum)."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def pending_stop() -> BaseException | None:
    """A fresh exception for the stop signal this process got, or None when it got none."""
    return None if _stop_signal is None else stop_exception(_stop_signal)


def check_stop() -> None:
    """Raise the pending stop, if any (cheap: call it in loops that may swallow the first raise)."""
    if _stop_signal is not None:
        raise stop_exception(_stop_signal)


def exit_code(exc: BaseException) -> int:
    """The exit status of a stop: 130 for KeyboardInterrupt, 128 + signum for Terminated."""
    return exc.exit_code if isinstance(exc, Terminated) else 128 + int(signal.SIGINT)


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """While inside, SIGINT raises KeyboardInterrupt and SIGTERM and SIGHUP raise Terminated (the first signal
    only; it stays pending: check_stop); a signal that is ignored (nohup) stays ignored. Outside the main
    thread: does nothing."""
    global _stop_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _stop_signal = None

    def handler(signum: int, frame: object) -> None:
        global _stop_signal
        if _stop_signal is not None:    # the cleanup of the first one is running: let it finish
            return
        _stop_signal = signum
        raise stop_exception(signum)

    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) == signal.SIG_IGN:     # e.g. SIGHUP under nohup: stays ignored
            continue
        try:
            previous[sig] = signal.signal(sig, handler)
        except (OSError, ValueError):
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        _stop_signal = None


#: seconds a worker gets to end after SIGTERM before SIGKILL
TERM_GRACE_S = 3.0


class ChildProcess(Protocol):
    """What the pools use of a worker process: a subprocess.Popen, or lnbench.run.pool.ForkedProcess."""

    pid: int
    stdin: IO[bytes] | None

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def kill_group(proc: ChildProcess) -> None:
    """SIGTERM a worker's own process group (it is a session leader), then SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def child_environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """A worker's environment: os.environ + `env` (wins; a None value unsets the variable), the folder holding this `lnbench` package first on
    PYTHONPATH (a checkout runs without installing), and this process's pid (die_with_parent)."""
    child = {**os.environ, **{k: v for k, v in (env or {}).items() if v is not None}}
    for key in [k for k, v in (env or {}).items() if v is None]:    # None: unset it in the worker
        child.pop(key, None)
    pkg_parent = str(Path(__file__).resolve().parents[2])                 # lnbench/run/processes.py
    child["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, child.get("PYTHONPATH", "")) if p)
    child[PARENT_PID_VAR] = str(os.getpid())
    return child


def exit_quietly_on_signals() -> None:
    """For the start-up of the command line (importing torch takes seconds), before any command runs: SIGINT,
    SIGTERM and SIGHUP end the process at once with one line and 128 + signum (nothing is written yet, so
    nothing needs cleaning up), not a traceback from inside an import. A signal that is ignored stays ignored;
    terminate_on_signals takes over when a command starts."""
    def handler(signum: int, frame: object) -> None:
        os.write(2, b"lnbench: interrupted\n" if signum == signal.SIGINT else b"lnbench: terminated\n")
        os._exit(128 + signum)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) != signal.SIG_IGN:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, handler)


def _prctl(option: int, arg: int | bytes) -> bool:
    """Linux prctl(option, arg); False where it failed or is not available."""
    try:
        import ctypes

        value = ctypes.c_char_p(arg) if isinstance(arg, bytes) else arg
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def name_process(name: bytes) -> None:
    """The name `ps` and `top` show for this process (Linux: PR_SET_NAME, at most 15 bytes; elsewhere nothing)."""
    _prctl(_PR_SET_NAME, name[:15])


def die_with_parent() -> None:
    """Worker side (Linux): get SIGTERM when the parent dies; exit now if it already has. A no-op elsewhere,
    and in a process not started by lnbench.run.pool (no $LNBENCH_PARENT_PID)."""
    expected = os.environ.get(PARENT_PID_VAR, "")
    if not expected.isdigit() or not sys.platform.startswith("linux"):
        return
    if not _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM)):
        return
    if os.getppid() != int(expected):   # it died before prctl took effect
        os._exit(128 + int(signal.SIGTERM))


#: a worker started for one GPU runs on the CPUs near that GPU (lnbench.run.gpus.GpuSlot.env): a "0-15,32-47" list
CPU_AFFINITY_VAR = "LNBENCH_CPU_AFFINITY"


def parse_cpu_list(text: str) -> set[int]:
    """A Linux CPU list ("0-3,8,10-11") as a set of CPU numbers (empty when malformed)."""
    cpus: set[int] = set()
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    except ValueError:
        return set()
    return cpus


def pin_to_gpu_cpus() -> None:
    """Worker side: keep this process on the CPUs $LNBENCH_CPU_AFFINITY names (those of its GPU's NUMA node),
    where the parent set it; a CPU set the process may not use is left as it is."""
    cpus = parse_cpu_list(os.environ.get(CPU_AFFINITY_VAR, ""))
    if cpus and hasattr(os, "sched_setaffinity"):
        allowed = cpus & os.sched_getaffinity(0)
        if allowed:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, allowed)

