"""Decoded kernels kept between processes, so a run whose kernels an earlier run executed skips tinygrad's decoder
(~0.1 ms an instruction, and importing it: ~0.4 s a process).

One file per kernel code under the emulator's folder (hip.emu_dir() / "decoded"), named by the hash of the code's
bytes and of what decodes them (decode.py's source and tinygrad's version): a changed decoder never reads an old
file. A file holds every instruction a process decoded from that code by PC; it is written whole under a temporary
name and renamed into place, so parallel workers writing one at once leave one complete file (the last), and a file
that cannot be read or written is decoded again, not an error.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from pathlib import Path

from lnbench.machine.cache_dirs import write_cache_file

#: what decode.decoded_fields gives for one instruction: (size, name, format, fields, widths, literal)
Entry = tuple[int, str, str, dict[str, int], dict[str, int], "int | None"]


@functools.lru_cache(maxsize=1)
def _decoder_hash() -> str:
    """The hash of what turns bytes into entries: decode.py itself and the tinygrad release it calls."""
    source = (Path(__file__).parent / "decode.py").read_bytes()
    try:
        tinygrad = importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        tinygrad = "none"
    return hashlib.sha256(source + tinygrad.encode()).hexdigest()[:16]


def path_for(code: bytes) -> Path:
    """The file of one kernel code's decoded instructions."""
    from lnbench.emu.hip import emu_dir

    name = hashlib.sha256(code).hexdigest()[:32]
    return emu_dir() / "decoded" / _decoder_hash() / f"{name}.msgpack"


def load(code: bytes) -> dict[int, Entry]:
    """The instructions an earlier process decoded from `code`, by PC; empty when there is no readable file."""
    try:
        return {int(pc): (int(size), str(name), str(fmt), dict(fields), dict(widths), literal)
                for pc, size, name, fmt, fields, widths, literal in read_rows(path_for(code))}
    except (ValueError, TypeError):
        return {}


def save(code: bytes, entries: dict[int, Entry]) -> None:
    """Write `entries` as the file of `code` (atomically; a folder that cannot be written is left alone)."""
    write_rows(path_for(code), [[pc, *entry] for pc, entry in sorted(entries.items())])


def read_rows(path: Path) -> list:
    """The msgpack list in `path`; empty when the file is missing or not one."""
    import msgpack

    try:
        rows = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
    except (OSError, ValueError, TypeError, msgpack.UnpackException):
        return []
    return rows if isinstance(rows, list) else []


def write_rows(out: Path, rows: list) -> None:
    """`rows` as msgpack in `out` (machine.cache_dirs.write_cache_file: whole, renamed into place)."""
    import msgpack

    write_cache_file(out, msgpack.packb(rows))
