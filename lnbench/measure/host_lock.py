"""The host lock of a run spread over several GPUs (`--devices`): who may time while another GPU times.

Every GPU's workers run at once. A case's warm-up, host-share probe and timed runs happen holding the lock
*shared* (the GPU sets their time: other GPUs may time meanwhile); a host-bound case's timed runs happen holding
it *exclusive* (no other GPU times meanwhile), after a short re-warm since the switch may have waited. So the
start-ups, workload builds, compiles and device-bound timing of all GPUs overlap, and only host-bound timed runs
are one at a time.

It is a reader/writer lock between processes made of two `flock`ed files: every taker first passes a turnstile
(held exclusive for a moment), so a waiting exclusive taker, which holds the turnstile while it waits, is not
starved by a stream of shared ones. Time spent waiting for it does not count against a worker's turn timeout
(lnbench.run.workers.report_waiting): a worker held up behind another GPU's hung worker outlasts it. The
lock file is named by LNBENCH_HOST_LOCK in a worker's environment; with
no such variable (one device) `Section` does nothing and no case is marked alone.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Iterator

from lnbench.run.workers import report_waiting

LOCK_VAR = "LNBENCH_HOST_LOCK"


class HostLock:
    """A reader/writer lock shared by the processes that open the same path (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._turnstile: IO[bytes] = open(f"{self.path}.turn", "a+b")
        self._lock: IO[bytes] = open(self.path, "a+b")
        self.held: str = ""                 # "", "shared" or "exclusive"
        self.waited_s = 0.0                 # time spent waiting to take it, over this process's life

    def acquire(self, exclusive: bool) -> None:
        if self.held:
            raise RuntimeError(f"host lock already held {self.held}")
        start = time.monotonic()
        report_waiting(start, self.waited_s)        # a wait is not counted against this worker's turn timeout
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.waited_s += time.monotonic() - start
        report_waiting(None, self.waited_s)
        self.held = "exclusive" if exclusive else "shared"

    def release(self) -> None:
        if self.held:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self.held = ""

    def close(self) -> None:
        self.release()
        self._turnstile.close()
        self._lock.close()


@contextlib.contextmanager
def lock_environment() -> Iterator[dict[str, str]]:
    """Parent side: a fresh host lock for one run's workers, as the environment entry that names it; its folder
    is removed when the run ends."""
    with tempfile.TemporaryDirectory(prefix="lnbench-host-lock-") as folder:
        yield {LOCK_VAR: str(Path(folder) / "host.lock")}


_from_env: dict[str, HostLock] = {}


def host_lock_from_env() -> HostLock | None:
    """This worker's host lock (one per process), or None outside a run spread over several GPUs."""
    path = os.environ.get(LOCK_VAR, "")
    if not path:
        return None
    if path not in _from_env:
        _from_env[path] = HostLock(path)
    return _from_env[path]


class Section:
    """One case's time on the host lock: shared from its warm-up on, exclusive for its timed runs when it is
    host-bound, by size (`alone_by_size`, known before it runs) or by measurement (its host share reaches
    `alone_host_fraction`). `alone` then says why ("size" or "measured"); "" when it was timed shared or
    there is no lock."""

    def __init__(self, lock: HostLock | None, alone_by_size: bool, alone_host_fraction: float | None) -> None:
        self.lock = lock
        self.by_size = alone_by_size
        self.threshold = alone_host_fraction
        self.alone = ""
        self.spans: list[tuple[str, float, float]] = []    # (shared | exclusive, start, end), time.monotonic()

    def _take(self, exclusive: bool) -> None:
        assert self.lock is not None                    # the callers take and give it only where there is one
        self.lock.acquire(exclusive)
        self.spans.append((self.lock.held, time.monotonic(), float("nan")))

    def _give(self) -> None:
        mode, start, _ = self.spans[-1]
        self.spans[-1] = (mode, start, time.monotonic())
        assert self.lock is not None
        self.lock.release()

    def __enter__(self) -> "Section":
        if self.lock is not None:
            self._take(exclusive=False)
        return self

    def before_runs(self, host_fraction: float) -> bool:
        """Called between the probe and the timed runs: take the lock exclusive if the case is host-bound.
        True when it did (the caller re-warms: the switch may have waited while the GPU idled)."""
        if self.lock is None:
            return False
        if self.by_size:
            self.alone = "size"
        elif self.threshold is not None and host_fraction >= self.threshold:
            self.alone = "measured"
        else:
            return False
        self._give()
        self._take(exclusive=True)
        return True

    def __exit__(self, *exc: object) -> None:
        if self.lock is not None:
            self._give()
