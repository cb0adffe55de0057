"""The emulator's native helper (native.c): the per-lane loops of the global memory path, the LDS race checker and bank
model, v_perm_b32 and the f32 fused multiply-add, compiled with zig cc on
first use beside the HIP stand-in (`<emu_dir()>/<sha256(source, flags)[:16]>/liblnbench_emu.so`).

Each function works on n accesses of `nbytes` consecutive bytes at per-lane byte offsets into one buffer (numpy
arrays, C-contiguous: offsets int64, workgroups int32) and does what the numpy it replaces did, bit for bit: the
buffer bytes gathered or scattered in lane order, written- and touched-byte maps, the race shadow's tests and
updates. A finding comes back as the first (lane, byte) in row-major order, `lane * nbytes + byte`, or -1.
"""
from __future__ import annotations

import ctypes
import hashlib
import threading
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from lnbench.emu.cbuild import compile_library
from lnbench.emu.errors import EmulatorUnavailable
from lnbench.machine.zig import zig_binary


class Batch(Protocol):
    """What the whole-batch helpers read of a batch of waves (lnbench.emu.state.Waves): its register file and SGPRs
    by address, its LDS and the LDS checkers' state. Declared here so that this module, which state's handlers
    call, does not import state."""

    n: int
    R_address: int
    S_address: int
    row_len: int
    group: np.ndarray
    epoch: np.ndarray
    wave_id: np.ndarray
    lds: np.ndarray
    lds_wkey: np.ndarray
    lds_rkey: np.ndarray
    lds_written: np.ndarray | None

SOURCE = Path(__file__).with_name("native.c")
NAME = "liblnbench_emu.so"
CFLAGS = ("-shared", "-fPIC", "-O2", "-fno-strict-aliasing", "-ffp-contract=off", "-target", "x86_64-linux-gnu.2.28")
_P, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_SIGNATURES: dict[str, tuple[type | None, tuple]] = {
    "lnbench_gather": (None, (_P, _P, _I64, _I64, _P)),
    "lnbench_scatter": (None, (_P, _P, _I64, _I64, _P)),
    "lnbench_mark": (None, (_P, _P, _I64, _I64)),
    "lnbench_first_unset": (_I64, (_P, _P, _I64, _I64)),
    "lnbench_race_modified": (_I64, (_P, _P, _I64, _I64, _P, _INT)),
    "lnbench_race_read": (_I64, (_P, _P, _I64, _I64, _P)),
    "lnbench_race_store": (_I64, (_P, _P, _I64, _I64, _P)),
    "lnbench_race_note": (_I64, (_P, _P, _I64, _I64, _P, _INT)),
    "lnbench_perm_b32": (None, (_P, _P, _P, _I64, _P)),
    "lnbench_perm_b32_lanes": (None, (_P, _INT, _P, _INT, _P, _INT, _I64, _P)),
    "lnbench_fma_f32": (_I64, (_P, _P, _P, _I64, _P)),
    "lnbench_fma_rows": (_I64, (_P, _I64, _P, _I64, _P)),
    "lnbench_lds_race": (_I64, (_P, _P, _P, _I64, _I64, _I64, _P, _P, _P, _P, _P, _I64, _I64, _I64, _P, _P)),
    "lnbench_lds_banks": (_I64, (_P, _P, _P, _I64, _I64, _I64, _I64, _I64, _P)),
    "lnbench_lds_store": (None, (_P, _I64, _P, _P, _I64, _I64, _I64, _P)),
    "lnbench_lds_load": (None, (_P, _I64, _P, _P, _I64, _I64, _I64, _P)),
    "lnbench_lds_written": (_I64, (_P, _I64, _P, _P, _I64, _I64, _I64, _INT)),
    "lnbench_lds_rows": (_I64, (_P, _I64, _I64, _I64, _P, _I64, _I64, _INT, _P, _I64, _P, _P, _P, _P, _I64, _I64, _P,
                                _P, _INT, _P, _I64, _P, _P, _P)),
    "lnbench_swizzle_rows": (None, (_P, _I64, _I64, _I64, _I64, _P)),
    "lnbench_bpermute_rows": (None, (_P, _I64, _I64, _I64, _I64, _I64, _I64)),
    "lnbench_wc_issue": (None, (_I64, _I64, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I64, _I64, _I64, _INT)),
    "lnbench_wc_wait": (_I64, (_I64, _I64, _P, _P, _I64, _I64, _P, _P, _INT)),
    "lnbench_wc_pending": (_I64, (_I64, _I64, _P, _P, _P, _P, _P, _I64, _I64)),
    "lnbench_buf_addrs": (_I64, (_P, _I64, _P, _I64, _I64, _I64, _I64, _I64, _I64, _P, _P, _P)),
    "lnbench_buf_load_lanes": (_I64, (_P, _I64, _P, _P, _I64, _P, _P, _P, _INT, _P, _P, _P, _I64, _I64, _I64, _I64,
                                      _INT)),
    "lnbench_buf_load": (_I64, (_P, _I64, _P, _I64, _P, _P, _P, _INT, _P, _P, _P, _I64, _I64, _I64, _I64, _INT)),
    "lnbench_buf_store": (_I64, (_P, _I64, _P, _I64, _P, _P, _INT, _P, _INT, _P, _P, _P, _I64, _I64, _I64, _I64,
                                 _P)),
}
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def library_path() -> Path:
    """The built helper; compiles it when this source has not been built yet."""
    from lnbench.emu.hip import emu_dir
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(CFLAGS).encode()).hexdigest()[:16]
    out = emu_dir() / key / NAME
    if out.exists():
        return out
    zig = zig_binary()
    if zig is None:
        raise EmulatorUnavailable("the emulated device builds its native helper with zig: pip install ziglang")
    return compile_library(zig, out, SOURCE, CFLAGS, "the emulator's native helper", emu_dir() / "zig-cache")


