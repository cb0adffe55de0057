"""Lower bounds on one launch's time on one target, from what the emulated device executed (docs/targets.md,
"The method"). Every number here is modelled, never measured.

    memory   distinct bytes loaded + stored / HBM peak (cold); a hot working set that fits the last-level
             cache over that cache's peak bandwidth (not computed where none is published)
    issue    per instruction class, on the busiest CU: the grid's G workgroups land on C CUs, so one CU runs at
             least ceil(G / C) of them (the tail when G is not a multiple of C). VALU: those workgroups' waves
             spread over the CU's SIMDs, each wave64 instruction holding its SIMD 64 / simd_lanes clocks. Other
             classes: wave-instructions / the target's issue rate (only where a config gives one)
    lds      the busiest CU's LDS bank clocks (lnbench/emu/lds_banks.py, conflicts included; 32 banks × 4 B =
             128 B a clock), scaled to the target's LDS bytes per clock
    launch   the target's shortest launch, where a figure exists
    bound    the largest of these; bound_by names it

Workgroups are taken as equal in work (the launch's totals over G): LayerNorm's are, a row each.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from lnbench.constants import INSTRUCTION_CLASSES
from lnbench.modelled.targets import Target

#: gfx90a+ allocate VGPRs (and AGPRs) in blocks of 8 and SGPRs in blocks of 16 (LLVM AMDGPU backend,
#: AMDGPUUsage / AMDGPUBaseInfo allocation granules)
VGPR_GRANULE, SGPR_GRANULE = 8, 16
#: the emulator counts LDS clocks at 32 banks of 4 bytes
COUNTED_LDS_BYTES_PER_CLK = 128.0
MODES = ("cold", "hot")


@dataclass(frozen=True)
class Launch:
    """What floors need of one emulated launch (inspect.ExecutedKernel gives it)."""

    workgroups: int
    waves_per_group: int
    wave_instructions: Mapping[str, int]
    unique_bytes: int                   # distinct bytes loaded + stored (the compulsory traffic)
    lds_bank_cycles: int
    vgprs: int = 0
    agprs: int = 0
    sgprs: int = 0
    lds_alloc: int = 0                  # LDS bytes per workgroup


@dataclass(frozen=True)
class Occupancy:
    waves_per_simd: int
    workgroups_per_cu: int
    limiter: str                        # slots, vgprs, sgprs, lds or workgroup size


@dataclass
class Floors:
    """One launch on one target in one mode: floors in µs (None: not computed; `notes` say why)."""

    target: str
    mode: str
    busiest_cu_workgroups: int
    occupancy: Occupancy
    memory_us: float | None
    issue_us: dict[str, float] = field(default_factory=dict)
    lds_us: float | None = None
    launch_us: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def candidates(self) -> dict[str, float]:
        out = {"memory": self.memory_us, **{f"issue_{c}": v for c, v in self.issue_us.items()},
               "lds": self.lds_us, "launch": self.launch_us}
        return {k: v for k, v in out.items() if v is not None}

    @property
    def bound_us(self) -> float:
        return max(self.candidates.values(), default=0.0)

    @property
    def bound_by(self) -> str:
        c = self.candidates
        return max(c, key=c.__getitem__) if c else ""


def occupancy(launch: Launch, t: Target) -> Occupancy:
    """Waves per SIMD and workgroups per CU the launch's registers and LDS allow on `t`."""
    limits = {"slots": t.wave_slots}
    if launch.vgprs:
        limits["vgprs"] = t.vgprs // (math.ceil(launch.vgprs / VGPR_GRANULE) * VGPR_GRANULE)
    if launch.sgprs:
        limits["sgprs"] = t.sgprs // (math.ceil(launch.sgprs / SGPR_GRANULE) * SGPR_GRANULE)
    why = min(limits, key=limits.__getitem__)
    per_simd = limits[why]
    groups = {"workgroup size": t.simds * per_simd // max(launch.waves_per_group, 1)}
    if launch.lds_alloc:
        groups["lds"] = int(t.lds_kib * 1024) // launch.lds_alloc
    g_why = min(groups, key=groups.__getitem__)
    return Occupancy(per_simd, groups[g_why], why if g_why == "workgroup size" else g_why)


def floors(launch: Launch, t: Target, mode: str) -> Floors:
    """The floors of `launch` on `t` in `mode` (cold: HBM; hot: the last-level cache when the working set fits)."""
    g = max(launch.workgroups, 1)
    busiest = math.ceil(g / t.cus)
    waves = g * launch.waves_per_group
    out = Floors(target=t.name, mode=mode, busiest_cu_workgroups=busiest, occupancy=occupancy(launch, t),
                 memory_us=None)
    out.memory_us = _memory_us(launch.unique_bytes, t, mode, out.notes)
    clock = t.clock_hz
    for cls in INSTRUCTION_CLASSES:
        count = launch.wave_instructions.get(cls, 0)
        if not count:
            continue
        if cls == "valu":
            if t.simd_lanes is None:
                out.notes.append("issue_valu: no simd_lanes figure")
                continue
            on_cu = busiest * launch.waves_per_group
            per_wave = count / waves
            cycles = math.ceil(on_cu / t.simds) * per_wave * (64 / t.simd_lanes)
        elif cls in t.issue:
            cycles = busiest * count / g / t.issue[cls]
        else:
            continue
        out.issue_us[cls] = cycles / clock * 1e6
    missing = [c for c in INSTRUCTION_CLASSES if c != "valu" and launch.wave_instructions.get(c) and c not in t.issue]
    if missing:
        out.notes.append(f"issue floors of {', '.join(missing)}: no published issue rate")   # (per launch)
    if launch.lds_bank_cycles:
        if t.lds_bytes_per_clk is None:
            out.notes.append("lds: no lds_bytes_per_clk figure")
        else:
            cycles = busiest * launch.lds_bank_cycles / g * COUNTED_LDS_BYTES_PER_CLK / t.lds_bytes_per_clk
            out.lds_us = cycles / clock * 1e6
    if t.launch_us is None:
        out.notes.append("launch: no published figure")
    else:
        out.launch_us = t.launch_us
    return out


def _memory_us(nbytes: int, t: Target, mode: str, notes: list[str]) -> float | None:
    """Cold: every distinct byte from HBM. Hot: a working set that fits the L2 is not bounded (its bandwidth is
    not published); one that fits the last-level cache over that cache's bandwidth; a larger one moves at least
    the bytes beyond the cache from HBM (and all of them through the cache)."""
    cold = nbytes / (t.hbm_gbps * 1e9) * 1e6
    if mode == "cold":
        return cold
    if t.l2_mib is not None and nbytes <= t.l2_mib * 2 ** 20:
        notes.append("memory (hot): the working set fits the L2, whose bandwidth is not published")
        return None
    if t.llc_mib is None:
        notes.append("memory (hot): no last-level cache size")
        return None
    through_llc = nbytes / (t.llc_gbps * 1e9) * 1e6 if t.llc_gbps else None
    if nbytes <= t.llc_mib * 2 ** 20:
        if through_llc is None:
            notes.append("memory (hot): the working set fits the last-level cache, whose bandwidth is not published")
        return through_llc
    beyond = (nbytes - t.llc_mib * 2 ** 20) / (t.hbm_gbps * 1e9) * 1e6
    return max(beyond, through_llc or 0.0)
