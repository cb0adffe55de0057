"""Whole-batch fast paths for the buffer loads and stores without an index register (MUBUF): see fastpath.py.

With every wave of the batch at the instruction and every lane active, the general handler's lane lists are every
lane in order and its per-lane values are the register rows as they are; what is left is one address per lane and
one call of the memory checker. The common case runs in the native helper (native.c, lnbench_buf_addrs, then
lnbench_buf_load or _store): every lane's address and range test in one call; then, when every lane is in range (a raw
buffer: its bytes inside num_records; a buffer with a stride: index 0 below num_records, as the handler tests it) and
the accesses lie in one buffer, the access with every check in a second call, straight between the buffer and the
register rows, in memory.py's order. Where that call finds something (an uninitialized byte, a race before its
update) it has changed nothing, and the numpy path below runs the step and reports it.

The numpy path, for raw buffers only (a descriptor with a stride: the plan returns False and the handler runs the
step): when every lane's access lies inside num_records it makes the handler's one memory call; when some lane is out
of range it runs the handler's own component loop (ops_memory.load_components, store_components) on the same lanes.
The addresses, the bytes, the lane and workgroup lists it gives the memory checker are the handler's, so loads,
stores, footprint and every checker finding are the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from lnbench.emu import native
from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.fastpath_types import Operand, Plan
from lnbench.emu.ops_memory import (BUF_LOADS, BUF_STORES, BufferLanes, every_lane, load_components, store_components,
                                    widen)

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile
    from lnbench.emu.memory import Memory
    from lnbench.emu.state import Waves

U32, U64, I64 = np.uint32, np.uint64, np.int64
#: what a constant operand's reader is given (it reads neither)
_NO_REGISTERS = np.zeros((1, 1), U32)


def _lane_groups(w: Waves) -> np.ndarray:
    """The workgroup (in the grid) of every lane of the batch, wave-major (cached on the batch)."""
    groups = getattr(w, "_lane_groups", None)
    if groups is None:
        groups = np.repeat(w.global_group, 64)
        w._lane_groups = groups                          # type: ignore[attr-defined]
    return groups


class _Access:
    """One step's raw-buffer lanes: per wave the base address and num_records, per lane the byte offset."""

    def __init__(self, w: Waves, r: int, vaddr: int | None, imm: int, soffset: Operand) -> None:
        words = w.S[:, r:r + 4]
        self.raw = not (words[:, 1] & U32(0x3FFF0000)).any()
        lane = w.R[vaddr].astype(I64) if vaddr is not None else np.zeros((w.n, 64), I64)     # (offen=0: no VGPR)
        self.offset = lane + imm + soffset(w.R, w.S).astype(I64)                           # (waves, 64)
        self.nrec = words[:, 2, None].astype(I64)
        self.base = words[:, 0].astype(U64) | ((words[:, 1].astype(U64) & U64(0xFFFF)) << U64(32))

    def inside(self, end: int) -> bool:
        """Every lane's `end` bytes lie inside num_records."""
        return bool((self.offset + end <= self.nrec).all())

    def addresses(self) -> np.ndarray:
        return (self.base.astype(I64)[:, None] + self.offset).astype(U64).reshape(-1)

    def lanes(self, w: Waves, groups: np.ndarray | None) -> BufferLanes:
        """The general handler's per-lane view, for a step with some lane out of range."""
        n = self.offset.size
        zeros = np.zeros(n, I64)
        return BufferLanes(np.repeat(self.base, 64), self.offset.reshape(-1), zeros,
                           np.repeat(self.nrec[:, 0], 64), zeros, every_lane(w.n)[1], groups)


def plan_buffer(ins: Instr, reader) -> Plan | None:
    """The plan of a buffer load or store, or None (an index register, AGPR data, LDS, an soffset it cannot read)."""
    f = ins.f
    if ins.name not in BUF_LOADS and ins.name not in BUF_STORES:
        return None
    if f.get("idxen", 0) or f.get("acc", 0) or f.get("lds", 0):
        return None
    offen = bool(f.get("offen", 0))
    if not (256 <= f["vdata"] < AGPR and (not offen or 256 <= f["vaddr"] < AGPR)):
        return None
    soffset = reader(ins, f["soffset"])
    if soffset is None or f["soffset"] >= 256:
        return None
    soff = (f["soffset"], 0) if f["soffset"] < 128 else (-1, int(soffset[0](_NO_REGISTERS, _NO_REGISTERS)[0, 0]))
    r, data, imm = f["srsrc"], f["vdata"] - 256, f.get("offset", 0)
    vaddr = f["vaddr"] - 256 if offen else None
    count, size = BUF_LOADS[ins.name] if ins.name in BUF_LOADS else BUF_STORES[ins.name]
    top = max(vaddr or 0, data + count - 1)
    if ins.name in BUF_LOADS:
        return _load(ins.name, r, vaddr, data, imm, (soffset[0], soff), count, size), top
    return _store(r, vaddr, data, imm, (soffset[0], soff), count, size), top