def lib() -> ctypes.CDLL:
    """The loaded helper (built and loaded once per process)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                loaded = ctypes.CDLL(str(library_path()))
                for name, (restype, argtypes) in _SIGNATURES.items():
                    fn = getattr(loaded, name)
                    fn.restype, fn.argtypes = restype, argtypes
                _lib = loaded
    return _lib


_char_at, _address_of = ctypes.c_char.from_buffer, ctypes.addressof


def _ptr(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first byte (through the buffer protocol: a third of what `a.ctypes.data`
    costs, which is most of a small call's cost; read-only and empty arrays take the numpy way)."""
    try:
        return _address_of(_char_at(a))      # type: ignore[arg-type]
    except (TypeError, ValueError):
        return a.ctypes.data


def gather(data: np.ndarray, offs: np.ndarray, nbytes: int) -> np.ndarray:
    """(n, nbytes) uint8: the bytes of `data` at each offset."""
    out = np.empty((offs.size, nbytes), np.uint8)
    lib().lnbench_gather(_ptr(data), _ptr(offs), offs.size, nbytes, _ptr(out))
    return out


def scatter(data: np.ndarray, offs: np.ndarray, src: np.ndarray) -> None:
    """data[offs[i] + j] = src[i, j], in lane order (src: (n, nbytes) uint8, C-contiguous)."""
    if not data.flags.writeable:
        raise ValueError("assignment destination is read-only")
    lib().lnbench_scatter(_ptr(data), _ptr(offs), offs.size, src.shape[1], _ptr(src))


def mark(flags: np.ndarray, offs: np.ndarray, nbytes: int) -> None:
    """Set the flags (a bool or uint8 map) of every byte the accesses cover."""
    lib().lnbench_mark(_ptr(flags), _ptr(offs), offs.size, nbytes)


def first_unset(flags: np.ndarray, offs: np.ndarray, nbytes: int) -> int:
    return int(lib().lnbench_first_unset(_ptr(flags), _ptr(offs), offs.size, nbytes))


def race_modified(modifier: np.ndarray, offs: np.ndarray, nbytes: int, groups: np.ndarray, atomic: bool) -> int:
    return int(lib().lnbench_race_modified(_ptr(modifier), _ptr(offs), offs.size, nbytes, _ptr(groups), int(atomic)))


def race_read(reader: np.ndarray, offs: np.ndarray, nbytes: int, groups: np.ndarray) -> int:
    return int(lib().lnbench_race_read(_ptr(reader), _ptr(offs), offs.size, nbytes, _ptr(groups)))


