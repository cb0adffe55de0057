"""Memory instructions: SMEM (s_load), MUBUF (buffer_*), GLOBAL, SCRATCH and LDS (ds_read/ds_write).

Buffer instructions check each component against the descriptor's num_records: out-of-range loads
return 0 and out-of-range stores are dropped (the kernels' masked row tails depend on it). Every
in-range global access then goes through the memory checker (memory.py). LDS accesses are checked
against the workgroup's allocation and for races: a dword written by one wave and read or written by
another with no s_barrier between them is a fault (what a missing barrier does on hardware, where
the outcome depends on timing).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from lnbench.emu import native
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.lds_banks import bank_cycles
from lnbench.emu.registry import op
from lnbench.emu.state import Step, Waves

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile
    from lnbench.emu.memory import Memory

U32, U64, I64 = np.uint32, np.uint64, np.int64
OFF = 0x7F           # saddr "off" in GLOBAL/SCRATCH encodings

#: buffer instruction -> (components, bytes each)
BUF_LOADS = {"buffer_load_dword": (1, 4), "buffer_load_dwordx2": (2, 4), "buffer_load_dwordx3": (3, 4),
             "buffer_load_dwordx4": (4, 4), "buffer_load_ushort": (1, 2), "buffer_load_ubyte": (1, 1),
             "buffer_load_sshort": (1, 2), "buffer_load_sbyte": (1, 1)}
BUF_STORES = {"buffer_store_dword": (1, 4), "buffer_store_dwordx2": (2, 4), "buffer_store_dwordx3": (3, 4),
              "buffer_store_dwordx4": (4, 4), "buffer_store_short": (1, 2), "buffer_store_byte": (1, 1)}


def _sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


#: k -> (rows, lanes) of every lane of k waves (read-only): what np.nonzero of an all-true EXEC gives, without it
_ALL_LANES: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def every_lane(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(wave row, lane) of every lane of k waves, wave-major then lane order (read-only, cached)."""
    hit = _ALL_LANES.get(k)
    if hit is None:
        rows, lanes = np.repeat(np.arange(k), 64), np.tile(np.arange(64), k)
        rows.flags.writeable = lanes.flags.writeable = False
        hit = _ALL_LANES[k] = (rows, lanes)
    return hit


def _active(st: Step) -> tuple[np.ndarray, np.ndarray]:
    """(wave row in the step, lane) of every active lane, wave-major then lane order."""
    if st.all_active:
        return every_lane(st.k)
    rows, lanes = np.nonzero(st.exec_mask)
    return rows, lanes


def _wave_rows(st: Step, rows: np.ndarray) -> np.ndarray:
    """Batch wave index of each step row in `rows`."""
    return _per_lane(st, rows, np.arange(st.w.n)[st.sel] if isinstance(st.sel, slice) else st.sel)


def _every_lane(st: Step, rows: np.ndarray) -> bool:
    """Every lane of every wave of the step is listed (wave-major, lane order) and the waves are a slice of the batch:
    per-lane values are the registers' rows as they are."""
    return rows.size == st.k * 64 and isinstance(st.sel, slice)


def _lane_reg(st: Step, rows: np.ndarray, lanes: np.ndarray, r: int) -> np.ndarray:
    """Register row `r` of the register file at each listed (row, lane): (n,) uint32."""
    if _every_lane(st, rows):
        return st.w.V[st.sel, r].reshape(-1)
    return st.w.V[_wave_rows(st, rows), r, lanes]


def _per_lane(st: Step, rows: np.ndarray, per_wave: np.ndarray) -> np.ndarray:
    """A per-wave value (k,) at each listed (row, lane)."""
    return np.repeat(per_wave, 64) if rows.size == st.k * 64 else per_wave[rows]


def _memory(st: Step) -> Memory:
    memory = st.profile.memory
    assert memory is not None                   # run_kernel and run_code give every launch its memory
    return memory


def _groups(st: Step, rows: np.ndarray) -> np.ndarray | None:
    """The workgroup (in the whole grid) of each access, for the race checker (None when it is off)."""
    if not _memory(st).race:
        return None
    return _per_lane(st, rows, st.w.global_group[st.sel]) if isinstance(st.sel, slice) else \
        st.w.global_group[_wave_rows(st, rows)]


