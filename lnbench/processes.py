"""Process lifetime: the lnbench parent turns SIGTERM/SIGHUP into an exception (so that its cleanup runs, as for
Ctrl-C), and a worker process dies with its parent even when the parent is killed hard.

Parent side: `terminate_on_signals()` (a context manager used by cli_common.guarded) makes SIGTERM and SIGHUP
raise `Terminated`, a BaseException like KeyboardInterrupt: every try/finally and context manager on the way
out (lnbench.perf.workers.run_workers stops its workers and removes its temp folder) runs. Only the first
signal raises; later ones are ignored while that cleanup runs.

Worker side: `die_with_parent()` (called by lnbench.perf.workers.read_spec, the first thing every worker does)
asks Linux to send the worker SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), and exits at once if the
parent is already gone. A no-op where prctl is not available.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

#: the environment variable holding the pid of the process that started a worker (set by the parent)
PARENT_PID_VAR = "LNBENCH_PARENT_PID"
_PR_SET_PDEATHSIG = 1


class Terminated(BaseException):
    """The process got SIGTERM or SIGHUP: stop, clean up, exit 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise Terminated (once); one that is ignored (nohup) stays ignored.
    Outside the main thread: does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, frame: object) -> None:
        nonlocal raised
        if raised:              # the cleanup of the first one is running: let it finish
            return
        raised = True
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
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


def die_with_parent() -> None:
    """Worker side (Linux): get SIGTERM when the parent dies; exit now if it already has. A no-op elsewhere,
    and in a process not started by lnbench.perf.workers (no $LNBENCH_PARENT_PID)."""
    expected = os.environ.get(PARENT_PID_VAR, "")
    if not expected.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != int(expected):   # it died before prctl took effect
        os._exit(128 + int(signal.SIGTERM))
