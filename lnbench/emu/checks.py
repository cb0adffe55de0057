"""Which sanitizer checks an emulated launch runs (`--emu-checks`), and how a run says which were on.

    memory     every global/buffer/SMEM/atomic access falls inside a buffer the launch owns (memory.py);
               off: an access outside every buffer reads 0 and writes nothing
    lds        LDS race checker: no dword is touched by two waves of a workgroup without an s_barrier between
    waitcnt    wait-count hazards: no register is used before the s_waitcnt that covers the load writing it
               (hazards.py)
    initcheck  no read of output/workspace bytes no launch has written yet, nor of LDS bytes the workgroup has
               not written
    race       no global bytes written by one workgroup and read or written by another in the same launch
               without atomics

The choice is process-wide and travels to worker processes in $LNBENCH_EMU_CHECKS.
"""
from __future__ import annotations

import os

CHECKS: tuple[str, ...] = ("memory", "lds", "waitcnt", "initcheck", "race")
ENV = "LNBENCH_EMU_CHECKS"


class ChecksError(ValueError):
    """An --emu-checks value naming no known checker."""


def parse(text: str) -> frozenset[str]:
    """'all', 'none' or a comma list of CHECKS -> the set of checks on."""
    words = [w.strip().lower() for w in str(text).split(",") if w.strip()]
    if not words:
        raise ChecksError(f"--emu-checks is empty; give all, none or a comma list of {', '.join(CHECKS)}")
    if words == ["all"]:
        return frozenset(CHECKS)
    if words == ["none"]:
        return frozenset()
    unknown = [w for w in words if w not in CHECKS]
    if unknown:
        raise ChecksError(f"unknown emulator check {unknown[0]!r}; choose all, none or from {', '.join(CHECKS)}")
    return frozenset(words)


def canonical(checks: frozenset[str]) -> str:
    """The checks on, in CHECKS order, comma-separated ('none' when none)."""
    return ",".join(c for c in CHECKS if c in checks) or "none"


def describe(checks: frozenset[str]) -> str:
    """One line for a run: which checkers were on and which off."""
    on = [c for c in CHECKS if c in checks]
    off = [c for c in CHECKS if c not in checks]
    return f"emulator checks on: {', '.join(on) or 'none'}" + (f" (off: {', '.join(off)})" if off else "")


def from_env() -> frozenset[str]:
    """The checks $LNBENCH_EMU_CHECKS asks for: all when unset or empty; ChecksError on a bad value."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return frozenset(CHECKS)
    return parse(value)
