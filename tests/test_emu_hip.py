"""The stand-in HIP library (lnbench/emu/hip.py + hip_stub.c).

Everything that loads the stub runs in a child process: the stub must be loaded before flydsl loads
its runtime, and other tests in this process may import and compile FlyDSL without it.
"""
from __future__ import annotations

import json
import os
import platform
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lnbench.emu import hip
from lnbench.emu.errors import EmulatorUnavailable
from lnbench.flydsl import geometry
from lnbench.flydsl.toolkit import flydsl_importable
from lnbench.machine.zig import zig_binary

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64", reason="Linux x86_64 only"),
    pytest.mark.skipif(zig_binary() is None, reason="needs ziglang (pip install ziglang)"),
]


def _real_hip() -> bool:
    import torch
    return getattr(torch.version, "hip", None) is not None


needs_stub = pytest.mark.skipif(_real_hip(), reason="a ROCm torch: the stub never loads next to real HIP")
needs_flydsl = pytest.mark.skipif(not flydsl_importable(), reason="flydsl not importable")


def run_snippet(code: str, timeout: float = 120) -> str:
    """Run `code` in a fresh Python and return its stdout (fails the test on a non-zero exit)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, f"child exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- FlyDSL's real launch path

E2E = r"""
import ctypes, json, os, struct
from lnbench.emu import hip
hip.load()                                   # before flydsl loads its runtime
from lnbench.flydsl import geometry, launch, toolkit
env = toolkit.compile_env("gfx942", compile_only=False)
env.pop("COMPILE_ONLY", None)
os.environ.update(env)
import torch
import flydsl.compiler as flyc

seen = []
fail = [False]
def handler(req):
    seen.append(req)
    if fail[0]:
        raise ValueError("handler boom")
hip.set_launch_handler(handler)

M, N = 64, 4096
plan = geometry.row_plan(N, "bf16", "fwd")
x = torch.randn(M, N, dtype=torch.bfloat16)
w, b = torch.randn(N, dtype=torch.bfloat16), torch.randn(N, dtype=torch.bfloat16)
y, mean, rstd = torch.empty_like(x), torch.empty(M), torch.empty(M)
ts = [x, w, b, y, mean, rstd]
ptrs = [t.data_ptr() for t in ts]
fn_p = flyc.compile(launch.build_fwd_launcher(plan, 1e-5, True, "pointer"),
                    *launch.fwd_compile_args(plan, True, "pointer"))
fn_t = flyc.compile(launch.build_fwd_launcher(plan, 1e-5, True, "tensor"),
                    *launch.fwd_compile_args(plan, True, "tensor", ts))
out = {"count_after_compile": hip.launch_count()}

def describe(req):
    from lnbench.emu.codeobject import read_code_object
    k = read_code_object(req.code_object).kernels[req.kernel]
    ptr_args = [a[".offset"] for a in k.args if a[".value_kind"] == "global_buffer"]
    return {"kernel": req.kernel, "grid": req.grid, "block": req.block, "lds": req.dynamic_lds,
            "stream": req.stream, "kernarg": req.kernarg.hex(), "kernarg_size": k.metadata[".kernarg_segment_size"],
            "ptr_offsets": ptr_args, "elf": req.code_object[:4].hex()}

fn_p(*ptrs, M, None)
out["pointer"] = describe(seen[-1])
fn_t(*ts, M, None)
out["tensor"] = describe(seen[-1])
out["ptrs"], out["M"] = ptrs, M
out["error_after_ok"] = repr(hip.take_launch_error())

hip.set_null_mode(True)
before, n_seen = hip.launch_count(), len(seen)
for _ in range(3):
    fn_p(*ptrs, M, None)
out["null"] = {"counted": hip.launch_count() - before, "handler_calls": len(seen) - n_seen}
hip.set_null_mode(False)

