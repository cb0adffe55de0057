"""lnbench's own kernels without FlyDSL's trace, when an earlier process traced the same ones.

FlyDSL traces a `@flyc.jit` launcher on every compile, also when its disk cache holds the compiled kernel: the traced
IR is that cache's key. For lnbench's own launchers (lnbench.flydsl.launch: forward, backward, reduce) everything a
trace reads is known before it runs: lnbench's sources, FlyDSL itself (its own key of its sources, native libraries
and toolkit), the compile environment, the launcher's build key and the compile arguments' types, shapes and
alignments. `lookup` hashes those into a trace key; an index file under lnbench's cache
(`<lnbench cache>/flydsl-traces/<key>.json`) names the FlyDSL disk-cache entry the trace with that key produced, and
the compiled function is built from that entry as flyc.compile builds it after its trace: the same artifact, the same
call ABI, FlyDSL's own launch path (CompiledFunction -> execution engine -> hipModuleLaunchKernel). Any miss — no
index, the entry gone from FlyDSL's cache, a compile that would execute (live device buffers), an artifact FlyDSL
keeps in-process only, FlyDSL internals that moved — takes the traced way, after which `remember` writes the index.

Kernel sources users pass (`--kernel-src`) always trace: what they import is theirs.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lnbench.machine.cache_dirs import lnbench_cache_dir, write_cache_file
from lnbench.machine.checkout import content_hash

#: the index's layout; a change makes every old entry a miss
SCHEMA = 1
#: environment variables a trace of lnbench's kernels may read besides FlyDSL's own (rowio reads ARCH)
_TRACE_ENV = ("ARCH", "ROCM_PATH", "COMPILE_ONLY")


def index_dir() -> Path:
    return lnbench_cache_dir() / "flydsl-traces"


@functools.lru_cache(maxsize=1)
def sources_digest() -> str:
    """lnbench's package: its path (traced IR carries source locations) and every module's bytes."""
    package = Path(__file__).resolve().parent.parent
    return f"{package} {content_hash(package)}"


def _signature(value: Any) -> Any:
    """What a trace specializes on of one resolved argument: FlyDSL's cache signature of a runtime argument (dtype,
    layout, assumed alignment; never a live address), the value itself of a constant."""
    from flydsl.compiler.protocol import cache_signature

    try:
        return cache_signature(value)
    except TypeError:
        return [type(value).__qualname__, repr(value)]


def _bind(jf: Any, args: tuple) -> Any:
    """`args` bound to the jitted function's signature, defaults applied, runtime values resolved to FlyDSL's
    argument objects (as its compile does before a trace)."""
    jf._ensure_sig()
    bound = jf._sig.bind(*args)
    bound.apply_defaults()
    jf._resolve_arguments(bound.arguments)
    return bound


def trace_key(launcher: Any, identity: tuple, args: tuple) -> str | None:
    """The hash of everything a trace of `launcher` on `args` reads (None: FlyDSL's internals are not the ones
    this was written against)."""
    try:
        from flydsl.compiler import jit_function as jfm
        from flydsl.compiler.backends import get_backend

        jf, _ = jfm._unwrap_jit_function(launcher)
        if jf is None:
            return None
        bound = _bind(jf, args)
        backend = get_backend()
        target = backend.target
        parts = {
            "schema": SCHEMA,
            "lnbench": sources_digest(),
            "flydsl": jfm._flydsl_key(),
            "backend": [backend.hash(), target.backend, target.arch, target.warp_size],
            "flydsl_env": jfm._cache_invalidating_env_values(target),
            "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("FLYDSL_") or k in _TRACE_ENV),
            "hints": jf._effective_compile_hints(),
            "launcher": [jf.func.__module__, jf.func.__qualname__],
            "identity": identity,
            "args": [[name, _signature(value)] for name, value in bound.arguments.items()],
        }
    except (AttributeError, ImportError, TypeError):
        return None
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


def _index_file(key: str) -> Path:
    return index_dir() / f"{key[:40]}.json"


def _load(launcher: Any, args: tuple, disk_key: str) -> Any:
    """FlyDSL's compiled function for `args` from its disk-cache entry `disk_key`, as flyc.compile makes it after a
    trace (jit_function.JitFunction._compile_or_execute with placeholders); None where that cannot be done."""
    from flydsl.compiler import jit_function as jfm
    from flydsl.compiler.backends import get_backend
    from flydsl.utils import env

    jf, bound_self = jfm._unwrap_jit_function(launcher)
    if jf is None or bound_self is not None or env.compile.compile_only:
        return None
    jf._ensure_sig()
    if jf._has_self_param:
        return None
    backend = get_backend()
    jf._backend_target = backend.target
    jf._ensure_cache_manager()
    manager = jf.cache_manager
    if manager is None:
        return None
    bound = _bind(jf, args)
    values = tuple(bound.arguments.values())
    live = any(jfm._has_live_device_argument(v) for v in values)
    if not any(jfm._is_compile_placeholder(v, allow_null_pointers=live) for v in values):
        return None                     # flyc.compile would launch once: that needs the traced way
    artifact = manager.get(disk_key)
    if artifact is None or getattr(artifact, "_ktrace_traced", False) or getattr(artifact, "post_load_processors", None):
        return None
    compiled = jfm.CompiledFunction(None, artifact)
    compiled._call_spec = jfm._build_call_spec(jf._sig, values)
    compiled._backend = backend.target.backend
    compiled._aot_spec, compiled._aot_error = jfm._prepare_aot_signature(jf, bound, artifact)
    return compiled


def _remember(launcher: Any, key: str) -> None:
    """Name the FlyDSL disk-cache entry of the launcher's last compile under `key` (written whole, then renamed)."""
    from flydsl.compiler import jit_function as jfm

    jf, _ = jfm._unwrap_jit_function(launcher)
    last = getattr(jf, "_last_compiled", None)
    manager = getattr(jf, "cache_manager", None)
    if not last or manager is None:
        return
    disk_key = jfm._disk_cache_key(last[0])
    if not manager._cache_file(disk_key).exists():        # in-process only (FlyDSL kept it off the disk)
        return
    # an index that cannot be written only costs the next run a trace
    write_cache_file(_index_file(key), json.dumps({"disk_key": disk_key, "launcher": jf.func.__name__}).encode())


def lookup(launcher: Any, identity: tuple, args: tuple) -> tuple[str | None, Any]:
    """(the trace key of `launcher` on `args`, FlyDSL's compiled function loaded without a trace or None where no
    earlier process traced that key). Call under the compile environment: FlyDSL's key reads it. `identity` names
    the launcher's build (lnbench.flydsl.launch's cache key and row plan)."""
    key = trace_key(launcher, identity, args)
    if key is None:
        return None, None
    try:
        entry = json.loads(_index_file(key).read_text())
        return key, _load(launcher, args, str(entry["disk_key"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return key, None


def remember(launcher: Any, key: str) -> None:
    """After flyc.compile traced `launcher` (under the same compile environment): index its artifact under `key`."""
    try:
        _remember(launcher, key)
    except (AttributeError, TypeError):
        pass
