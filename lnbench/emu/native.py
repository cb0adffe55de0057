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

import numpy as np

from lnbench.emu.cbuild import compile_library
from lnbench.emu.errors import EmulatorUnavailable
from lnbench.machine.zig import zig_binary

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


def _ptr(a: np.ndarray) -> int:
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