fail[0] = True
fn_p(*ptrs, M, None)
err = hip.take_launch_error()
out["raised"] = {"type": type(err).__name__, "msg": str(err), "again": repr(hip.take_launch_error())}
fn_p(*ptrs, M, None)
fn_p(*ptrs, M, None)
err = hip.take_launch_error()
out["raised_twice_notes"] = getattr(err, "__notes__", [])
fail[0] = False
fn_p(*ptrs, M, None)
out["recovered"] = repr(hip.take_launch_error())
out["code_object"] = seen[-1].code_object.hex()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def e2e() -> dict:
    return last_json(run_snippet(E2E))


def _launch_request(e2e: dict, abi: str) -> tuple[dict, bytes]:
    """The launch the HIP stand-in received for the bf16 N=4096 forward of `abi` (its kernel and geometry checked)
    and its kernarg segment."""
    req = e2e[abi]
    assert req["kernel"] == f"ln_fwd_bf16_n4096_{abi}"
    plan = geometry.row_plan(4096, "bf16")                # 64 threads a row now: 1 row, 1 wave per block
    assert req["grid"] == [plan.grid(e2e["M"]), 1, 1] and req["block"] == [plan.block, 1, 1]
    return req, bytes.fromhex(req["kernarg"])


@needs_stub
@needs_flydsl
def test_pointer_abi_kernarg(e2e):
    req, seg = _launch_request(e2e, "pointer")
    assert req["lds"] == 0 and req["stream"] == 0 and req["elf"] == "7f454c46"
    assert len(seg) == req["kernarg_size"] == 6 * 8 + 4
    assert list(struct.unpack("<6Q", seg[:48])) == e2e["ptrs"]
    assert int.from_bytes(seg[-4:], "little") == e2e["M"]
    assert e2e["count_after_compile"] == 0          # compiling launches nothing
    assert e2e["error_after_ok"] == "None"


@needs_stub
@needs_flydsl
def test_tensor_abi_kernarg(e2e):
    req, seg = _launch_request(e2e, "tensor")
    assert len(seg) == req["kernarg_size"]
    got = [int.from_bytes(seg[o:o + 8], "little") for o in req["ptr_offsets"]]
    assert got == e2e["ptrs"]
    assert int.from_bytes(seg[-4:], "little") == e2e["M"]


@needs_stub
@needs_flydsl
def test_null_mode_counts_without_handler(e2e):
    assert e2e["null"] == {"counted": 3, "handler_calls": 0}


@needs_stub
@needs_flydsl
def test_handler_exception_is_kept_and_process_survives(e2e):
    assert e2e["raised"] == {"type": "ValueError", "msg": "handler boom", "again": "None"}
    assert any("1 more launch" in note for note in e2e["raised_twice_notes"])
    assert e2e["recovered"] == "None"


# ---------------------------------------------------------------- the C library through ctypes