def race_store(modifier: np.ndarray, offs: np.ndarray, nbytes: int, groups: np.ndarray) -> int:
    return int(lib().lnbench_race_store(_ptr(modifier), _ptr(offs), offs.size, nbytes, _ptr(groups)))


def race_note(shadow: np.ndarray, offs: np.ndarray, nbytes: int, groups: np.ndarray, atomic: bool) -> None:
    if lib().lnbench_race_note(_ptr(shadow), _ptr(offs), offs.size, nbytes, _ptr(groups), int(atomic)) == -2:
        raise MemoryError("the emulator's race checker could not allocate its scratch")


def perm_b32(s0: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """v_perm_b32 of three equally shaped C-contiguous uint32 arrays."""
    out = np.empty_like(s0)
    lib().lnbench_perm_b32(_ptr(s0), _ptr(s1), _ptr(s2), s0.size, _ptr(out))
    return out


def perm_b32_lanes(operands: list[tuple[np.ndarray, int]], out: np.ndarray) -> None:
    """v_perm_b32 into `out` (C-contiguous uint32, one value per lane) from three (C-contiguous uint32 array, shift)
    operands: lane i reads element i >> shift (0: per lane, 6: per wave, 63: one value)."""
    (a, sa), (b, sb), (c, sc) = operands
    lib().lnbench_perm_b32_lanes(_ptr(a), sa, _ptr(b), sb, _ptr(c), sc, out.size, _ptr(out))


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray | None:
    """a*b+c rounded once to float32 (ops_vector.fma_f32's algorithm) for float32 arrays of one broadcast shape;
    None when an operand is not a float32 array or some result is NaN (the caller's numpy path then decides the
    NaN payloads, bit for bit as before)."""
    if not all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in (a, b, c)):
        return None
    if not a.shape == b.shape == c.shape:
        a, b, c = np.broadcast_arrays(a, b, c)
    a, b, c = (np.ascontiguousarray(x) for x in (a, b, c))
    out = np.empty(a.shape, np.float32)
    if lib().lnbench_fma_f32(_ptr(a), _ptr(b), _ptr(c), a.size, _ptr(out)):
        return None
    return out


def fma_rows(register_file: int, row_len: int, rows: int, halves: int, scratch: int) -> bool:
    """lnbench_fma_rows on the register file at address `register_file` (rows of `row_len` floats), the
    (halves, 4) int64 row table at `rows` and a float32 scratch of halves * row_len at `scratch`: True when the rows
    were written, False when some result is NaN (nothing written)."""
    return lib().lnbench_fma_rows(register_file, row_len, rows, halves, scratch) == 0


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def lds_race(wkey: np.ndarray, rkey: np.ndarray, lds: np.ndarray, addrs: np.ndarray, groups: np.ndarray,
             wave: np.ndarray, epoch: np.ndarray, wave_id: np.ndarray, ndw: int,
             values: np.ndarray | None) -> tuple[int, np.ndarray]:
    """The LDS race checker's test and update of one access (native.c's lnbench_lds_race says how): (the first
    finding's index i * m + j or -1, info). wkey, rkey: (groups, dwords) int64; lds: (groups, bytes) uint8; addrs:
    (n, parts) byte addresses; groups, wave: per access; epoch, wave_id: per batch wave; values: a write's
    (n, parts * ndw) dwords, None for a read."""
    info = np.zeros(6, np.int64)
    addrs, groups, wave = _i64(addrs), _i64(groups), _i64(wave)
    vals = None if values is None else np.ascontiguousarray(values, np.uint32)
    found = lib().lnbench_lds_race(_ptr(wkey), _ptr(rkey), _ptr(lds), wkey.shape[0], wkey.shape[1], lds.shape[1],
                                   _ptr(addrs),
                                   _ptr(groups), _ptr(wave), _ptr(_i64(epoch)), _ptr(_i64(wave_id)), addrs.shape[0],
                                   addrs.shape[1], ndw, None if vals is None else _ptr(vals), _ptr(info))
    if found == -2:
        raise MemoryError("the emulator's LDS race checker could not allocate its scratch")
    return int(found), info