class _Lanes(NamedTuple):
    """lnbench_buf_addrs' answer: its code (native.c), every lane's address, whether all its components are in range,
    (lowest, highest, OR, count) of those lanes. The arrays are the batch's own, reused by the next step."""

    code: int
    addr: np.ndarray
    valid: np.ndarray
    span: np.ndarray


ALL_IN, WHOLE_RAW, WHOLE_STRIDED, SOME_RAW = 2, 3, 4, 1        # lnbench_buf_addrs' codes (else: the handler)


def _native_lanes(w: Waves, r: int, vaddr: int | None, imm: int, soffset: tuple[int, int], count: int, size: int
                  ) -> _Lanes:
    scratch = getattr(w, "_buffer_scratch", None)
    if scratch is None:
        scratch = w._buffer_scratch = (np.empty(w.n * 64, I64), np.empty(w.n * 64, np.uint8),  # type: ignore[attr-defined]
                                       np.empty(4, I64))
    voff = None if vaddr is None else w.R_address + vaddr * w.row_len * 4
    return _Lanes(native.buf_addrs(w, voff, r, soffset, imm, count * size, size, *scratch), *scratch)


def _begin(w: Waves, profile: LaunchProfile, r: int, vaddr: int | None, imm: int, soffset: Operand
           ) -> tuple[_Access, Memory, np.ndarray | None] | None:
    """(the step's lanes, the launch's memory, each lane's workgroup for the race checker), None when some
    descriptor of the batch is not a raw buffer (the handler runs the step)."""
    access = _Access(w, r, vaddr, imm, soffset)
    if not access.raw:
        return None
    memory = profile.memory
    assert memory is not None
    return access, memory, _lane_groups(w) if memory.race else None


def _load(name: str, r: int, vaddr: int | None, data: int, imm: int, soffsets: tuple[Operand, tuple[int, int]],
          count: int, size: int):
    sign = name in ("buffer_load_sshort", "buffer_load_sbyte")
    soffset, soff = soffsets

    def run(w: Waves, profile: LaunchProfile) -> bool:
        lanes = _native_lanes(w, r, vaddr, imm, soff, count, size)
        if lanes.code not in (ALL_IN, WHOLE_RAW, WHOLE_STRIDED, SOME_RAW):
            return False
        memory = profile.memory
        assert memory is not None
        rows = native.RegisterRows(w.R_address, w.row_len, data, count, size, sign)
        if lanes.code == ALL_IN and memory.load_rows(lanes.addr, lanes.span, rows, w.global_group):
            return True
        if lanes.code in (WHOLE_RAW, WHOLE_STRIDED) and memory.load_rows(lanes.addr, lanes.span, rows, w.global_group,
                                                                         lanes.valid):
            return True
        if lanes.code == WHOLE_STRIDED:
            return False                               # (the numpy path below takes raw buffers only)
        begun = _begin(w, profile, r, vaddr, imm, soffset)
        if begun is None:
            return False
        access, memory, groups = begun
        shape = w.R[data].shape
        if not access.inside(count * size):            # some lane out of range: component by component
            values = load_components(memory, name, count, size, access.lanes(w, groups)).reshape(*shape, count)
            for j in range(count):
                w.R[data + j] = values[:, :, j]
            return True
        raw = memory.load(access.addresses(), count * size, "buffer load", every_lane(w.n)[1], groups)
        if size == 4:
            values = raw.view("<u4").reshape(*shape, count)
            for j in range(count):
                w.R[data + j] = values[:, :, j]
            return True
        w.R[data] = widen(raw, name).reshape(shape)
        return True
    return run


def _store(r: int, vaddr: int | None, data: int, imm: int, soffsets: tuple[Operand, tuple[int, int]], count: int,
           size: int):
    soffset, soff = soffsets

    def run(w: Waves, profile: LaunchProfile) -> bool:
        lanes = _native_lanes(w, r, vaddr, imm, soff, count, size)
        if lanes.code not in (ALL_IN, WHOLE_RAW, SOME_RAW):
            return False
        memory = profile.memory
        assert memory is not None
        if lanes.code == ALL_IN and memory.store_rows(lanes.addr, lanes.span,
                                                      native.RegisterRows(w.R_address, w.row_len, data, count, size),
                                                      w.global_group):
            return True
        begun = _begin(w, profile, r, vaddr, imm, soffset)
        if begun is None:
            return False
        access, memory, groups = begun
        if count == 1:
            words = w.R[data].reshape(-1, 1)
        else:
            words = np.stack([w.R[data + j].reshape(-1) for j in range(count)], axis=1)
        if count > 1 and access.inside(count * size):
            memory.store(access.addresses(), np.ascontiguousarray(words).view(np.uint8), "buffer store",
                         every_lane(w.n)[1], groups)
        elif count == 1 and access.inside(size):
            payload = np.ascontiguousarray(words[:, 0]).view(np.uint8).reshape(-1, 4)[:, :size]
            memory.store(access.addresses(), np.ascontiguousarray(payload), "buffer store", every_lane(w.n)[1], groups)
        else:                                           # some lane out of range: component by component
            store_components(memory, count, size, access.lanes(w, groups), words)
        return True
    return run
