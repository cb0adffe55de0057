"""Results never end up only on the screen: an output folder that cannot take a write is found before the work,
and results that cannot be written where asked are kept elsewhere, in a folder the error names.

* `probe`: outputs.check_writable writes PROBE_BYTES into the temporary file it makes beside each result (then
  empties it), so a full disk, a quota or a read-only folder stops the run before any work (exit 2).
* `keep`: when writing results fails (outputs.atomic_write_all: a disk filled during the run, ENOSPC, EIO), every
  result of that write is written again into one folder of this run, `lnbench-kept-XXXX` under $TMPDIR (else
  under lnbench's cache folder, else the home folder), by the same writers; the error then ends with `; the results
  are kept in FOLDER/ (NAME, ...)`. A running command's checkpoints (lnbench.scaffold.sink) reuse the folder, so it
  always holds the latest rows.
* `keep_rows`: rows that cannot be encoded as asked (a value a CSV or JSON writer refuses) go into the same
  folder as JSON lines that always encode (`NAME.rows.jsonl`, one row per line, and `NAME.metadata.json`): any value
  JSON has no form for is written as its repr.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lnbench.machine.cache_dirs import lnbench_cache_dir
from lnbench.errors import LnbenchUsageError
from lnbench.results.records import Cells, plain

#: bytes written into the result's temporary file before the work (a block: a full file system refuses it)
PROBE_BYTES = 4096

_kept: Path | None = None


def probe(fd: int, path: Path) -> None:
    """Write PROBE_BYTES through `fd` (the temporary file beside `path`), then empty it again. A usage error
    naming the folder when the write fails."""
    try:
        written = os.write(fd, b"\0" * PROBE_BYTES)
        if written != PROBE_BYTES:
            raise OSError(28, os.strerror(28))          # a short write: the file system is (nearly) full
        os.ftruncate(fd, 0)
    except OSError as exc:
        raise LnbenchUsageError(f"output folder {path.parent} cannot take a write ({PROBE_BYTES}-byte probe for "
                                f"{path.name}): {exc.strerror or exc}; free some space or choose another "
                                f"folder") from None


def _candidates() -> list[Path]:
    folders = [Path(tempfile.gettempdir()), lnbench_cache_dir()]
    try:
        folders.append(Path.home())
    except RuntimeError:
        pass
    return folders


def _folder() -> Path:
    """This run's kept-results folder, made on first use under the first candidate that takes it."""
    global _kept
    if _kept is not None and _kept.is_dir():
        return _kept
    last: OSError | None = None
    for parent in _candidates():
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _kept = Path(tempfile.mkdtemp(prefix="lnbench-kept-", dir=parent))
            return _kept
        except OSError as exc:
            last = exc
    raise last or OSError("no folder")


def keep(writes: Sequence[tuple[Path, Callable[[Path], object]]]) -> tuple[str, bool]:
    """Write every (path, writer) again into this run's kept folder, each under its own name (atomically there
    too). Returns the clause the error line ends with (where they are, or why they could not be kept) and
    whether they were kept."""
    try:
        folder = _folder()
        names: list[str] = []
        for path, write in writes:
            name = _free_name(Path(path).name, names)
            target = folder / name
            staging = folder / f".{name}.tmp"
            write(staging)
            os.replace(staging, target)
            names.append(name)
    except (OSError, LnbenchUsageError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return f"the results could not be kept elsewhere either ({reason})", False
    return f"the results are kept in {folder}/ ({', '.join(names)})", True


def always_json(value: Any) -> Any:
    """`value` as what json.dumps always takes: mappings with text keys, lists, numbers (NaN and infinities as
    null), text, booleans, None; anything else as its repr."""
    if isinstance(value, Mapping):
        return {str(k): always_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [always_json(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    return repr(value)


def keep_rows(name: str, rows: Sequence[Cells], metadata: Cells) -> tuple[str, bool]:
    """`rows` and the run's `metadata` kept as JSON lines in this run's kept folder (keep), for rows that could
    not be encoded as asked."""
    lines = "".join(json.dumps(always_json(plain(row))) + "\n" for row in rows)
    head = json.dumps(always_json(plain(metadata)), indent=2) + "\n"
    return keep([(Path(f"{name}.rows.jsonl"), lambda path: path.write_text(lines, encoding="utf-8")),
                 (Path(f"{name}.metadata.json"), lambda path: path.write_text(head, encoding="utf-8"))])


def _free_name(name: str, taken: list[str]) -> str:
    """`name`, or `name-2`... when an earlier result of the same write had that name (two folders' x.csv)."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        stem, dot, suffix = name.partition(".")
        candidate = f"{stem}-{n}{dot}{suffix}"
    return candidate


def forget() -> None:
    """End of a command: a later command (in the same process) gets a folder of its own."""
    global _kept
    _kept = None


def discard() -> None:
    """The results reached their real paths after all: remove the kept folder of this run, if any."""
    global _kept
    if _kept is not None:
        for child in _kept.iterdir():
            child.unlink(missing_ok=True)
        _kept.rmdir()
    _kept = None
