"""Instinct targets: the published figures of [targets.NAME] in the config (docs/targets.md names each source).

A target is a frozen value; a figure no public source gives is None, and the floor that needs it says so. A user's
--config adds a target (every required key) or overrides a figure; an unknown target name, a missing required
figure, an unknown key or a figure that is not a positive number is a usage error naming it, before any work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from lnbench.constants import ARCHES, INSTRUCTION_CLASSES
from lnbench.errors import LnbenchUsageError

#: figure -> (type, required); types are int (counts) or float (rates, sizes)
FIGURES: dict[str, tuple[type, bool]] = {
    "cus": (int, True), "clock_mhz": (float, True), "hbm_gbps": (float, True), "l2_mib": (float, False), "llc_mib": (float, False),
    "llc_gbps": (float, False), "lds_kib": (float, True), "lds_banks": (int, False),
    "lds_bytes_per_clk": (float, False), "simds": (int, True), "simd_lanes": (int, False),
    "wave_slots": (int, True), "vgprs": (int, True), "sgprs": (int, True), "launch_us": (float, False),
}
#: issue rates a user may give for the classes whose rate no public source states (wave-instructions/clk/CU)
ISSUE_KEYS = tuple(f"issue_{c}" for c in INSTRUCTION_CLASSES if c != "valu")


@dataclass(frozen=True)
class Target:
    """One Instinct GPU as published figures (None: not published)."""

    name: str
    arch: str
    cus: int
    clock_mhz: float
    hbm_gbps: float
    lds_kib: float
    simds: int
    wave_slots: int
    vgprs: int
    sgprs: int
    l2_mib: float | None = None
    llc_mib: float | None = None
    llc_gbps: float | None = None
    lds_banks: int | None = None
    lds_bytes_per_clk: float | None = None
    simd_lanes: int | None = None
    launch_us: float | None = None
    #: instruction class -> wave-instructions per clock per CU (user-given; VALU comes from simds × simd_lanes)
    issue: Mapping[str, float] = field(default_factory=dict)

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6


def _figure(name: str, key: str, value: Any) -> float | int:
    """A positive finite number (an integer where the figure counts something), else a usage error."""
    kind = FIGURES[key][0] if key in FIGURES else float
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0
          and (kind is float or float(value).is_integer()))
    if not ok:
        what = "a positive integer" if kind is int else "a positive number"
        raise LnbenchUsageError(f"config [targets.{name}] {key} must be {what}, got {value!r}")
    return kind(value)


def target_from(name: str, table: Mapping[str, Any]) -> Target:
    """The Target a [targets.NAME] table describes (checked)."""
    if not isinstance(table, Mapping):
        raise LnbenchUsageError(f"config [targets.{name}] must be a table, got {table!r}")
    arch = table.get("arch")
    if arch not in ARCHES:
        raise LnbenchUsageError(f"config [targets.{name}] arch must be one of {', '.join(ARCHES)}, got {arch!r}")
    known = set(FIGURES) | set(ISSUE_KEYS) | {"arch"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise LnbenchUsageError(f"config [targets.{name}]: unknown key {unknown[0]!r}; known keys: "
                                f"{', '.join(sorted(known))}")
    missing = [k for k, (_, required) in FIGURES.items() if required and k not in table]
    if missing:
        raise LnbenchUsageError(f"config [targets.{name}] lacks required figure(s): {', '.join(missing)}")
    figures: dict[str, Any] = {k: _figure(name, k, v) for k, v in table.items() if k in FIGURES}   # per FIGURES
    issue = {k[len("issue_"):]: float(_figure(name, k, v)) for k, v in table.items() if k in ISSUE_KEYS}
    return Target(name=name, arch=arch, issue=issue, **figures)


def all_targets(config: Mapping[str, Any]) -> dict[str, Target]:
    """Every target of the (merged) config, by name, each checked."""
    tables = config.get("targets") or {}
    return {name: target_from(name, table) for name, table in tables.items()}


def targets_for(config: Mapping[str, Any], arch: str, names: list[str] | None = None) -> list[Target]:
    """The targets of `arch` (or the `names` given, each of which must exist and be of `arch`); a usage error
    naming an unknown target or one of another arch."""
    known = all_targets(config)
    if not names:
        return [t for t in known.values() if t.arch == arch]
    out = []
    for name in names:
        if name not in known:
            raise LnbenchUsageError(f"unknown target {name!r}; known targets: {', '.join(known) or 'none'}")
        if known[name].arch != arch:
            raise LnbenchUsageError(f"target {name} is {known[name].arch}; the emulated device is {arch}")
        out.append(known[name])
    return out
