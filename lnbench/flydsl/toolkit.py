"""Locate (or set up) the toolkit FlyDSL links with, and the environment a compile needs.

FlyDSL runs `$ROCM_PATH/llvm/bin/ld.lld` (LLD >= 17: it emits code object v6). A real ROCm install
is used when present; otherwise a folder under the user cache dir gets an `ld.lld` wrapper around
the `ziglang` package's bundled LLD (the pip-only route), plus Debian's AMDGPU bitcode if installed.
"""
from __future__ import annotations

import functools
import importlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lnbench.machine.cache_dirs import lnbench_cache_dir, usable_home_folder
from lnbench.machine.install import install_hint
from lnbench.machine.rocm import has_rocm_gpu  # the one project-wide check, re-exported here
from lnbench.machine.zig import zig_binary

DEBIAN_BITCODE = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")


@dataclass(frozen=True)
class ToolkitInfo:
    """What `lnbench env` reports about the linker toolkit."""

    kind: str                 # "rocm" | "ziglang" | "missing"
    root: Path | None
    ld_lld: Path | None
    lld_version: str
    bitcode: bool
    note: str = ""


def _lld_version(ld: Path) -> str:
    try:
        out = subprocess.run([str(ld), "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def _rocm_root() -> Path | None:
    for cand in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if cand and (Path(cand) / "llvm" / "bin" / "ld.lld").exists():
            return Path(cand)
    return None


def cache_toolkit_dir() -> Path:
    """The pip-only toolkit folder (env LNBENCH_TOOLKIT_DIR overrides; else lnbench's cache folder)."""
    override = os.environ.get("LNBENCH_TOOLKIT_DIR")
    if override:
        return Path(override)
    return lnbench_cache_dir() / "toolkit"


def ensure_ziglang_toolkit(root: Path | None = None) -> Path | None:
    """Create (idempotently) the ziglang-backed toolkit folder; None when ziglang is missing."""
    zig = zig_binary()
    if zig is None:
        return None
    root = root or cache_toolkit_dir()
    ld = root / "llvm" / "bin" / "ld.lld"
    script = f'#!/bin/sh\nexec "{zig}" ld.lld "$@"\n'
    if not ld.exists() or ld.read_text() != script:
        ld.parent.mkdir(parents=True, exist_ok=True)
        tmp = ld.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(script)
        tmp.chmod(0o755)
        os.replace(tmp, ld)            # atomic: parallel test workers may race here
    bitcode = root / "amdgcn" / "bitcode"
    if DEBIAN_BITCODE.is_dir() and not bitcode.exists():
        bitcode.parent.mkdir(parents=True, exist_ok=True)
        try:
            bitcode.symlink_to(DEBIAN_BITCODE)
        except FileExistsError:
            pass
    return root


@functools.lru_cache(maxsize=1)
def toolkit_info() -> ToolkitInfo:
    """Find the toolkit: ROCm install first, else the pip-only ziglang route (set up on demand)."""
    root = _rocm_root()
    if root is not None:
        ld = root / "llvm" / "bin" / "ld.lld"
        return ToolkitInfo("rocm", root, ld, _lld_version(ld), (root / "amdgcn" / "bitcode").is_dir())
    root = ensure_ziglang_toolkit()
    if root is not None:
        ld = root / "llvm" / "bin" / "ld.lld"
        return ToolkitInfo("ziglang", root, ld, _lld_version(ld), (root / "amdgcn" / "bitcode").is_dir())
    return ToolkitInfo("missing", None, None, "", False,
                       note=f"no ROCm install and no `ziglang` package: {install_hint('compile')}")


def compile_env(arch: str | None = None, *, compile_only: bool | None = None) -> dict[str, str]:
    """The environment variables a FlyDSL compile needs (not applied; see apply_compile_env)."""
    info = toolkit_info()
    env: dict[str, str] = {}
    if info.root is not None:
        env["ROCM_PATH"] = str(info.root)
    if compile_only is None:
        compile_only = not has_rocm_gpu()
    if compile_only:
        env["COMPILE_ONLY"] = "1"
    if arch:
        env["ARCH"] = arch
        env["FLYDSL_GPU_ARCH"] = arch
    if not os.environ.get(FLYDSL_CACHE_VAR) and not _flydsl_default_cache_usable():
        env[FLYDSL_CACHE_VAR] = str(lnbench_cache_dir() / "flydsl")     # FlyDSL's default is ~/.flydsl/cache
    return env


#: FlyDSL's compiled-kernel cache folder (default ~/.flydsl/cache)
FLYDSL_CACHE_VAR = "FLYDSL_RUNTIME_CACHE_DIR"


def _flydsl_default_cache_usable() -> bool:
    return usable_home_folder(".flydsl", "cache")


def apply_compile_env(arch: str | None = None, *, compile_only: bool | None = None) -> dict[str, str | None]:
    """Put compile_env() into os.environ; return the previous values for restore_env()."""
    new = compile_env(arch, compile_only=compile_only)
    if not compile_only and "COMPILE_ONLY" not in new and compile_only is not None:
        new["COMPILE_ONLY"] = "0"
    old = {k: os.environ.get(k) for k in new}
    os.environ.update(new)
    return old


def restore_env(old: dict[str, str | None]) -> None:
    for key, val in old.items():
        if val is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = val


def flydsl_importable() -> bool:
    try:
        importlib.import_module("flydsl")
    except Exception:  # noqa: BLE001 - any import failure means "cannot compile"
        return False
    return True


def describe() -> str:
    """One line for `lnbench env`."""
    info = toolkit_info()
    if info.kind == "missing":
        return f"toolkit: missing ({info.note})"
    bc = "with AMDGPU bitcode" if info.bitcode else "no AMDGPU bitcode"
    return f"toolkit: {info.kind} at {info.root} ({info.lld_version}; {bc})"