def lds_banks(rows: np.ndarray, lanes: np.ndarray, addrs: np.ndarray, count: int, k: int,
              lanes_per_pass: int) -> tuple[int, int]:
    """(clocks, active passes) of one LDS instruction over the k waves of a step (lds_banks.py states the model)."""
    out = np.zeros(2, np.int64)
    rows, lanes, addrs = _i64(rows), _i64(lanes), _i64(addrs)
    if lib().lnbench_lds_banks(_ptr(rows), _ptr(lanes), _ptr(addrs), addrs.shape[0], addrs.shape[1], count, k,
                               lanes_per_pass, _ptr(out)) == -2:
        raise MemoryError("the emulator's LDS bank model could not allocate its scratch")
    return int(out[0]), int(out[1])


def lds_store(lds: np.ndarray, addrs: np.ndarray, groups: np.ndarray, data: np.ndarray) -> None:
    """ds_write's stores: data (n, parts, nbytes) uint8 at each access's (n, parts) byte addresses of its workgroup's
    LDS (lds: (groups, bytes)), part by part and lane by lane."""
    addrs, groups = _i64(addrs), _i64(groups)
    data = np.ascontiguousarray(data, np.uint8)
    lib().lnbench_lds_store(_ptr(lds), lds.shape[1], _ptr(addrs), _ptr(groups), addrs.shape[0], addrs.shape[1],
                            data.shape[2], _ptr(data))


def lds_load(lds: np.ndarray, addrs: np.ndarray, groups: np.ndarray, nbytes: int) -> np.ndarray:
    """ds_read's loads: (n, parts * nbytes) uint8, the bytes at each access."""
    addrs, groups = _i64(addrs), _i64(groups)
    out = np.empty((addrs.shape[0], addrs.shape[1] * nbytes), np.uint8)
    lib().lnbench_lds_load(_ptr(lds), lds.shape[1], _ptr(addrs), _ptr(groups), addrs.shape[0], addrs.shape[1],
                           nbytes, _ptr(out))
    return out


def lds_written(written: np.ndarray, addrs: np.ndarray, groups: np.ndarray, nbytes: int, write: bool) -> int:
    """LDS initcheck: a write marks its bytes written; a read gives its first unwritten byte as
    (i * parts + p) * nbytes + byte, or -1."""
    addrs, groups = _i64(addrs), _i64(groups)
    return int(lib().lnbench_lds_written(_ptr(written), written.shape[1], _ptr(addrs), _ptr(groups), addrs.shape[0],
                                         addrs.shape[1], nbytes, int(write)))


def buf_addrs(w: Batch, voff: int | None, r: int, soffset: tuple[int, int], imm: int, nbytes: int, size: int,
              addr: np.ndarray, valid: np.ndarray, out: np.ndarray) -> int:
    """lnbench_buf_addrs on batch `w` (native.c says what it computes and returns): every lane's address into `addr`
    (int64, 64 per wave), whether all its components are in range into `valid` (uint8), out = (lowest, highest, bits
    OR-ed, count) of those lanes. voff: the address of the offset register's row (None: offset 0); soffset: (SGPR or
    -1, the constant where -1); size: a component's bytes."""
    return int(lib().lnbench_buf_addrs(voff, w.n, w.S_address, r, soffset[0], soffset[1], imm, nbytes, size,
                                       _ptr(addr), _ptr(valid), _ptr(out)))


class RegisterRows(NamedTuple):
    """Where a whole-batch buffer access's data lies: `components` register rows of the file at `address` (rows of
    `row_len` uint32 lanes) from row `first`, `size` bytes a component (1, 2: the low bytes; a load sign-extends them
    when `sign`)."""

    address: int
    row_len: int
    first: int
    components: int
    size: int
    sign: bool = False


def _opt(a: np.ndarray | None) -> int | None:
    return None if a is None else _ptr(a)


