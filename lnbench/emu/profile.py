"""What one launch executed (LaunchProfile): the scheduler (machine.py) fills it, the instruction handlers and
fast paths add to it, the runtime and the ledger read it. A module of its own so that those modules name the type
without importing the scheduler that imports them."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lnbench.emu.checks import CHECKS
from lnbench.emu.memory import BufferTraffic, Memory
from lnbench.emu.registry import CLASSES


@dataclass
class LaunchProfile:
    """What one launch executed: wave-instructions by class, bytes moved."""

    kernel: str = ""
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    wave_instructions: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CLASSES})
    steps: int = 0
    global_bytes_loaded: int = 0
    global_bytes_stored: int = 0
    lds_bytes: int = 0
    #: LDS clocks of the ds_read/ds_write instructions at 32 banks × 4 bytes, and those beyond one per pass (bank
    #: conflicts); lds_banks.py states the model
    lds_bank_cycles: int = 0
    lds_conflict_cycles: int = 0
    #: what the launch holds per wave and per workgroup (the code object's metadata): the occupancy it allows
    vgprs: int = 0
    agprs: int = 0
    sgprs: int = 0
    lds_alloc: int = 0
    #: per buffer (by the name it was registered under): instruction bytes and distinct bytes touched
    buffers: dict[str, BufferTraffic] = field(default_factory=dict)
    memory: Memory | None = field(default=None, repr=False)
    #: the fidelity ledger's raw facts (see ledger.py): wave-instructions per opcode, the code object's hash,
    #: LDS writes that raced but stored the value already held (benign)
    opcodes: Counter = field(default_factory=Counter)
    code_object_sha256: str = ""
    lds_benign_writes: int = 0
    #: the sanitizer checks this launch ran (lnbench.emu.checks.CHECKS)
    checks: tuple[str, ...] = CHECKS

    @property
    def total_wave_instructions(self) -> int:
        return sum(self.wave_instructions.values())
