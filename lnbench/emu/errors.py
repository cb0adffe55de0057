"""Errors of the emulated device."""
from __future__ import annotations


class EmulatorUnavailable(RuntimeError):
    """The emulated device cannot be set up here (a package is missing, or a real HIP runtime is loaded)."""


class EmulatorFault(RuntimeError):
    """A kernel faulted inside the emulator: bad memory access, unknown opcode, ...; names kernel, PC, opcode."""

    def __init__(self, message: str, *, kernel: str = "", pc: int | None = None, opcode: str = "") -> None:
        super().__init__(message)
        self.kernel, self.pc, self.opcode = kernel, pc, opcode
