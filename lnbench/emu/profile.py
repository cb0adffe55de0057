"""What one launch executed (LaunchProfile): the scheduler (machine.py) fills it, the instruction handlers and
fast paths add to it, the runtime and the ledger read it. A module of its own so that those modules name the type
without importing the scheduler that imports them."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from lnbench.emu.checks import CHECKS
from lnbench.emu.registry import CLASSES

if TYPE_CHECKING:
    from lnbench.emu.memory import BufferTraffic, Memory


@dataclass
class LaunchCounts:
    """The counts of one launch that outlive it: its geometry, wave-instructions by class, the global and LDS bytes
    its instructions moved, its LDS clocks, and what its code object holds per wave and per workgroup. The
    scheduler's LaunchProfile gathers them while the launch runs; inspect's ExecutedKernel keeps a copy."""

    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    wave_instructions: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CLASSES})
    #: instruction bytes (kernarg included): a re-read counts again
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

    @property
    def total_wave_instructions(self) -> int:
        return sum(self.wave_instructions.values())

    @property
    def waves(self) -> int:
        threads = self.block[0] * self.block[1] * self.block[2]
        return self.grid[0] * self.grid[1] * self.grid[2] * -(-threads // 64)

    def counts(self) -> dict[str, Any]:
        """These counts alone, as LaunchCounts' keyword arguments: a copy the launch's later steps leave alone."""
        out = {f.name: getattr(self, f.name) for f in fields(LaunchCounts)}
        out["wave_instructions"] = dict(self.wave_instructions)
        return out


@dataclass
class LaunchProfile(LaunchCounts):
    """What one launch executed: its counts (LaunchCounts), steps, traffic per buffer and the ledger's facts."""

    kernel: str = ""
    steps: int = 0
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
