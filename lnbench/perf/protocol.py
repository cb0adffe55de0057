"""perf's protocol: the shared timing settings (lnbench.measure.protocol) plus perf's modes, ops and cold-mode
rotation settings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from lnbench.constants import OPS, PERF_MODES
from lnbench.errors import LnbenchUsageError
from lnbench.measure.protocol import Protocol
from lnbench.settings import packaged_table

_PERF = packaged_table("perf")

MODES = PERF_MODES
#: the times a perf row's headline can be (--timer): stream (events / wall clock) or kernel (profiler)
HEADLINES: tuple[str, ...] = ("stream", "kernel")
#: peak: source + destination at least this many times the last-level cache
PEAK_MIN_LLC_FACTOR = 4


@dataclass(frozen=True)
class PerfProtocol(Protocol):
    """Every knob of a perf run: the shared timing settings, then which modes and ops to time and how cold mode
    rotates its buffers."""

    NUMBERS: ClassVar[tuple[str, ...]] = Protocol.NUMBERS + ("cold_factor", "cold_mem_fraction", "llc_mib")
    #: the settings that change what a measurement means, which `compare` and `merge` match two perf runs by
    #: (lnbench.compare.match): every number but the worker timeout; modes and ops select cases
    MEASUREMENT: ClassVar[tuple[str, ...]] = tuple(name for name in NUMBERS if name != "worker_timeout_s")
    LISTS: ClassVar[tuple[str, ...]] = ("modes", "ops")

    # defaults: the packaged config's [perf] values (lnbench.measure.protocol)
    modes: tuple[str, ...] = tuple(_PERF["modes"])
    ops: tuple[str, ...] = tuple(_PERF["ops"])
    #: cold mode: rotate sets until the total is at least this many times the last-level cache
    cold_factor: float = _PERF["cold_factor"]
    #: cold mode: never hold more than this fraction of the device's free memory in rotated sets
    cold_mem_fraction: float = _PERF["cold_mem_fraction"]
    #: override of the last-level cache size in MiB (0 = read it off the device)
    llc_mib: float = _PERF["llc_mib"]

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
