"""The emulator's native helper (native.c): the per-lane loops of the global memory path and v_perm_b32, compiled with zig cc on
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
from lnbench.zig import zig_binary

SOURCE = Path(__file__).with_name("native.c")
NAME = "liblnbench_emu.so"
CFLAGS = ("-shared", "-fPIC", "-O2", "-fno-strict-aliasing", "-target", "x86_64-linux-gnu.2.28")
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
