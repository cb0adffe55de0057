"""One run owns each result file it writes: a second run naming a file that a live run is writing stops at once.

A claim is an exclusive `fcntl.flock` on a hidden sidecar beside the result, `.NAME.lnbench-claim`, which holds the
owner's pid and command line (for the other run's one-line error). The kernel drops the lock when the owner's
process dies, however it dies (SIGKILL included), so a claim left behind by a dead run blocks nothing: the next
run takes the sidecar over. The lock is on the sidecar, not on the result, because a result is replaced by a
rename (a new file each write). A file left by a finished run is not claimed: it is replaced as before.

outputs.check_writable claims every regular-file output it makes ready (FIFOs, character devices and standard
output are shared on purpose and never claimed); release_all (outputs.release_outputs, at the end of a command)
gives the claims back and removes their sidecars. The file descriptors are close-on-exec and workers are exec'd
(subprocess), so no child keeps a claim alive after its run. (The `filelock` package, which torch installs, takes
the same lock but cannot say who holds it.)
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from lnbench.errors import LnbenchUsageError
from lnbench.machine.checkout import command_line

SUFFIX = ".lnbench-claim"

#: the longest file name most file systems take (bytes)
_NAME_MAX = 255

#: how long a refused run waits for the owner to write its name into a sidecar it has just locked
_HOLDER_WAIT_S = 0.5


@dataclass
class _Claim:
    fd: int
    sidecar: Path

    def release(self) -> None:
        """Remove the sidecar while still holding it (only if it is still this claim's file), then unlock."""
        try:
            if os.stat(self.sidecar).st_ino == os.fstat(self.fd).st_ino:
                self.sidecar.unlink()
        except OSError:
            pass
        os.close(self.fd)


_HELD: dict[str, _Claim] = {}


def _key(path: Path) -> str:
    """One spelling per file: the folder's real path and the name."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def sidecar_of(path: Path) -> Path:
    """The claim file of a result path: `.NAME.lnbench-claim` in its folder (a long name is shortened, with a hash
    of the whole name kept, so every legal name has a legal sidecar)."""
    name = path.name
    if len(os.fsencode(f".{name}{SUFFIX}")) > _NAME_MAX:
        digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
        name = f"{name[:64]}-{digest}"
    return Path(_key(path)).parent / f".{name}{SUFFIX}"


def held() -> set[str]:
    """The result paths this process has claimed (their keys)."""
    return set(_HELD)


def claim(path: Path) -> None:
    """Own `path` for this run (a no-op when this process owns it already). A usage error naming the other run when
    a live lnbench run owns it. The folder must exist (check_writable makes it first)."""
    key = _key(path)
    if key in _HELD:
        return
    sidecar = sidecar_of(path)
    while True:
        try:
            fd = os.open(sidecar, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise LnbenchUsageError(f"output path {path} is not writable: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
            os.close(fd)
            if holder is None:
                raise LnbenchUsageError(f"output path {path} cannot be claimed: {exc.strerror or exc}") from None
            raise LnbenchUsageError(f"{path} is being written by another lnbench run ({holder}); choose another "
                                    f"path or wait") from None
        if _same_file(sidecar, fd):
            break
        os.close(fd)      # its last owner removed it between our open and our lock: claim a fresh one
    _HELD[key] = _Claim(fd, sidecar)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{_one_line(command_line())}\n".encode("utf-8", "backslashreplace"))
    except OSError:
        pass       # a full disk: the lock holds all the same (another run names no pid); the probe reports it


def release_all() -> None:
    """Give back every claim of this process (end of a command)."""
    while _HELD:
        _HELD.popitem()[1].release()


def release_new(before: set[str]) -> None:
    """Give back the claims taken since `held()` returned `before` (a write that claimed its own paths)."""
    for key in held() - before:
        _HELD.pop(key).release()


def _same_file(sidecar: Path, fd: int) -> bool:
    try:
        return os.stat(sidecar).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _holder(fd: int) -> str:
    """`pid 1234: lnbench verify --csv x.csv` of the live run that holds a sidecar. Right after taking it over, its
    owner may not have written its own name yet (the file is empty, or names the dead run it replaced): wait
    briefly for a live pid."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        pid, line = _read_holder(fd)
        if pid is not None and _alive(pid):
            return f"pid {pid}: {line}" if line else f"pid {pid}"
        if time.monotonic() >= deadline:
            return "pid unknown"
        time.sleep(0.02)


def _read_holder(fd: int) -> tuple[int | None, str]:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return None, ""
    first, _, rest = text.partition("\n")
    return (int(first) if first.strip().isdigit() else None), rest.strip()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
