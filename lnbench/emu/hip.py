"""The stand-in HIP library of the emulated device: build it, load it, route kernel launches to Python.

`hip_stub.c` exports the 28 HIP symbols FlyDSL's JIT runtime (`libfly_jit_runtime.so`) imports, under
symbol version `hip_4.2` and soname `libamdhip64.so.7`. It is compiled on first use with the `ziglang`
package's C compiler into the user cache, then loaded RTLD_GLOBAL before flydsl loads its runtime, so
the runtime's `NEEDED libamdhip64.so.7` resolves to it. Device memory is host memory; every launch
completes inside `hipModuleLaunchKernel`, which calls back into this module, which builds a
`LaunchRequest` (code object, kernel, grid, block, kernarg segment) and calls the installed handler.

    hip.load()                          # before flydsl first loads its runtime
    hip.set_launch_handler(run_kernel)  # run_kernel(req: LaunchRequest) -> None; raise to fail
    compiled_fn(...)                    # FlyDSL's real launch path
    err = hip.take_launch_error()       # the handler's exception, if a launch failed

Launch errors. What FlyDSL 0.5.0 does when hipModuleLaunchKernel fails (measured on the JIT path of
`flydsl.compiler.compile`, both ABIs): its runtime (`mgpuLaunchKernel`) prints
`'hipModuleLaunchKernel(function, gridX, ...)' failed with 'hipErrorLaunchFailure'` to stderr and goes on;
the compiled function returns None, raises nothing, the process lives, and nothing else reaches Python.
So the handler's exception is kept here and `take_launch_error()` hands it over (the first one not yet
taken, process-wide; later failures are counted in a note on it): the caller must check after each launch.
The ctypes callback catches everything (BaseException included) and returns non-zero, so the stub
returns hipErrorLaunchFailure (719) and sets hipGetLastError; nothing ever unwinds into C.

Kernarg: explicit argument i of the metadata `.args` takes `.size` bytes from kernelParams[i] at `.offset`;
`hidden_*` arguments (none in lnbench's kernels) get what HIP would write: block counts, group sizes,
grid dims 3, dynamic LDS; 0 for the rest.

Build cache: `<emu_dir()>/<sha256(source, version script, flags)[:16]>/libamdhip64.so.7`, built under a temp
name and moved into place with os.replace (parallel pytest-xdist workers may race).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lnbench.emu.cbuild import compile_library
from lnbench.emu.errors import EmulatorUnavailable
from lnbench.machine.zig import zig_binary

if TYPE_CHECKING:
    from lnbench.emu.codeobject import CodeObject

SONAME = "libamdhip64.so.7"
SOURCE = Path(__file__).with_name("hip_stub.c")
VERSION_SCRIPT = "hip_4.2 { global: hip*; lnbench_*; local: *; };\n"
CFLAGS = ("-shared", "-fPIC", "-O2", "-target", "x86_64-linux-gnu.2.28")
MODE_EXECUTE, MODE_NULL = 0, 1

_LAUNCH_CB = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p,     # image, image size, kernel name
    ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,      # grid
    ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,      # block
    ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,      # dynamic LDS, stream, kernelParams
)


@dataclass(frozen=True)
class LaunchRequest:
    """One hipModuleLaunchKernel call, as the emulator needs it."""

    code_object: bytes      # the ELF image
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_lds: int
    stream: int
    kernarg: bytes          # the kernarg segment built from the code object's metadata .args


_lock = threading.RLock()
_lib: ctypes.CDLL | None = None
_handler: Callable[[LaunchRequest], None] | None = None
_error: BaseException | None = None
_more_errors = 0
_code_objects: OrderedDict[bytes, CodeObject] = OrderedDict()
_CODE_OBJECT_CACHE = 64


# ---------------------------------------------------------------- build

def _build_key() -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(VERSION_SCRIPT.encode())
    h.update(" ".join(CFLAGS).encode())
    return h.hexdigest()[:16]


def emu_dir() -> Path:
    """Folder holding the built libraries: $LNBENCH_EMU_DIR, else next to $LNBENCH_TOOLKIT_DIR, else the cache."""
    if os.environ.get("LNBENCH_EMU_DIR"):
        return Path(os.environ["LNBENCH_EMU_DIR"])
    if os.environ.get("LNBENCH_TOOLKIT_DIR"):
        return Path(os.environ["LNBENCH_TOOLKIT_DIR"]).parent / "emu"
    from lnbench.machine.cache_dirs import lnbench_cache_dir
    return lnbench_cache_dir() / "emu"


def library_path() -> Path:
    """Path of the built stand-in library; compiles it (zig cc) when this source has not been built yet."""
    out = emu_dir() / _build_key() / SONAME
    if out.exists():
        return out
    zig = zig_binary()
    if zig is None:
        raise EmulatorUnavailable("the emulated device builds its HIP stand-in with zig: pip install ziglang")
    flags = [*CFLAGS, "-Wl,--version-script={hip.map}", f"-Wl,-soname,{SONAME}"]
    return compile_library(zig, out, SOURCE, flags, "the HIP stand-in", emu_dir() / "zig-cache",
                           extra={"hip.map": VERSION_SCRIPT})


# ---------------------------------------------------------------- load

def _mapped_libraries() -> set[str]:
    try:
        with open("/proc/self/maps") as fh:
            return {line.split(None, 5)[5].strip() for line in fh if len(line.split(None, 5)) == 6}
    except OSError:
        return set()


def load() -> None:
    """Load the stand-in into this process (idempotent); EmulatorUnavailable where it must not or cannot be."""
    global _lib
    with _lock:
        if _lib is not None:
            return
        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            raise EmulatorUnavailable(f"the emulated device runs on Linux x86_64, not {sys.platform} "
                                      f"{platform.machine()}")
        import torch
        if getattr(torch.version, "hip", None) is not None:
            raise EmulatorUnavailable(f"torch is a ROCm build (HIP {torch.version.hip}): use the real GPU, "
                                      "the emulated device never loads next to a real HIP runtime")
        path = library_path()
        mapped = _mapped_libraries()
        real = sorted(p for p in mapped if os.path.basename(p).startswith("libamdhip64")
                      and os.path.realpath(p) != os.path.realpath(path))
        if real:
            raise EmulatorUnavailable(f"a HIP runtime is already loaded in this process ({real[0]})")
        if any(os.path.basename(p) == "libfly_jit_runtime.so" for p in mapped):
            raise EmulatorUnavailable("flydsl's runtime was loaded in this process before the emulated device: "
                                      "activate the emulator before the first FlyDSL compile or launch")
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        lib.lnbench_emu_set_launch_callback.argtypes = [_LAUNCH_CB]
        lib.lnbench_emu_set_launch_callback.restype = None
        lib.lnbench_emu_set_mode.argtypes = [ctypes.c_int]
        lib.lnbench_emu_set_mode.restype = None
        lib.lnbench_emu_launch_count.argtypes = []
        lib.lnbench_emu_launch_count.restype = ctypes.c_uint64
        lib.lnbench_emu_allocations.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                                ctypes.c_int]
        lib.lnbench_emu_allocations.restype = ctypes.c_int
        lib.lnbench_emu_set_launch_callback(_launch_trampoline)
        _lib = lib


def library() -> ctypes.CDLL:
    """The loaded stand-in (loads it first): its hip* functions can be called through ctypes."""
    load()
    assert _lib is not None
    return _lib


# ---------------------------------------------------------------- launches

def set_launch_handler(fn: Callable[[LaunchRequest], None] | None) -> None:
    """Run `fn` for every launch (execute mode); `fn` raising makes the launch fail with HIP error 719."""
    global _handler
    load()
    _handler = fn


def take_launch_error() -> BaseException | None:
    """The first handler exception since the last call (a note counts later failures); cleared on read."""
    global _error, _more_errors
    with _lock:
        err, more = _error, _more_errors
        _error, _more_errors = None, 0
    if err is not None and more:
        err.add_note(f"{more} more launch(es) failed before this error was taken")
    return err


def set_null_mode(on: bool) -> None:
    """Null device: launches are counted and complete at once; the handler is not called."""
    library().lnbench_emu_set_mode(MODE_NULL if on else MODE_EXECUTE)


def launch_count() -> int:
    """Launches that reached the device so far (both modes, failed ones included)."""
    return int(library().lnbench_emu_launch_count())


def allocations() -> list[tuple[int, int]]:
    """The hipMalloc table: (base, size) of each live allocation."""
    lib = library()
    cap = 64
    while True:
        bases, sizes = (ctypes.c_uint64 * cap)(), (ctypes.c_uint64 * cap)()
        n = lib.lnbench_emu_allocations(bases, sizes, cap)
        if n <= cap:
            return [(bases[i], sizes[i]) for i in range(n)]
        cap = n + 64


def _code_object(image: bytes) -> CodeObject:
    """Parsed code object, cached by its bytes."""
    from lnbench.emu.codeobject import read_code_object
    with _lock:
        co = _code_objects.get(image)
        if co is not None:
            _code_objects.move_to_end(image)
            return co
    co = read_code_object(image)
    with _lock:
        _code_objects[image] = co
        while len(_code_objects) > _CODE_OBJECT_CACHE:
            _code_objects.popitem(last=False)
    return co


def _hidden_value(kind: str, grid: tuple[int, int, int], block: tuple[int, int, int], lds: int) -> int:
    """What the HIP runtime writes for a hidden (implicit) kernel argument; 0 for those it leaves unset."""
    axis = "xyz".find(kind[-1]) if kind[-2:-1] == "_" else -1
    if kind.startswith("hidden_block_count_") and axis >= 0:
        return grid[axis]
    if kind.startswith("hidden_group_size_") and axis >= 0:
        return block[axis]
    if kind == "hidden_grid_dims":
        return 3                        # hipModuleLaunchKernel always builds a 3-D range
    if kind == "hidden_dynamic_lds_size":
        return lds
    return 0                            # offsets, remainders (grid counts whole blocks), queue pointers...


def build_kernarg(image: bytes, kernel: str, params: int | None, grid: tuple[int, int, int] = (1, 1, 1),
                  block: tuple[int, int, int] = (1, 1, 1), dynamic_lds: int = 0) -> bytes:
    """The kernarg segment: explicit arg i's `size` bytes from kernelParams[i] at its metadata `offset`;
    hidden_* args get the values the HIP runtime would write (grid, block, dims, dynamic LDS, else 0)."""
    co = _code_object(image)
    if kernel not in co.kernels:
        raise KeyError(f"kernel {kernel!r} is not in the code object (has {sorted(co.kernels)})")
    k = co.kernels[kernel]
    size = int(k.metadata.get(".kernarg_segment_size", k.descriptor.kernarg_size))
    seg = bytearray(size)
    slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p)) if params else None
    i = 0
    for arg in k.args:
        off, n, kind = int(arg[".offset"]), int(arg[".size"]), str(arg.get(".value_kind", ""))
        if kind.startswith("hidden_"):
            seg[off:off + n] = _hidden_value(kind, grid, block, dynamic_lds).to_bytes(8, "little")[:n]
            continue
        src = slots[i] if slots is not None else None
        if not src:
            raise ValueError(f"launch of {kernel}: kernelParams[{i}] is missing")
        seg[off:off + n] = ctypes.string_at(src, n)
        i += 1
    return bytes(seg)


def _launch(image: int, image_size: int, name: bytes, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
            shared: int, stream: int | None, params: int | None) -> None:
    handler = _handler
    if handler is None:
        raise EmulatorUnavailable("a kernel was launched on the emulated device but no launch handler is set")
    code = ctypes.string_at(image, image_size)
    kernel = name.decode()
    grid, block = (gx, gy, gz), (bx, by, bz)
    req = LaunchRequest(code, kernel, grid, block, shared, stream or 0,
                        build_kernarg(code, kernel, params, grid, block, shared))
    handler(req)


@_LAUNCH_CB
def _launch_trampoline(*args):
    """Called from C inside hipModuleLaunchKernel; 0 = done, 1 = failed (exception kept for take_launch_error)."""
    global _error, _more_errors
    try:
        _launch(*args)
        return 0
    except BaseException as exc:  # noqa: BLE001 - nothing may propagate into C
        try:
            with _lock:
                if _error is None:
                    _error = exc
                else:
                    _more_errors += 1
        except BaseException:  # noqa: BLE001
            pass
        return 1