# ---------------------------------------------------------------- SMEM
@op("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8", "s_load_dwordx16", cls="smem")
def s_load(st: Step) -> None:
    f = st.ins.f
    count = int(st.ins.name[len("s_load_dword"):].lstrip("x") or 1)
    base = st.sval64(f["sbase"])
    off = _sext(f["offset"], 21) if f.get("imm", 1) else st.sval(f["offset"]).astype(I64)
    if f.get("soffset_en", 0):
        off = off + st.sval(f["soffset"]).astype(I64)
    addrs = (base.astype(I64) + off).astype(U64) & ~U64(3)
    data = _memory(st).load(addrs, 4 * count, "s_load", groups=_groups(st, np.arange(st.k))
                            ).view("<u4").reshape(st.k, count)
    for i in range(count):
        st.set_s(f["sdata"] + i, data[:, i])


# ---------------------------------------------------------------- MUBUF
def _buffer_lanes(st: Step, rows: np.ndarray, lanes: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per active lane: (base address, byte offset into the buffer, index, num_records, stride)."""
    f = st.ins.f
    S = st.w.S
    r = f["srsrc"]
    words = S[st.sel, r:r + 4] if isinstance(st.sel, slice) else S[st.sel][:, r:r + 4]
    base = _per_lane(st, rows, words[:, 0].astype(U64) | ((words[:, 1].astype(U64) & U64(0xFFFF)) << U64(32)))
    stride = _per_lane(st, rows, ((words[:, 1] >> U32(16)) & U32(0x3FFF)).astype(I64))
    num_records = _per_lane(st, rows, words[:, 2].astype(I64))
    vaddr = f["vaddr"] - 256 if f["vaddr"] >= 256 else f["vaddr"]
    idx = np.zeros(rows.size, I64)
    voff = np.zeros(rows.size, I64)
    if f.get("idxen", 0):
        idx = _lane_reg(st, rows, lanes, vaddr).astype(I64)
        vaddr += 1
    if f.get("offen", 0):
        voff = _lane_reg(st, rows, lanes, vaddr).astype(I64)
    soff = _per_lane(st, rows, st.sval(f["soffset"]).astype(I64))
    offset = voff + f.get("offset", 0) + soff
    return base, offset, idx, num_records, stride


def _in_range(offset: np.ndarray, idx: np.ndarray, num_records: np.ndarray, stride: np.ndarray, end: int) -> np.ndarray:
    if not stride.any():                       # raw buffers only (the usual case): the byte range test alone
        return offset + end <= num_records
    raw = stride == 0
    return np.where(raw, offset + end <= num_records, idx < num_records)


#: the memory instructions whose data registers may be AGPRs (acc=1): the register helpers map them
ACC = frozenset({"acc"})


class BufferLanes(NamedTuple):
    """A buffer instruction's inputs per active lane (wave-major, lane order): base address, byte offset into the
    buffer, index, num_records and stride of the lane's descriptor, the lane number (for fault messages) and the
    lane's workgroup in the grid (None when the race checker is off)."""

    base: np.ndarray
    offset: np.ndarray
    idx: np.ndarray
    nrec: np.ndarray
    stride: np.ndarray
    lanes: np.ndarray
    groups: np.ndarray | None


def _component(b: BufferLanes, j: int, size: int) -> tuple[np.ndarray | slice, np.ndarray] | None:
    """(the lanes whose component j is in range, their addresses), None when no lane's is."""
    in_range = _in_range(b.offset + j * size, b.idx, b.nrec, b.stride, size)
    ok: np.ndarray | slice = in_range
    if in_range.size and in_range.all():
        ok = slice(None)                           # every lane in range: views, no copies
    elif not in_range.any():
        return None
    return ok, (b.base[ok].astype(I64) + b.offset[ok] + j * size + b.idx[ok] * b.stride[ok]).astype(U64)


def widen(raw: np.ndarray, name: str) -> np.ndarray:
    """The dword of each lane's loaded bytes (raw: (lanes, size) uint8, size 1, 2 or 4): sub-dword loads zero- or
    sign-extended (buffer_load_sshort, _sbyte)."""
    size = raw.shape[1]
    if size == 4:
        return raw.view("<u4")[:, 0]
    if size == 2:
        value = raw.view("<u2")[:, 0].astype(U32)
        if name == "buffer_load_sshort":
            value = value.astype(np.uint16).view(np.int16).astype(np.int32).view(U32)
        return value
    value = raw[:, 0].astype(U32)
    if name == "buffer_load_sbyte":
        value = value.astype(np.uint8).view(np.int8).astype(np.int32).view(U32)
    return value


def load_components(memory: Memory, name: str, count: int, size: int, b: BufferLanes) -> np.ndarray:
    """A buffer load component by component: (lanes, count) uint32, 0 where a component is out of range (widen
    extends the sub-dword loads). One memory load per component."""
    result = np.zeros((b.offset.size, count), U32)
    for j in range(count):
        lanes = _component(b, j, size)
        if lanes is not None:
            ok, addr = lanes
            raw = memory.load(addr, size, "buffer load", b.lanes[ok], None if b.groups is None else b.groups[ok])
            result[ok, j] = widen(raw, name)
    return result


def store_components(memory: Memory, count: int, size: int, b: BufferLanes, data: np.ndarray) -> None:
    """A buffer store component by component (data: (lanes, count) uint32): out-of-range components are dropped. One
    memory store per component."""
    for j in range(count):
        lanes = _component(b, j, size)
        if lanes is not None:
            ok, addr = lanes
            payload = np.ascontiguousarray(data[ok, j]).view(np.uint8).reshape(-1, 4)[:, :size]
            memory.store(addr, np.ascontiguousarray(payload), "buffer store", b.lanes[ok],
                         None if b.groups is None else b.groups[ok])


@op(*BUF_LOADS, cls="vmem_load", honours=ACC)
def buffer_load(st: Step) -> None:
    count, size = BUF_LOADS[st.ins.name]
    rows, lanes = _active(st)
    base, offset, idx, nrec, stride = _buffer_lanes(st, rows, lanes)
    if count > 1 and _in_range(offset, idx, nrec, stride, count * size).all():   # every component in range
        addr = (base.astype(I64) + offset + idx * stride).astype(U64)
        raw = _memory(st).load(addr, count * size, "buffer load", lanes, _groups(st, rows))
        _write_lanes(st, st.ins.f["vdata"], rows, lanes, raw.view("<u4").reshape(-1, count))
        return
    lanes_in = BufferLanes(base, offset, idx, nrec, stride, lanes, _groups(st, rows))
    _write_lanes(st, st.ins.f["vdata"], rows, lanes, load_components(_memory(st), st.ins.name, count, size, lanes_in))


def _write_lanes(st: Step, code: int, rows: np.ndarray, lanes: np.ndarray, values: np.ndarray) -> None:
    """Write values[:, j] to VGPR (or AGPR: acc=1) code+j in the listed (row, lane) positions only."""
    count = values.shape[1]
    r0 = st.row(code, count)
    if r0 + count > st.w.V.shape[1]:
        raise EmulatorFault(f"load into v{r0 + count - 1}, beyond the allocated VGPRs")
    if rows.size == st.k * 64:                 # every lane of every wave: whole registers at once
        per_lane = values.reshape(st.k, 64, count)
        if isinstance(st.sel, slice):
            for j in range(count):             # register by register (faster than one transposed copy)
                st.w.V[st.sel, r0 + j, :] = per_lane[:, :, j]
        else:
            st.w.V[st.sel, r0:r0 + count, :] = per_lane.transpose(0, 2, 1)
        return
    st.w.V[_wave_rows(st, rows)[:, None], r0 + np.arange(count), lanes[:, None]] = values


def _read_lanes(st: Step, code: int, rows: np.ndarray, lanes: np.ndarray, count: int) -> np.ndarray:
    r0 = st.row(code, count)
    if _every_lane(st, rows):                  # every lane of every wave: whole registers, one at a time
        out = np.empty((st.k, 64, count), U32)
        for j in range(count):
            out[:, :, j] = st.w.V[st.sel, r0 + j, :]
        return out.reshape(-1, count)
    if rows.size == st.k * 64:
        return st.w.V[st.sel, r0:r0 + count, :].transpose(0, 2, 1).reshape(-1, count)
    return st.w.V[_wave_rows(st, rows)[:, None], r0 + np.arange(count), lanes[:, None]]


@op(*BUF_STORES, cls="vmem_store", honours=ACC)
def buffer_store(st: Step) -> None:
    count, size = BUF_STORES[st.ins.name]
    rows, lanes = _active(st)
    base, offset, idx, nrec, stride = _buffer_lanes(st, rows, lanes)
    data = _read_lanes(st, st.ins.f["vdata"], rows, lanes, count)
    if count > 1 and _in_range(offset, idx, nrec, stride, count * size).all():   # every component in range
        addr = (base.astype(I64) + offset + idx * stride).astype(U64)
        _memory(st).store(addr, np.ascontiguousarray(data).view(np.uint8).reshape(-1, 4 * count), "buffer store",
                          lanes, _groups(st, rows))
        return
    store_components(_memory(st), count, size, BufferLanes(base, offset, idx, nrec, stride, lanes, _groups(st, rows)),
                     data)


# ---------------------------------------------------------------- GLOBAL
def _global_addrs(st: Step, rows: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    f = st.ins.f
    a = f["addr"] - 256
    off = _sext(f.get("offset", 0), 13)
    if f["saddr"] == OFF:
        v = _lane_reg(st, rows, lanes, a).astype(U64) | (_lane_reg(st, rows, lanes, a + 1).astype(U64) << U64(32))
        return (v.astype(I64) + off).astype(U64)
    s = _per_lane(st, rows, st.sval64(f["saddr"]))
    return (s.astype(I64) + _lane_reg(st, rows, lanes, a).astype(I64) + off).astype(U64)


_GLOBAL_LOADS = {"global_load_dword": 1, "global_load_dwordx2": 2, "global_load_dwordx4": 4}
_GLOBAL_STORES = {"global_store_dword": 1, "global_store_dwordx2": 2, "global_store_dwordx4": 4}


@op(*_GLOBAL_LOADS, cls="vmem_load", honours=ACC)
def global_load(st: Step) -> None:
    count = _GLOBAL_LOADS[st.ins.name]
    rows, lanes = _active(st)
    addrs = _global_addrs(st, rows, lanes)
    data = _memory(st).load(addrs, 4 * count, "global load", lanes, _groups(st, rows)).view("<u4").reshape(-1, count)
    _write_lanes(st, st.ins.f["vdst"], rows, lanes, data)


@op(*_GLOBAL_STORES, cls="vmem_store", honours=ACC)
def global_store(st: Step) -> None:
    count = _GLOBAL_STORES[st.ins.name]
    rows, lanes = _active(st)
    addrs = _global_addrs(st, rows, lanes)
    data = _read_lanes(st, st.ins.f["data"], rows, lanes, count)
    _memory(st).store(addrs, np.ascontiguousarray(data).view(np.uint8).reshape(-1, 4 * count), "global store", lanes,
                      _groups(st, rows))


#: sub-dword GLOBAL accesses. Loads: (bytes, numpy type) of the value, zero- or sign-extended to the dword;
#: stores: (bytes, bit position in the data VGPR) of what is stored (_d16_hi: its high half)
_GLOBAL_NARROW_LOADS: dict[str, tuple[int, type[Any] | np.dtype]] = {
    "global_load_ubyte": (1, np.uint8), "global_load_sbyte": (1, np.int8),
    "global_load_ushort": (2, np.dtype("<u2")), "global_load_sshort": (2, np.dtype("<i2"))}
_GLOBAL_NARROW_STORES = {"global_store_byte": (1, 0), "global_store_byte_d16_hi": (1, 16),
                         "global_store_short": (2, 0), "global_store_short_d16_hi": (2, 16)}


@op(*_GLOBAL_NARROW_LOADS, cls="vmem_load", honours=ACC)
def global_load_narrow(st: Step) -> None:
    size, kind = _GLOBAL_NARROW_LOADS[st.ins.name]
    rows, lanes = _active(st)
    addrs = _global_addrs(st, rows, lanes)
    raw = _memory(st).load(addrs, size, "global load", lanes, _groups(st, rows))
    value = np.ascontiguousarray(raw).view(kind)[:, 0].astype(np.int32).view(U32)
    _write_lanes(st, st.ins.f["vdst"], rows, lanes, value.reshape(-1, 1))


@op(*_GLOBAL_NARROW_STORES, cls="vmem_store", honours=ACC)
def global_store_narrow(st: Step) -> None:
    size, shift = _GLOBAL_NARROW_STORES[st.ins.name]
    rows, lanes = _active(st)
    addrs = _global_addrs(st, rows, lanes)
    data = _read_lanes(st, st.ins.f["data"], rows, lanes, 1)[:, 0].astype(U32) >> U32(shift)
    payload = np.ascontiguousarray(data).view(np.uint8).reshape(-1, 4)[:, :size]
    _memory(st).store(addrs, np.ascontiguousarray(payload), "global store", lanes, _groups(st, rows))


@op("global_atomic_add_f32", cls="vmem_store", honours=ACC,
    approx="the adds apply in one fixed order (batch, then wave, then lane); on a GPU the order varies")
def global_atomic_add_f32(st: Step) -> None:
    if st.ins.f.get("sc0", 0):
        raise EmulatorFault("global_atomic_add_f32 returning the old value (sc0/glc) is not supported")
    rows, lanes = _active(st)
    addrs = _global_addrs(st, rows, lanes)
    vals = _read_lanes(st, st.ins.f["data"], rows, lanes, 1)[:, 0].view(np.float32)
    _memory(st).atomic_add_f32(addrs, vals, lanes, _groups(st, rows))


# ---------------------------------------------------------------- SCRATCH (per-lane private memory)
def _scratch_addrs(st: Step, rows: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    f = st.ins.f
    wave_rows = _wave_rows(st, rows)
    addr = np.full(rows.size, _sext(f.get("offset", 0), 13), I64)
    if f["saddr"] != OFF:
        addr += st.sval(f["saddr"]).astype(I64)[rows]
    if f.get("sve", 0):
        addr += st.w.V[wave_rows, f["addr"] - 256, lanes].astype(I64)
    return addr


def _scratch_access(st: Step, prefix: str) -> tuple[np.ndarray, np.ndarray, int, tuple[np.ndarray, ...]]:
    """What a scratch load or store (`prefix` + x2/x4) touches: the active rows and lanes, the dword count and the
    index of its bytes in the waves' private segments (4 × count bytes a lane). Faults on an access outside the
    segment."""
    count = int(st.ins.name[len(prefix):].lstrip("x") or 1)
    rows, lanes = _active(st)
    addr = _scratch_addrs(st, rows, lanes)
    limit = st.w.scratch.shape[2]
    bad = (addr < 0) | (addr + 4 * count > limit)
    if bad.any():
        raise EmulatorFault(f"scratch access at private offset {int(addr[bad][0])} outside the "
                            f"{limit}-byte private segment")
    wave_rows = _wave_rows(st, rows)
    return rows, lanes, count, (wave_rows[:, None], lanes[:, None], addr[:, None] + np.arange(4 * count))


@op("scratch_load_dword", "scratch_load_dwordx2", "scratch_load_dwordx4", cls="vmem_load", honours=ACC)
def scratch_load(st: Step) -> None:
    rows, lanes, count, at = _scratch_access(st, "scratch_load_dword")
    raw = np.ascontiguousarray(st.w.scratch[at])
    _write_lanes(st, st.ins.f["vdst"], rows, lanes, raw.view("<u4").reshape(-1, count))


@op("scratch_store_dword", "scratch_store_dwordx2", "scratch_store_dwordx4", cls="vmem_store", honours=ACC)
def scratch_store(st: Step) -> None:
    rows, lanes, count, at = _scratch_access(st, "scratch_store_dword")
    data = np.ascontiguousarray(_read_lanes(st, st.ins.f["data"], rows, lanes, count)).view(np.uint8)
    st.w.scratch[at] = data.reshape(-1, 4 * count)


# ---------------------------------------------------------------- LDS
_DS_READS = {"ds_read_b32": 1, "ds_read_b64": 2, "ds_read_b96": 3, "ds_read_b128": 4}
_DS_WRITES = {"ds_write_b32": 1, "ds_write_b64": 2, "ds_write_b96": 3, "ds_write_b128": 4}


def _lds_targets(st: Step, rows: np.ndarray, lanes: np.ndarray, byte_offsets: list[int], count_per: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wave rows, group index, byte address) for each access; a fault outside the LDS allocation."""
    wave_rows = _wave_rows(st, rows)
    base = _lane_reg(st, rows, lanes, st.ins.f["addr"] - 256).astype(I64)
    groups = _per_lane(st, rows, st.w.group[st.sel])
    limit = st.w.lds.shape[1]
    addrs = np.stack([base + o for o in byte_offsets], axis=1)          # (n, parts)
    if not base.size or (int(base.min()) + min(byte_offsets) >= 0
                         and int(base.max()) + max(byte_offsets) + 4 * count_per <= limit):
        return wave_rows, groups, addrs                                 # every access inside: no per-access test
    bad = (addrs < 0) | (addrs + 4 * count_per > limit)
    if bad.any():
        i = np.argwhere(bad)[0]
        raise EmulatorFault(f"LDS access at byte {int(addrs[tuple(i)])} (lane {int(lanes[i[0]])}) outside the "
                            f"workgroup's {limit}-byte LDS allocation")
    return wave_rows, groups, addrs


#: the LDS race checker is on unless a caller turns it off for a run (e.g. to read values past a known race)
LDS_RACE_CHECK = {"on": True}
SEVERAL_READERS = 0xFFFFFFFF


def _wave_name(w, wave: int) -> str:
    """'wave 2 of workgroup 5' for a wave row of the batch."""
    first = int(np.flatnonzero(w.group == w.group[wave])[0])
    return f"wave {wave - first} of workgroup {int(w.global_group[wave])}"


def _race_check_and_mark(st: Step, wave_rows: np.ndarray, groups: np.ndarray, addrs: np.ndarray, ndw: int,
                         write: bool, values: np.ndarray | None = None) -> None:
    """The LDS race checker: RAW, WAR and WAW between waves of a workgroup with no barrier between.

    Per dword one key for the last writer and one for the last reader(s): epoch << 32 | wave (state.py).
    A write that stores the value the dword already holds (several waves writing the same value, as some
    kernels do on purpose) cannot change what any wave reads, whatever the order: it is benign, counted
    in the profile (`lds_benign_writes`), not a fault. `values`: the dwords a write stores, (n, parts*ndw).

    Every wave of a workgroup has the workgroup's epoch (barrier releases raise them together) and a key is
    never from a later epoch, so "another wave, this epoch" is key >= epoch << 32 and key != this wave's key.
    The tests and updates run in the native helper (native.c, lnbench_lds_race), one call per instruction.
    """
    if not LDS_RACE_CHECK["on"]:
        return
    w = st.w
    found, info = native.lds_race(w.lds_wkey, w.lds_rkey, w.lds, addrs, groups, wave_rows, w.epoch, w.wave_id, ndw,
                                  None if not write else values)
    if found >= 0:
        raise lds_race_fault(w, found, info, addrs, wave_rows, ndw)
    count_benign(st.profile, info)


def count_benign(profile: LaunchProfile, info: np.ndarray) -> None:
    """Add the race checker's benign writes (info[5]) to the profile."""
    if info[5]:
        profile.lds_benign_writes = getattr(profile, "lds_benign_writes", 0) + int(info[5])


def lds_race_fault(w: Waves, found: int, info: np.ndarray, addrs: np.ndarray, wave_rows: np.ndarray,
                   ndw: int) -> EmulatorFault:
    """The fault of the race checker's finding `found` (i * parts * ndw + j; info as native.lds_race gives it)."""
    i, j = divmod(found, addrs.shape[1] * ndw)
    dword = int(addrs[i, j // ndw]) // 4 + j % ndw
    who = int(w.wave_id[wave_rows[i]])
    kind, other = int(info[0]), int(info[1]) & SEVERAL_READERS
    if kind == 1:
        return EmulatorFault(f"LDS race: {_wave_name(w, who)} reads LDS dword {dword} written "
                             f"by {_wave_name(w, other)} with no s_barrier between them")
    new, held = int(info[3]), int(info[4])
    if kind == 2:
        other_name = "several waves" if other == SEVERAL_READERS else _wave_name(w, other)
        return EmulatorFault(f"LDS race: {_wave_name(w, who)} writes LDS dword {dword} (value "
                             f"0x{new:08x}, was 0x{held:08x}) that {other_name} "
                             f"{'wrote' if info[2] else 'read'} with no s_barrier between them")
    a, b = sorted((who, other))
    va, vb = (new, held) if a == who else (held, new)
    return EmulatorFault(f"LDS race: {_wave_name(w, a)} and {_wave_name(w, b)} write different values "
                         f"(0x{va:08x}, 0x{vb:08x}) to LDS dword {dword} in one step with no s_barrier "
                         f"between them")


def lds_shape(name: str, f: dict[str, int]) -> tuple[list[int], int]:
    """(the byte offset of each part, dwords per part) of an LDS read or write.

    ds_read/ds_write_bN: one part of N/32 dwords at ADDR + the 16-bit offset; ds_read2/ds_write2_b32: two
    one-dword parts at ADDR + 4*offset0 and ADDR + 4*offset1 (b64: two-dword parts at ADDR + 8*offset).
    """
    if "2_" in name or "2st64_" in name:
        count = 2 if name.endswith("b64") else 1             # offsets count in units of the element size
        unit = 4 * count * (64 if "st64" in name else 1)     # ...times 64 for the st64 forms
        return [unit * f["offset0"], unit * f["offset1"]], count
    return [f["offset0"] | (f["offset1"] << 8)], {**_DS_WRITES, **_DS_READS}[name]


def _lds_parts(st: Step, write: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None]:
    """(rows, lanes, groups, byte addresses (n, parts), dwords per part, a write's data (n, parts, dwords)) of a
    checked LDS access (lds_shape)."""
    f = st.ins.f
    rows, lanes = _active(st)
    offsets, count = lds_shape(st.ins.name, f)
    wave_rows, groups, addrs = _lds_targets(st, rows, lanes, offsets, count)
    data = None
    if write:                                  # (n, parts, count): what each part stores
        fields = ("data0", "data1")[:addrs.shape[1]]
        data = np.stack([_read_lanes(st, f[k], rows, lanes, count) for k in fields], axis=1)
    if st.w.check_lds:                         # a write's race check compares the stored values with the held ones
        _race_check_and_mark(st, wave_rows, groups, addrs, count, write=write,
                             values=None if data is None else data.reshape(rows.size, -1))
    if st.w.lds_written is not None:
        _lds_initcheck(st, groups, addrs, 4 * count, write, lanes)
    return rows, lanes, groups, addrs, count, data


def _lds_initcheck(st: Step, groups: np.ndarray, addrs: np.ndarray, nbytes: int, write: bool,
                   lanes: np.ndarray) -> None:
    """initcheck for LDS: a read of bytes no wave of the workgroup has written is a fault."""
    assert st.w.lds_written is not None        # the caller checks it
    first = native.lds_written(st.w.lds_written.view(np.uint8), addrs, groups, nbytes, write)
    if first >= 0:
        raise lds_uninitialized_fault(first, addrs, lanes, nbytes)


def lds_uninitialized_fault(first: int, addrs: np.ndarray, lanes: np.ndarray, nbytes: int) -> EmulatorFault:
    """initcheck's fault for the first unwritten byte `first` ((i * parts + p) * nbytes + byte) of a read."""
    at, byte = divmod(first, nbytes)
    i, part = divmod(at, addrs.shape[1])
    return EmulatorFault(f"uninitialized read: LDS byte {int(addrs[i, part]) + byte} (lane {int(lanes[i])}) is read "
                         f"before any wave of its workgroup wrote it")


@op(*_DS_READS, "ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64", cls="lds",
    honours=ACC)
def ds_read(st: Step) -> None:
    rows, lanes, groups, addrs, count, _ = _lds_parts(st, write=False)
    values = native.lds_load(st.w.lds, addrs, groups, 4 * count).view("<u4")
    _write_lanes(st, st.ins.f["vdst"], rows, lanes, values)
    st.profile.lds_bytes += 4 * values.size
    _count_banks(st, rows, lanes, addrs, count)


@op(*_DS_WRITES, "ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64", cls="lds",
    honours=ACC)
def ds_write(st: Step) -> None:
    rows, lanes, groups, addrs, count, data = _lds_parts(st, write=True)
    assert data is not None                   # a write's parts carry its data
    native.lds_store(st.w.lds, addrs, groups, data.view(np.uint8))
    st.profile.lds_bytes += 4 * data.size
    _count_banks(st, rows, lanes, addrs, count)


def _count_banks(st: Step, rows: np.ndarray, lanes: np.ndarray, addrs: np.ndarray, count: int) -> None:
    """Add the step's LDS bank clocks and its conflict clocks (beyond one per pass) to the profile."""
    busy, passes = bank_cycles(rows, lanes, addrs, count, st.k)
    st.profile.lds_bank_cycles += busy
    st.profile.lds_conflict_cycles += busy - passes