CAPI = r"""
import ctypes, json, sys
from lnbench.emu import hip
hip.load()
hip.load()                                              # idempotent
lib = hip.library()
image = bytes.fromhex(sys.stdin.read().strip()) if not sys.stdin.isatty() else b""
v = ctypes.c_void_p
out = {}
p1, p2 = v(), v()
out["malloc"] = [lib.hipMalloc(ctypes.byref(p1), ctypes.c_size_t(1000)), lib.hipMalloc(ctypes.byref(p2), ctypes.c_size_t(64))]
out["aligned"] = p1.value % 256 == 0 and p2.value % 256 == 0
out["table"] = sorted(hip.allocations()) == sorted([(p1.value, 1000), (p2.value, 64)])
lib.hipMemset(p1, 7, ctypes.c_size_t(1000))
lib.hipMemsetD32Async.argtypes = [v, ctypes.c_int, ctypes.c_size_t, v]
lib.hipMemsetD32Async(p2, 0x01020304, 4, None)
out["memset"] = [ctypes.string_at(p1, 3).hex(), ctypes.string_at(p2, 8).hex()]
lib.hipMemcpy.argtypes = [v, v, ctypes.c_size_t, ctypes.c_int]
lib.hipMemcpy(p1, p2, 8, 1)
out["memcpy"] = ctypes.string_at(p1, 9).hex()
out["free"] = [lib.hipFree(p1), lib.hipFree(p1), lib.hipGetLastError(), lib.hipGetLastError()]
out["table_after"] = hip.allocations() == [(p2.value, 64)]
lib.hipFree(p2)
dev = ctypes.c_int(5)
out["device"] = [lib.hipGetDevice(ctypes.byref(dev)), dev.value, lib.hipSetDevice(0), lib.hipSetDevice(1)]
lib.hipGetErrorName.restype = ctypes.c_char_p
out["names"] = [lib.hipGetErrorName(c).decode() for c in (0, 400, 719, 12345)]
s, e = v(), v()
out["stream"] = [lib.hipStreamCreate(ctypes.byref(s)), lib.hipEventCreateWithFlags(ctypes.byref(e), 0),
                 lib.hipEventRecord(e, s), lib.hipStreamWaitEvent(s, e, 0), lib.hipStreamSynchronize(s),
                 lib.hipEventSynchronize(e), lib.hipStreamSynchronize(None), lib.hipDeviceSynchronize()]
seq, ns = ctypes.c_uint64(), ctypes.c_uint64()
out["event_info"] = [lib.lnbench_emu_event_info(e, ctypes.byref(seq), ctypes.byref(ns)), seq.value, ns.value > 0]
out["bad_handles"] = [lib.hipEventRecord(v(0), None), lib.hipStreamDestroy(v(0)), lib.hipEventDestroy(s)]
out["destroy"] = [lib.hipEventDestroy(e), lib.hipStreamDestroy(s)]
if image:
    mod, fn = v(), v()
    buf = ctypes.create_string_buffer(image + b"\xcc" * 64)   # trailing junk: the size comes from the ELF
    out["module"] = [lib.hipModuleLoadData(ctypes.byref(mod), buf),
                     lib.hipModuleGetFunction(ctypes.byref(fn), mod, b"ln_fwd_bf16_n4096_pointer")]
    blocks = ctypes.c_int()
    lib.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [v, v, ctypes.c_int, ctypes.c_size_t]
    lib.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), fn, 256, 0)
    out["occupancy"] = blocks.value
    seen = []
    hip.set_launch_handler(seen.append)
    vals = [ctypes.c_uint64(0x1000 * (i + 1)) for i in range(6)] + [ctypes.c_int32(77)]
    params = (v * 7)(*[ctypes.cast(ctypes.byref(x), v) for x in vals])
    launch = lambda: lib.hipModuleLaunchKernel(fn, 2, 1, 1, 256, 1, 1, 0, None, params, None)
    rc_ok = launch()
    req = seen[-1]
    out["launch"] = [rc_ok, len(req.code_object) == len(image), req.code_object == image, req.kernarg.hex()]
    hip.set_launch_handler(None)
    out["no_handler"] = [launch(), lib.hipGetLastError(), type(hip.take_launch_error()).__name__]
    lib.lnbench_emu_set_launch_callback(hip._LAUNCH_CB())      # a null callback: an error, not a crash
    out["no_callback"] = [launch(), lib.hipGetLastError()]
    out["unload"] = [lib.hipModuleUnload(mod), lib.hipModuleUnload(v(0))]
print(json.dumps(out))
"""


