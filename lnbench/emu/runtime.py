"""What lnbench's wrappers call to run kernels on the emulated device.

    runtime.activate("gfx942")          # once: builds/loads the HIP stand-in, installs the launch handler
    with runtime.launch_scope({"x": x, "y": y}) as launches:
        compiled_fn(x.data_ptr(), y.data_ptr(), m, None)   # FlyDSL's real launch path
    # leaving the scope raises EmulatorFault if a launch inside it faulted; `launches` holds a
    # LaunchProfile per launch (what it executed)

    runtime.activate_null("gfx942")     # the null device: the same stand-in completes launches unexecuted

One process has one mode at a time (the stand-in is process-wide): activate() and activate_null() switch.

Tensors named in launch_scope are registered with the memory checker for the duration of the scope:
a kernel touching memory outside every registered buffer (and every hipMalloc allocation) faults. Those
named in `uninitialized` start uninitialized (the wrapper allocated them with torch.empty): initcheck
keeps which of their bytes kernels have written, from the first launch that names them until the tensor
is freed, so a later launch (a reduce kernel reading a workspace) is checked against earlier ones.

Which sanitizer checks run: `set_checks(...)` (lnbench.emu.checks; default all, or $LNBENCH_EMU_CHECKS).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import weakref
from typing import Iterator, Mapping

import numpy as np
import torch

from lnbench.constants import ARCHES
from lnbench.emu import checks as emu_checks
from lnbench.emu.errors import EmulatorFault, EmulatorUnavailable
from lnbench.emu.machine import run_kernel
from lnbench.emu.profile import LaunchProfile
from lnbench.emu.memory import Memory
from lnbench.machine.install import install_hint

_active_arch: str | None = None
_null = False                    # the active arch is the null device's: launches complete unexecuted
_memory = Memory()
_scopes: list[list[LaunchProfile]] = []
_checks: frozenset[str] | None = None          # None: from $LNBENCH_EMU_CHECKS (all when unset)
_written: dict[tuple[int, int], np.ndarray] = {}   # initcheck: written-byte maps of live uninitialized buffers
INSTALL_HINT = install_hint("emu")


def set_checks(checks: frozenset[str] | str) -> frozenset[str]:
    """Run these sanitizer checks from now on ('all', 'none', a comma list or a set); worker processes started
    later inherit the choice ($LNBENCH_EMU_CHECKS). Returns the set."""
    global _checks
    chosen = emu_checks.parse(checks) if isinstance(checks, str) else frozenset(checks)
    _checks = chosen
    os.environ[emu_checks.ENV] = emu_checks.canonical(chosen)
    return chosen


def active_checks() -> frozenset[str]:
    """The sanitizer checks emulated launches run now."""
    return _checks if _checks is not None else emu_checks.from_env()


def availability() -> tuple[bool, str]:
    """(True, "") when the emulated device can be used in this process, else (False, what to do)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False, f"the emulated device needs Linux x86_64 (this is {platform.system()} {platform.machine()})"
    if torch.version.hip is not None:
        return False, "torch is a ROCm build: its HIP runtime is loaded, so use the ROCm GPU instead of the emulator"
    missing = [name for name in ("ziglang", "tinygrad", "msgpack", "flydsl") if importlib.util.find_spec(name) is None]
    if missing:
        return False, f"the emulated device needs {', '.join(missing)}: {INSTALL_HINT}"
    return True, ""


def describe() -> str:
    """One line for `lnbench env`."""
    ok, why = availability()
    if not ok:
        return f"unavailable ({why})"
    return (f"available: {', '.join('emu:' + a for a in ARCHES)} (FlyDSL's launch path on a stand-in "
            f"HIP library + a wave64 ISA emulator of the code object; executes, does not time)")


def activate(arch: str) -> None:
    """Make `arch` the emulated device's arch (loads the stand-in HIP library on first use; execute mode)."""
    _activate(arch, null=False)


def activate_null(arch: str) -> None:
    """Make this process's device the null device for `arch`: FlyDSL's launch path runs against the stand-in,
    whose launches complete at once without executing (hip null mode). Loads the stand-in on first use."""
    _activate(arch, null=True)


def _activate(arch: str, null: bool) -> None:
    global _active_arch, _null
    if arch not in ARCHES:
        raise EmulatorUnavailable(f"no emulated device for {arch!r}; supported: {', '.join(ARCHES)}")
    ok, why = availability()
    if not ok:
        raise EmulatorUnavailable(why)
    from lnbench.emu import heap, hip
    hip.load()
    if not null:
        heap.keep_freed_memory()
    hip.set_launch_handler(_handle_launch)
    hip.set_null_mode(null)
    _active_arch, _null = arch, null


