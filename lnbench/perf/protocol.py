"""perf's protocol: the shared timing settings (lnbench.measure.protocol) plus perf's modes, ops and cold-mode
rotation settings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from lnbench.constants import OPS, PERF_MODES
from lnbench.errors import LnbenchUsageError
from lnbench.measure.protocol import Protocol

MODES = PERF_MODES
MODE_HELP = {
    "hot": "same buffers back to back, device timer (launch-bound / cache-warm behaviour)",
    "cold": "rotate input/output sets whose total exceeds the last-level cache; device time with the stream held",
    "wall": "host wall time per call of the public wrapper (allocation included), synchronised at run end",
}


@dataclass(frozen=True)
class PerfProtocol(Protocol):
    """Every knob of a perf run: the shared timing settings, then which modes and ops to time and how cold mode
    rotates its buffers."""

    NUMBERS: ClassVar[tuple[str, ...]] = Protocol.NUMBERS + ("cold_factor", "llc_mib", "cold_mem_fraction")
    LISTS: ClassVar[tuple[str, ...]] = ("modes", "ops")

    modes: tuple[str, ...] = ("cold", "hot")
    ops: tuple[str, ...] = ("fwd", "bwd")
    #: cold mode: rotate sets until the total is at least this many times the last-level cache
    cold_factor: float = 3.0
    #: cold mode: never hold more than this fraction of the device's free memory in rotated sets
    cold_mem_fraction: float = 0.4
    #: override of the last-level cache size in MiB (0 = read it off the device)
    llc_mib: float = 0.0

    def validate_own(self) -> None:
        if not self.modes:
            raise LnbenchUsageError("no mode given; choose from " + ", ".join(MODES))
        for mode in self.modes:
            if mode not in MODES:
                raise LnbenchUsageError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        if not self.ops:
            raise LnbenchUsageError("no op given; choose from " + ", ".join(OPS))
        for op in self.ops:
            if op not in OPS:
                raise LnbenchUsageError(f"unknown op {op!r}; choose from {', '.join(OPS)}")

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["kernel_timer"] = out.pop("kernel_timer")     # last, where earlier perf results hold it
        return out
