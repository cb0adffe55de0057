"""Is the machine busy while lnbench times? Its load average against the cores lnbench may run on, and other
lnbench timing runs (each holds a lock file while it times).

Two timing runs at once, or a timing run beside a build, measure each other: the issue that started this saw
one case at 6,273 µs in one of two concurrent runs and 279 µs in the other, both exit 0. perf and peak take a
`TimingLock` for their whole run, look at the load before and after, record both in the result's metadata,
and warn (or, with `--if-loaded refuse`, stop before timing).
"""
from __future__ import annotations

import dataclasses

import atexit
import fcntl
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench.constants import LOAD_POLICIES
from lnbench.errors import LnbenchUsageError

POLICIES = LOAD_POLICIES
WARN, REFUSE = POLICIES


def cpus_available() -> int:
    """The cores this process may run on (its affinity mask; the CPU count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average (runnable + uninterruptible tasks), or None where the system has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def lock_dir() -> Path:
    """Where timing runs put their lock files: $LNBENCH_LOCK_DIR, else <temp>/lnbench-timing (one folder for
    every user of the machine: they share its cores and GPUs)."""
    return Path(os.environ.get("LNBENCH_LOCK_DIR") or Path(tempfile.gettempdir()) / "lnbench-timing")


class TimingLock:
    """A lock file held (flock) while this process times; `others()` lists the live runs holding theirs.

    A run that dies leaves its file unlocked (the kernel drops the lock with the process): such files are
    stale and removed by the next run that looks."""

    def __init__(self, command: str, folder: Path | None = None) -> None:
        self.command = command
        self.folder = Path(folder or lock_dir())
        self.path: Path | None = None
        self._fd: int | None = None

    def __enter__(self) -> "TimingLock":
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                os.chmod(self.folder, 0o1777)       # a shared folder, like /tmp (best effort: may be another's)
            except OSError:
                pass
            path = self.folder / f"{os.getpid()}-{secrets.token_hex(4)}.lock"
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps({"pid": os.getpid(), "command": self.command,
                                     "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode())
            self.path, self._fd = path, fd
        except OSError:
            self.path = self._fd = None              # no lock folder (read-only /tmp): time without one
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

    def others(self) -> list[str]:
        """The other live timing runs: `pid N (command)` each. Stale lock files are removed."""
        found = []
        try:
            paths = sorted(self.folder.glob("*.lock"))
        except OSError:
            return []
        for path in paths:
            if path == self.path or path.name.startswith(f"{os.getpid()}-"):
                continue                              # ours (an earlier command in this process too)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    found.append(_describe(path))     # held: a live run
                    continue
                fcntl.flock(fd, fcntl.LOCK_UN)
                try:
                    path.unlink()                     # nobody holds it: its run is gone
                except OSError:
                    pass
            finally:
                os.close(fd)
        return found


def hold(command: str) -> TimingLock:
    """A TimingLock taken now and released at `release()` or, at the latest, when the process ends."""
    lock = TimingLock(command).__enter__()
    atexit.register(lock.release)
    return lock


def _describe(path: Path) -> str:
    try:
        info = json.loads(path.read_text())
        return f"pid {int(info['pid'])} ({info.get('command', '?')})"
    except (OSError, ValueError, KeyError, TypeError):
        return path.stem


@dataclass(frozen=True)
class LoadCheck:
    """What was seen at one moment: the load average, the cores available, other timing runs."""

    load: float | None
    cpus: int
    others: tuple[str, ...]

    def problems(self) -> list[str]:
        out = []
        if self.load is not None and self.load > self.cpus:
            out.append(f"load average {self.load:.2f} above the {self.cpus} core(s) lnbench may use")
        if self.others:
            out.append(f"{len(self.others)} other lnbench timing run(s): {', '.join(self.others)}")
        return out


def check(lock: TimingLock) -> LoadCheck:
    return LoadCheck(load_average(), cpus_available(), tuple(lock.others()))


def refuse_if_loaded(seen: LoadCheck, policy: str) -> None:
    """`--if-loaded refuse`: a usage error (one line, exit 2) when the machine is busy, before any timing."""
    problems = seen.problems()
    if policy == REFUSE and problems:
        raise LnbenchUsageError(f"the machine is busy ({'; '.join(problems)}): timing refused "
                                f"(--if-loaded warn times anyway and flags the result)")


@dataclass(frozen=True)
class LoadFacts:
    """What a timed result records of the machine's load (the run record's load section): the load average
    before and after the timing, the cores, other timing runs, and `load_flag` (empty when the machine was not
    busy at either moment)."""

    load_before: float | None
    load_after: float | None
    cpus_available: int
    other_timing_runs: int
    load_flag: str

    def cells(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def metadata(before: LoadCheck, after: LoadCheck) -> LoadFacts:
    """The load facts of a timing that ran between `before` and `after`."""
    others = sorted(set(before.others) | set(after.others))
    loads = [v for v in (before.load, after.load) if v is not None]
    problems = LoadCheck(max(loads) if loads else None, before.cpus, tuple(others)).problems()
    return LoadFacts(None if before.load is None else round(before.load, 2),
                     None if after.load is None else round(after.load, 2), before.cpus, len(others),
                     "; ".join(problems))


def warning(flag: str | None) -> str:
    """The one warning line of a result timed on a busy machine (`flag`: its load_flag; '' when it was not)."""
    if not flag:
        return ""
    return f"lnbench: warning: timed on a busy machine ({flag}): these times may measure the other work"
