"""Whole-batch plans for ds_read and ds_write (see fastpath.py): every wave of the batch at the instruction, every lane
active.

The general handler (ops_memory.ds_read, ds_write) builds each lane's addresses and workgroup in numpy, then calls
the native helper four times: the LDS race checker, initcheck, the data move and the bank model. For a whole batch
the lanes are every lane in order and their values are the register rows as they are, so one call of native.c's
lnbench_lds_rows does all of it, in the handler's order, with the same helpers: values, race and initcheck findings,
LDS bytes, bank clocks and benign writes come out the same. An access outside the LDS allocation makes the call
change nothing and leave the step to the handler, which reports it; a race or initcheck finding comes back with the
handler's indices and is reported with the handler's messages (ops_memory.lds_race_fault, lds_uninitialized_fault).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lnbench.emu import native
from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.fastpath_types import Plan
from lnbench.emu.ops_memory import (_DS_READS, _DS_WRITES, LDS_RACE_CHECK, count_benign, lds_race_fault, lds_shape,
                                    lds_uninitialized_fault)

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile
    from lnbench.emu.state import Waves

PAIRED = ("ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64",
          "ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")


def _vgpr(code: int) -> bool:
    return 256 <= code < AGPR


def plan_lds(ins: Instr) -> Plan | None:
    """The plan of an LDS read or write the handler runs (no AGPR data), or None."""
    name, f = ins.name, ins.f
    if name not in _DS_READS and name not in _DS_WRITES and name not in PAIRED:
        return None
    write = name.startswith("ds_write")
    offsets, count = lds_shape(name, f)
    parts = len(offsets)
    data = [f["data0"], f["data1"]][:parts] if write else [f["vdst"]]
    if f.get("acc", 0) or not _vgpr(f["addr"]) or not all(_vgpr(code) for code in data):
        return None
    rows = [code - 256 for code in data]
    top = max(f["addr"] - 256, *(r + count - 1 for r in rows)) if write else \
        max(f["addr"] - 256, rows[0] + parts * count - 1)
    lanes_per_pass = 32 // (1 << (parts * count - 1).bit_length())        # lds_banks.bank_cycles
    return _run(f["addr"] - 256, np.asarray(offsets, np.int64), parts, count, write,
                np.asarray(rows if write else [0, 0], np.int64), rows[0], lanes_per_pass), top


def _run(addr: int, offsets: np.ndarray, parts: int, count: int, write: bool, data: np.ndarray, dst: int,
         lanes_per_pass: int):
    def run(w: Waves, profile: LaunchProfile) -> bool:
        race = w.check_lds and LDS_RACE_CHECK["on"]
        code, found, info, banks = native.lds_rows(w, addr, offsets, parts, count, write, data, dst, race,
                                                   lanes_per_pass)
        if code == 1:
            return False                                  # an access outside the allocation: the handler says so
        if code == 2:
            raise lds_race_fault(w, found, info, _addresses(w, addr, offsets), np.arange(w.n).repeat(64), count)
        if race:
            count_benign(profile, info)
        if code == 3:
            raise lds_uninitialized_fault(found, _addresses(w, addr, offsets), np.tile(np.arange(64), w.n),
                                          4 * count)
        profile.lds_bytes += 4 * w.n * 64 * parts * count
        profile.lds_bank_cycles += banks[0]
        profile.lds_conflict_cycles += banks[0] - banks[1]
        return True
    return run


def _addresses(w: Waves, addr: int, offsets: np.ndarray) -> np.ndarray:
    """(lanes, parts) byte addresses, as the handler has them (for a finding's message)."""
    return w.R[addr].reshape(-1).astype(np.int64)[:, None] + offsets[None, :]
