"""The semantics table: one handler per opcode (family), registered by name and instruction class.

`len(HANDLERS)` is the set of opcodes the emulator runs; an opcode without a handler is a fault
naming it, never a silent default. Handlers live in ops_scalar, ops_vector, ops_memory,
ops_crosslane and ops_control.
"""
from __future__ import annotations

from typing import Callable

from lnbench.emu.decode import Instr
from lnbench.emu.errors import EmulatorFault

Handler = Callable[..., None]
HANDLERS: dict[str, Handler] = {}
#: opcode -> class for the executed profile
OP_CLASS: dict[str, str] = {}
CLASSES = ("salu", "valu", "vmem_load", "vmem_store", "smem", "lds", "cross_lane", "branch", "sync")


def op(*names: str, cls: str) -> Callable[[Handler], Handler]:
    """Register `fn` as the handler of every opcode in `names`."""
    if cls not in CLASSES:
        raise ValueError(f"unknown instruction class {cls!r}")

    def register(fn: Handler) -> Handler:
        for name in names:
            if name in HANDLERS:
                raise ValueError(f"opcode {name} registered twice")
            HANDLERS[name] = fn
            OP_CLASS[name] = cls
        return fn
    return register


_loaded = False


def _load() -> None:
    global _loaded
    from lnbench.emu import ops_control, ops_crosslane, ops_memory, ops_scalar, ops_vector  # noqa: F401
    _loaded = True


def bind(ins: Instr) -> Handler:
    """The handler for a decoded instruction (a fault naming the opcode when there is none)."""
    if not _loaded:
        _load()
    fn = HANDLERS.get(ins.name)
    if fn is None:
        raise EmulatorFault(f"opcode {ins.name} ({ins.fmt}) at PC 0x{ins.pc:x} has no handler in the emulator",
                            pc=ins.pc, opcode=ins.name)
    return fn


def handlers() -> dict[str, Handler]:
    if not _loaded:
        _load()
    return HANDLERS
