"""Whole-batch fast paths for the raw buffer loads and stores (MUBUF, offen, no idxen): see fastpath.py.

With every wave of the batch at the instruction and every lane active, the general handler's lane lists are every
lane in order and its per-lane values are the register rows as they are; what is left is one address per lane and
one call of the memory checker. A plan runs only when the step is the general handler's common case, which it tests
before touching anything: every descriptor of the batch is a raw buffer (stride 0) and every lane's access lies
inside num_records. Otherwise it returns False and the general handler runs the step (partial ranges, structured
buffers). The addresses, the bytes, the lane and workgroup lists it gives the memory checker are the handler's, so
loads, stores, footprint and every checker finding are the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.ops_memory import BUF_LOADS, BUF_STORES, every_lane

if TYPE_CHECKING:
    from lnbench.emu.fastpath import Operand, Plan
    from lnbench.emu.machine import LaunchProfile
    from lnbench.emu.state import Waves

U32, U64, I64 = np.uint32, np.uint64, np.int64


def _lane_groups(w: Waves) -> np.ndarray:
    """The workgroup (in the grid) of every lane of the batch, wave-major (cached on the batch)."""
    groups = getattr(w, "_lane_groups", None)
    if groups is None:
        groups = np.repeat(w.global_group, 64)
        w._lane_groups = groups                          # type: ignore[attr-defined]
    return groups


def _addresses(w: Waves, r: int, vaddr: int, imm: int, soffset: Operand, end: int) -> np.ndarray | None:
    """Every lane's byte address (wave-major), or None when some descriptor is strided or some lane's `end` bytes
    are not all inside num_records (the general handler's cases)."""
    words = w.S[:, r:r + 4]
    if (words[:, 1] & U32(0x3FFF0000)).any():
        return None
    offset = w.R[vaddr].astype(I64) + imm + soffset(w.R, w.S).astype(I64)
    if not (offset + end <= words[:, 2, None].astype(I64)).all():
        return None
    base = words[:, 0].astype(U64) | ((words[:, 1].astype(U64) & U64(0xFFFF)) << U64(32))
    return (base.astype(I64)[:, None] + offset).astype(U64).reshape(-1)


def plan_buffer(ins: Instr, reader) -> Plan | None:
    """The plan of a buffer load or store, or None (an index register, AGPR data, a modifier set, an unknown soffset)."""
    f = ins.f
    if ins.name not in BUF_LOADS and ins.name not in BUF_STORES:
        return None
    if f.get("idxen", 0) or not f.get("offen", 0) or f.get("acc", 0) or f.get("lds", 0):
        return None
    if not (256 <= f["vaddr"] < AGPR and 256 <= f["vdata"] < AGPR):
        return None
    soffset = reader(ins, f["soffset"])
    if soffset is None:
        return None
    r, vaddr, data, imm = f["srsrc"], f["vaddr"] - 256, f["vdata"] - 256, f.get("offset", 0)
    if ins.name in BUF_LOADS:
        count, size = BUF_LOADS[ins.name]
        return _load(ins.name, r, vaddr, data, imm, soffset[0], count, size), max(vaddr, data + count - 1)
    count, size = BUF_STORES[ins.name]
    return _store(r, vaddr, data, imm, soffset[0], count, size), max(vaddr, data + count - 1)


def _load(name: str, r: int, vaddr: int, data: int, imm: int, soffset: Operand, count: int, size: int):
    def run(w: Waves, profile: LaunchProfile) -> bool:
        addr = _addresses(w, r, vaddr, imm, soffset, count * size)
        if addr is None:
            return False
        memory = profile.memory
        assert memory is not None
        groups = _lane_groups(w) if memory.race else None
        raw = memory.load(addr, count * size, "buffer load", every_lane(w.n)[1], groups)
        shape = w.R[data].shape
        if size == 4:
            values = raw.view("<u4").reshape(*shape, count)
            for j in range(count):
                w.R[data + j] = values[:, :, j]
            return True
        if size == 2:
            value = raw.view("<u2")[:, 0].astype(U32)
            if name == "buffer_load_sshort":
                value = value.astype(np.uint16).view(np.int16).astype(np.int32).view(U32)
        else:
            value = raw[:, 0].astype(U32)
            if name == "buffer_load_sbyte":
                value = value.astype(np.uint8).view(np.int8).astype(np.int32).view(U32)
        w.R[data] = value.reshape(shape)
        return True
    return run


def _store(r: int, vaddr: int, data: int, imm: int, soffset: Operand, count: int, size: int):
    def run(w: Waves, profile: LaunchProfile) -> bool:
        addr = _addresses(w, r, vaddr, imm, soffset, count * size)
        if addr is None:
            return False
        memory = profile.memory
        assert memory is not None
        groups = _lane_groups(w) if memory.race else None
        if count == 1:
            payload = np.ascontiguousarray(w.R[data].reshape(-1)).view(np.uint8).reshape(-1, 4)[:, :size]
        else:
            payload = np.stack([w.R[data + j].reshape(-1) for j in range(count)], axis=1).view(np.uint8)
        memory.store(addr, np.ascontiguousarray(payload), "buffer store", every_lane(w.n)[1], groups)
        return True
    return run