def buf_load(data: np.ndarray, base: int, addr: np.ndarray, written: np.ndarray | None, modifier: np.ndarray | None,
             reader: np.ndarray | None, shift: int, wave_group: np.ndarray, touched: np.ndarray | None,
             rows: RegisterRows) -> bool:
    """lnbench_buf_load (native.c says what it does): True when it found something (and changed nothing)."""
    found = lib().lnbench_buf_load(_ptr(data), base, _ptr(addr), addr.size, _opt(written), _opt(modifier),
                                   _opt(reader), shift, _ptr(wave_group), _opt(touched), rows.address, rows.row_len,
                                   rows.first, rows.components, rows.size, int(rows.sign))
    if found == -2:
        raise MemoryError("the emulator's race checker could not allocate its scratch")
    return bool(found)


def buf_store(data: np.ndarray, base: int, addr: np.ndarray, written: np.ndarray | None, modifier: np.ndarray | None,
              modified: bool, reader: np.ndarray | None, shift: int, wave_group: np.ndarray,
              touched: np.ndarray | None, rows: RegisterRows) -> tuple[int, int]:
    """lnbench_buf_store: (0 stored, 1 a finding before any change, 2 a clash of two workgroups in this access; the
    clash's shadow entry)."""
    found = np.zeros(1, np.int64)
    code = lib().lnbench_buf_store(_ptr(data), base, _ptr(addr), addr.size, _opt(written), _opt(modifier),
                                   int(modified), _opt(reader), shift, _ptr(wave_group), _opt(touched), rows.address,
                                   rows.row_len, rows.first, rows.components, rows.size, _ptr(found))
    if code == -2:
        raise MemoryError("the emulator's race checker could not allocate its scratch")
    return int(code), int(found[0])


def lds_rows(w: Batch, addr: int, offsets: np.ndarray, parts: int, ndw: int, write: bool, data: np.ndarray, dst: int,
             race: bool, lanes_per_pass: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """lnbench_lds_rows on batch `w` (native.c says what it does): (its code, the finding's index, the race checker's
    info, the bank model's (clocks, active passes))."""
    found, info, banks = np.zeros(1, np.int64), np.zeros(6, np.int64), np.zeros(2, np.int64)
    written = None if w.lds_written is None else w.lds_written.view(np.uint8)
    code = lib().lnbench_lds_rows(w.R_address, w.row_len, w.n, addr, _ptr(offsets), parts, ndw, int(write),
                                  _ptr(data), dst, _ptr(w.group), _ptr(w.epoch), _ptr(w.wave_id), _ptr(w.lds),
                                  w.lds.shape[0], w.lds.shape[1], _ptr(w.lds_wkey), _ptr(w.lds_rkey), int(race),
                                  _opt(written), lanes_per_pass, _ptr(found), _ptr(info), _ptr(banks))
    if code == -2:
        raise MemoryError("the emulator's LDS checks could not allocate their scratch")
    return int(code), int(found[0]), info, banks


def swizzle_rows(w: Batch, src: int, dst: int, source: np.ndarray) -> None:
    """Row dst of every wave = row src at the lanes `source` (64 int64) of the same wave."""
    lib().lnbench_swizzle_rows(w.R_address, w.row_len, w.n, src, dst, _ptr(source))


def bpermute_rows(w: Batch, addr: int, data: int, dst: int, offset: int) -> None:
    """Row dst of every wave = row data at lane ((row addr + offset) / 4) % 64 of the same wave."""
    lib().lnbench_bpermute_rows(w.R_address, w.row_len, w.n, addr, data, dst, offset)


def address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first byte, for a caller that keeps the array and its address."""
    return _ptr(a)


def buf_load_lanes(data: np.ndarray | None, base: int, addr: np.ndarray, valid: np.ndarray | None,
                   written: np.ndarray | None, modifier: np.ndarray | None, reader: np.ndarray | None, shift: int,
                   wave_group: np.ndarray, touched: np.ndarray | None, rows: RegisterRows) -> bool:
    """lnbench_buf_load_lanes: a load whose lanes have all components in range or none; True when it found something
    (and changed nothing)."""
    found = lib().lnbench_buf_load_lanes(_opt(data), base, _ptr(addr), _opt(valid), addr.size, _opt(written),
                                         _opt(modifier), _opt(reader), shift, _ptr(wave_group), _opt(touched),
                                         rows.address, rows.row_len, rows.first, rows.components, rows.size,
                                         int(rows.sign))
    if found == -2:
        raise MemoryError("the emulator's race checker could not allocate its scratch")
    return bool(found)