def deactivate() -> None:
    """No emulated or null device in this process any more (the stand-in stays loaded, in execute mode)."""
    global _active_arch, _null
    if _active_arch is not None:
        from lnbench.emu import hip
        hip.set_null_mode(False)
    _active_arch, _null = None, False


def current_arch() -> str | None:
    """The active emulated arch, or None when no emulated device is active in this process."""
    return None if _null else _active_arch


def null_arch() -> str | None:
    """The active null device's arch, or None when the null device is not active in this process."""
    return _active_arch if _null else None


def memory() -> Memory:
    return _memory


def track_lifetimes(buffers: Mapping[str, torch.Tensor]) -> None:
    """Remember these tensors' memory by name until they are freed; then the memory checker knows it.

    A raw pointer carries no lifetime: when a Pointer-ABI launch is prepared, its tensors are noted
    here, and if one is garbage-collected before the launch runs, an access to its old memory is a
    fault naming the freed buffer instead of an anonymous wild address.
    """
    for name, t in buffers.items():
        if t is None or t.numel() == 0 or t.device.type != "cpu":
            continue
        base, size = t.data_ptr(), _extent_bytes(t)
        weakref.finalize(t, _mark_freed, base, size, name)


def _mark_freed(base: int, size: int, name: str) -> None:
    from lnbench.emu.memory import Region
    _memory.freed.append(Region(base, size, name, np.zeros(0, np.uint8)))
    del _memory.freed[:-256]                      # keep the most recent ones


def _extent_bytes(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return span * t.element_size()


def _handle_launch(req) -> None:
    """The HIP stand-in's launch callback: execute the code object (raises EmulatorFault)."""
    from lnbench.emu import hip
    kernarg = np.frombuffer(bytearray(req.kernarg.ljust(max(len(req.kernarg), 8), b"\0")), np.uint8)
    regions = [_memory.add(kernarg.ctypes.data, kernarg.size, "kernarg segment", kernarg)]
    known = {(r.base, r.size) for r in _memory.regions}
    for base, size in hip.allocations():
        if (base, size) not in known:
            regions.append(_memory.add(base, size, f"hipMalloc@0x{base:x}"))
    try:
        profile = run_kernel(req.code_object, req.kernel, req.grid, req.block, req.dynamic_lds,
                             kernarg.ctypes.data, _memory, checks=active_checks())
    finally:
        for r in regions:
            _memory.remove(r)
    profile.memory = None
    for launches in _scopes:               # nested scopes each see the launch
        launches.append(profile)


def _written_map(t: torch.Tensor, size: int) -> np.ndarray:
    """The initcheck written-byte map of an uninitialized buffer: one per (address, size) while the tensor lives."""
    key = (t.data_ptr(), size)
    written = _written.get(key)
    if written is None:
        written = _written[key] = np.zeros(size, bool)
        weakref.finalize(t, _written.pop, key, None)
    return written


@contextlib.contextmanager
def recording() -> Iterator[list[LaunchProfile]]:
    """Collect the profile of every launch inside (for the fidelity ledger); registers no buffer and raises no
    fault of its own (launch_scope does both)."""
    launches: list[LaunchProfile] = []
    _scopes.append(launches)
    try:
        yield launches
    finally:
        _scopes.remove(launches)


@contextlib.contextmanager
def launch_scope(buffers: Mapping[str, torch.Tensor], uninitialized: tuple[str, ...] | frozenset[str] = ()
                 ) -> Iterator[list[LaunchProfile]]:
    """Register `buffers` with the memory checker while FlyDSL launches inside run; raise a fault after.

    `uninitialized`: names among `buffers` whose contents start uninitialized (initcheck)."""
    from lnbench.emu import hip
    if current_arch() is None:
        raise EmulatorUnavailable("no emulated device is active (runtime.activate(arch) first; the null device "
                                  "executes nothing)")
    unknown = sorted(set(uninitialized) - set(buffers))
    if unknown:
        raise ValueError(f"launch_scope: uninitialized buffer(s) {unknown} are not among the buffers")
    hip.take_launch_error()                        # nothing stale from an earlier launch
    regions = []
    for name, t in buffers.items():
        if t is not None and t.numel() > 0:
            region = _memory.add(t.data_ptr(), _extent_bytes(t), name)
            if name in uninitialized:
                region.written = _written_map(t, region.size)
            regions.append(region)
    launches: list[LaunchProfile] = []
    _scopes.append(launches)
    try:
        yield launches
    finally:
        _scopes.pop()
        for r in regions:
            _memory.remove(r)
    err = hip.take_launch_error()
    if err is not None:
        if not isinstance(err, Exception):     # Ctrl-C, SIGTERM inside a launch: a stop, never a kernel fault
            raise err
        if isinstance(err, EmulatorFault):
            raise err
        raise EmulatorFault(f"{type(err).__name__}: {err}") from err
