"""The register-access records of executed instructions kept between processes (beside the decoded kernels of
decode_store), so a later run's first execution of an instruction neither records its operands by running the
general handler (RecordingStep) nor builds the record again: it takes the instruction's fast path at once.

One file per kernel code and accumulation-register base under the emulator's folder (hip.emu_dir() / "access"),
named by the hash of the code's bytes and of the emulator's sources (lnbench/emu/*.py: the handlers decide what an
instruction records, hazards.py how records become registers): any change to the emulator never reads an old file.
A record holds unified register indices (hazards.Access); the file is written whole and renamed into place, and
one that cannot be read is recorded again, not an error.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from lnbench.emu.decode_store import read_rows, write_rows
from lnbench.emu.hazards import Access, make_access
from lnbench.machine.checkout import content_hash


@functools.lru_cache(maxsize=1)
def _emulator_hash() -> str:
    return content_hash(Path(__file__).parent).removeprefix("content:")


def path_for(code: bytes, acc_base: int | None) -> Path:
    from lnbench.emu.hip import emu_dir

    name = hashlib.sha256(code).hexdigest()[:32]
    return emu_dir() / "access" / _emulator_hash() / f"{name}-{acc_base if acc_base is not None else 'v'}.msgpack"


class Accesses(dict[int, Access]):
    """PC -> Access of one kernel code: those an earlier process stored, and those this one records; `keep()`
    stores them when this process added some."""

    def __init__(self, code: bytes, acc_base: int | None) -> None:
        super().__init__()
        self.path = path_for(code, acc_base)
        try:
            for pc, reads, writes, kind, loads, lds_store, always in read_rows(self.path):
                self[int(pc)] = make_access([int(r) for r in reads], [int(r) for r in writes], int(kind),
                                            [int(r) for r in loads], bool(lds_store), bool(always))
        except (ValueError, TypeError):
            self.clear()
        self._stored = len(self)

    def keep(self) -> None:
        if len(self) > self._stored:
            write_rows(self.path, [[pc, a.reads.tolist(), a.writes.tolist(), a.kind, a.loads.tolist(), a.lds_store,
                                    a.always] for pc, a in sorted(self.items())])
            self._stored = len(self)
