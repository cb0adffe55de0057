"""Result files: default paths, writability checks made before the work, CSV/JSON writers, atomic writes."""
from __future__ import annotations

import atexit
import datetime as _dt
import errno
import json
import math
import os
import secrets
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lnbench.output import claims as output_claims, fallback as output_fallback
from lnbench.errors import LnbenchUsageError
from lnbench.results import SCHEMA_KEY, Cells, csv_frame, json_table, kind_of_metadata, plain


def default_output_path(command: str, suffix: str, results_dir: Path | None = None) -> Path:
    """results/<command>-<UTC timestamp>-<pid>-<random>.<suffix> under the current folder (git-ignored); the pid
    and random part keep concurrent runs, even ones started in the same second, from sharing a name."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = results_dir or default_results_dir()
    return base / f"{command}-{stamp}-{os.getpid()}-{secrets.token_hex(3)}.{suffix}"


def default_results_dir() -> Path:
    """$LNBENCH_RESULTS_DIR (an empty value counts as unset), else results/ under the current folder."""
    return Path(os.environ.get("LNBENCH_RESULTS_DIR") or Path.cwd() / "results")


#: characters of a result's name kept in its temporary sibling's name (a legal 255-character name still works)
_TMP_NAME_CHARS = 64


@dataclass
class _Reservation:
    """An output made ready before the work: the temporary sibling a regular file is renamed from, or the open
    descriptor of a FIFO or character device, which is written in place."""

    tmp: Path | None = None
    fd: int | None = None

    def release(self) -> None:
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
        if self.fd is not None:
            os.close(self.fd)


_RESERVED: dict[str, _Reservation] = {}


def _target(path: Path) -> tuple[Path, bool]:
    """Where a result for `path` goes: (a symlink's final target, else the path; True to write in place).

    A FIFO or character device is written in place; any other file that is not a regular one is refused."""
    try:
        mode = os.stat(path).st_mode           # follows links
    except FileNotFoundError:
        mode = None                             # a new file, or a dangling link: its target is created
    except OSError as exc:
        raise LnbenchUsageError(f"output path {path}: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise LnbenchUsageError(f"output path {path} is a directory")
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        return path, True
    if mode is not None and not stat.S_ISREG(mode):
        raise LnbenchUsageError(f"output path {path} is not a regular file, FIFO or character device")
    return (Path(os.path.realpath(path)) if path.is_symlink() else path), False


def _open_in_place(path: Path) -> int:
    """A write descriptor of a FIFO or character device, opened without waiting (a FIFO needs a reader now)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise LnbenchUsageError(f"output path {path} is a FIFO with no reader") from None
        raise LnbenchUsageError(f"output path {path} is not writable: {exc.strerror or exc}") from None
    os.set_blocking(fd, True)
    return fd


#: paths that name a descriptor this process has (its output redirected, maybe to a file)
_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_FOLDERS = ("/dev/fd/", "/proc/self/fd/")


def _inherited_fd(path: Path) -> int | None:
    """The descriptor /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N names, else None. Such an output
    is written through a copy of that descriptor, where it stands: renaming a file over the one standard output
    is redirected to would replace it, and the shell's later output would go nowhere."""
    text = os.path.abspath(path)
    if text in _STREAMS:
        return _STREAMS[text]
    for folder in _FD_FOLDERS:
        number = text.removeprefix(folder)
        if text.startswith(folder) and number.isdigit():
            return int(number)
    return None


def _dup(path: Path, fd: int) -> int:
    try:
        return os.dup(fd)
    except OSError as exc:
        raise LnbenchUsageError(f"output path {path} is not writable: {exc.strerror or exc}") from None


def check_writable(path: Path) -> Path:
    """Make an output ready before any work is done, so that a run never ends unable to write its results:
    create the folder, claim the path for this run (lnbench.output.claims: a live run writing it is a usage
    error) and make the temporary file the result will be renamed from, with a probe write in it
    (lnbench.output.fallback: a full or read-only folder is found now); a FIFO or character device is opened
    instead, to be written in place. A usage error when that fails. Returns where the result goes: the path, or
    a symlink's target (the link itself is kept). `release_outputs` drops what was not used."""
    fd = _inherited_fd(Path(path))
    if fd is not None:
        key = os.path.abspath(path)
        if key not in _RESERVED:
            _RESERVED[key] = _Reservation(fd=_dup(Path(path), fd))
        return Path(path)
    path, in_place = _target(Path(path))
    key = os.path.abspath(path)
    if key in _RESERVED:
        return path
    if in_place:
        _RESERVED[key] = _Reservation(fd=_open_in_place(path))
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LnbenchUsageError(f"cannot create folder for {path}: {exc.strerror or exc}") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise LnbenchUsageError(f"output path {path} is not writable: {os.strerror(errno.EACCES)}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:_TMP_NAME_CHARS]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise LnbenchUsageError(f"output path {path} is not writable: {_create_failure(path, exc)}") from None
    try:
        output_claims.claim(path)
        output_fallback.probe(fd, path)
    except LnbenchUsageError:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a result file gets what open() would give it
    _RESERVED[key] = _Reservation(tmp=Path(tmp))
    return path


def _create_failure(path: Path, exc: OSError) -> str:
    """Why no file could be created beside `path`: a folder that takes no new files (/proc, /sys) fails with
    ENOENT although it exists, which would read as a missing path."""
    if exc.errno == errno.ENOENT and path.parent.is_dir():
        return f"{path.parent} does not take new files"
    return exc.strerror or str(exc)


def renamable(path: Path) -> bool:
    """Is `path` an output made ready as a temporary file to rename (a regular file), not written in place?"""
    slot = _RESERVED.get(os.path.abspath(path))
    return slot is not None and slot.tmp is not None


def release_outputs() -> None:
    """End of a command: remove the temporary files (and close the descriptors) of outputs made ready but never
    written, and give back this run's claims on its result paths."""
    while _RESERVED:
        _RESERVED.popitem()[1].release()
    output_claims.release_all()
    output_fallback.forget()


atexit.register(release_outputs)     # commands release theirs (cli_common.guarded); this catches library use


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


Writer = Callable[[Path], object]          # (what it returns is ignored)
"""Writes one result into the file it is given (the output's temporary file)."""


def _claim(path: Path) -> tuple[Path, _Reservation]:
    """Where an output goes and its reservation, taken out of the table (made now if it was not made before)."""
    path = check_writable(Path(path))
    return path, _RESERVED.pop(os.path.abspath(path))


def _io(path: Path, action: Callable[..., Any], *args: Any) -> None:
    """Run one step of writing `path`; an OSError (a full disk, /dev/full) is a usage error naming the path."""
    try:
        action(*args)
    except OSError as exc:
        raise LnbenchUsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _copy_into(staged: Path, fd: int) -> None:
    sys.stdout.flush()          # what was printed before comes first where the output is standard output
    sys.stderr.flush()
    with open(staged, "rb") as src, open(fd, "wb", closefd=False) as dst:
        shutil.copyfileobj(src, dst)


def atomic_write_all(writes: Sequence[tuple[Path, Writer]]) -> list[Path]:
    """Write several outputs all or nothing: every one to its temporary file first (a FIFO's or character
    device's bytes to a staging folder), then the FIFOs and devices in place, and only then rename the files
    over their paths (or links' targets): readers never see half a file, and a write that fails leaves no
    result placed. A failure is ResultsNotWritten, `cannot write PATH: reason; the results are kept in FOLDER/
    (NAMES)` (lnbench.output.fallback.keep). Paths this call claims for itself (not made ready before) are given
    back after it. Returns where each result went."""
    claimed: list[tuple[Path, _Reservation]] = []
    before = output_claims.held()
    try:
        for path, _ in writes:
            claimed.append(_claim(path))
        with tempfile.TemporaryDirectory(prefix="lnbench-out-") as folder:
            staged = [slot.tmp or Path(folder) / f"out{i}" for i, (_, slot) in enumerate(claimed)]
            for (path, _), (_, write), file in zip(claimed, writes, staged):
                _io(path, write, file)
            for (path, slot), file in zip(claimed, staged):
                if slot.fd is not None:
                    _io(path, _copy_into, file, slot.fd)
            for path, slot in claimed:
                if slot.tmp is not None:
                    _io(path, os.replace, slot.tmp, path)
    except (LnbenchUsageError, OSError) as exc:
        for _, slot in claimed:          # the half-written temporary files first: their space may be needed
            slot.release()
        claimed.clear()
        where, kept = output_fallback.keep(writes)
        raise ResultsNotWritten(f"{_reason(exc)}; {where}", kept) from None
    finally:
        for _, slot in claimed:
            slot.release()
        output_claims.release_new(before)
    return [path for path, _ in claimed]


class ResultsNotWritten(LnbenchUsageError):
    """Results that could not be written where asked (exit 2); `kept`: whether they are in the folder the
    message names (lnbench.output.fallback)."""

    def __init__(self, message: str, kept: bool) -> None:
        super().__init__(message)
        self.kept = kept


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"cannot write results: {exc.strerror or exc}"
    return str(exc)


def atomic_write(path: Path, write: Writer) -> Path:
    """One output through atomic_write_all: its temporary file, then a rename (a FIFO or device: in place)."""
    return atomic_write_all([(Path(path), write)])[0]


#: how text files (CSV, Markdown) write what UTF-8 cannot encode: the surrogates of a non-UTF-8 file name
TEXT_ERRORS = "backslashreplace"


def csv_writer(rows: Sequence[Cells], metadata: Cells | None = None) -> Writer:
    """Row records (+ the run record's cells as columns) as CSV, for atomic_write(_all): one type per column,
    lists joined."""
    frame = csv_frame(rows, metadata)
    # a non-UTF-8 file name on the command line (a surrogate in command_line, a path) is written as \udcff,
    # never an encoding error after the work is done
    return lambda tmp: frame.to_csv(tmp, index=False, errors=TEXT_ERRORS)


def result_json_writer(rows: Sequence[Cells], metadata: Cells,
                       extra: dict[str, Any] | None = None) -> Writer:
    """A result file: {"metadata", the command's other entries, "schema", "data"}. Load its rows with
    `pd.read_json(path, orient="table")` (the other top-level entries are ignored there) and the metadata with
    `json.load(open(path))["metadata"]`."""
    kind = kind_of_metadata(metadata) if SCHEMA_KEY in plain(metadata) else None
    return json_writer({"metadata": plain(metadata), **(extra or {}), **json_table(rows, kind)})


def json_writer(payload: Any) -> Writer:
    """Any JSON-able payload (NaN written as null), for atomic_write(_all)."""
    def _clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {str(k): _clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_clean(v) for v in value]
        return value

    text = json.dumps(_clean(payload), indent=2, default=str)
    return lambda tmp: tmp.write_text(text + "\n")


def write_csv(rows: Sequence[Cells], path: Path, metadata: Cells | None = None) -> Path:
    """Rows (+ metadata columns) to CSV, atomically."""
    return atomic_write(Path(path), csv_writer(rows, metadata))


def write_json(payload: Any, path: Path) -> Path:
    """Any JSON-able payload to a file, atomically (NaN written as null)."""
    return atomic_write(Path(path), json_writer(payload))