@needs_stub
@needs_flydsl
def test_c_library_through_ctypes(e2e):
    proc = subprocess.run([sys.executable, "-c", CAPI], input=e2e["code_object"], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc.stdout)
    assert out["malloc"] == [0, 0] and out["aligned"] and out["table"]
    assert out["memset"] == ["070707", "0403020104030201"]
    assert out["memcpy"] == "040302010403020107"
    assert out["free"] == [0, 1, 1, 0]                  # freeing an unknown pointer fails; last error clears
    assert out["table_after"]
    assert out["device"] == [0, 0, 0, 101]
    assert out["names"] == ["hipSuccess", "hipErrorInvalidHandle", "hipErrorLaunchFailure", "hipErrorUnknown"]
    assert out["stream"] == [0] * 8
    assert out["event_info"][0] == 0 and out["event_info"][1] >= 1 and out["event_info"][2]
    assert out["bad_handles"] == [400, 400, 400]
    assert out["destroy"] == [0, 0]
    assert out["module"] == [0, 0] and out["occupancy"] == 8
    rc, same_size, same_bytes, kernarg = out["launch"]
    assert rc == 0 and same_size and same_bytes
    seg = bytes.fromhex(kernarg)
    assert struct.unpack("<6Qi", seg) == (0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 77)
    assert out["no_handler"] == [719, 719, "EmulatorUnavailable"]
    assert out["no_callback"] == [719, 719]
    assert out["unload"] == [0, 400]


# ---------------------------------------------------------------- build and load, in this process

def test_build_reuses_cache(tmp_path, monkeypatch):
    # A real build into an empty folder. zig's own compile cache (its libc and runtime, not lnbench's output) is the
    # one the suite's emulator build fills (built here first where it is not yet), so this build compiles hip_stub.c
    # without compiling zig's runtime again.
    try:
        hip.library_path()
        monkeypatch.setenv("ZIG_GLOBAL_CACHE_DIR",
                           os.environ.get("ZIG_GLOBAL_CACHE_DIR") or str(hip.emu_dir() / "zig-cache"))
    except EmulatorUnavailable:
        pass                            # no usable emulator folder: the build below fills a zig cache of its own
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(tmp_path))
    first = hip.library_path()
    assert first.name == "libamdhip64.so.7" and first.parent.parent == tmp_path
    assert [p.name for p in first.parent.iterdir()] == ["libamdhip64.so.7"]   # no temp files left behind
    if _has("readelf"):
        dyn = subprocess.check_output(["readelf", "-dW", str(first)], text=True)
        assert "Library soname: [libamdhip64.so.7]" in dyn
    stat = first.stat()
    monkeypatch.setattr("lnbench.emu.hip.zig_binary", lambda: None)   # a rebuild would raise
    again = hip.library_path()
    assert again == first and again.stat().st_ino == stat.st_ino and again.stat().st_mtime_ns == stat.st_mtime_ns


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.delenv("LNBENCH_EMU_DIR", raising=False)
    monkeypatch.setenv("LNBENCH_TOOLKIT_DIR", str(tmp_path / "toolkit"))
    assert hip.emu_dir() == tmp_path / "emu"
    monkeypatch.delenv("LNBENCH_TOOLKIT_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hip.emu_dir() == tmp_path / "xdg" / "lnbench" / "emu"


def test_missing_zig_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(tmp_path))
    monkeypatch.setattr("lnbench.emu.hip.zig_binary", lambda: None)
    with pytest.raises(EmulatorUnavailable, match="pip install ziglang"):
        hip.library_path()


@needs_stub
def test_load_refuses_after_flydsl_runtime(monkeypatch):
    monkeypatch.setattr(hip, "_lib", None)
    monkeypatch.setattr(hip, "_mapped_libraries", lambda: {"/x/flydsl/_mlir/_mlir_libs/libfly_jit_runtime.so"})
    with pytest.raises(EmulatorUnavailable, match="before the emulated device"):
        hip.load()
    monkeypatch.setattr(hip, "_mapped_libraries", lambda: {"/opt/rocm/lib/libamdhip64.so.7"})
    with pytest.raises(EmulatorUnavailable, match="HIP runtime is already loaded"):
        hip.load()
    assert hip._lib is None


def _has(tool: str) -> bool:
    from shutil import which
    return which(tool) is not None
