"""LDS bank conflicts of one ds_read / ds_write step: the cycles the LDS banks are busy.

The model (CDNA 3's LDS, docs/targets.md [S4]): 32 banks of 4 bytes, dword `d` in bank `d % 32`, 128 bytes a
clock. A wave's instruction is served in passes of as many lanes as fill 128 bytes (32 lanes for 4 bytes per
lane, 16 for 8, 8 for 12 or 16). A pass takes as many clocks as the most distinct dwords any one bank holds
among its lanes' addresses (lanes reading one dword share it: a broadcast, no conflict); at least one clock
when a lane of the pass is active. The conflict cycles are the clocks beyond one per active pass.

The count runs in the native helper (native.c), per wave and pass: for each bank, the distinct dwords its lanes
address.
"""
from __future__ import annotations

import numpy as np

from lnbench.emu import native

BANKS = 32
DWORDS_PER_CLOCK = 32
WAVE = 64


def bank_cycles(rows: np.ndarray, lanes: np.ndarray, addrs: np.ndarray, count: int, k: int) -> tuple[int, int]:
    """(clocks the banks are busy, active passes) of one LDS instruction over the `k` waves of a step.

    rows, lanes: the step row (0..k-1) and lane of each active access; addrs: (accesses, parts) byte addresses,
    each part `count` dwords long. Counted wave by wave and pass by pass in the native helper (lnbench_lds_banks)."""
    if rows.size == 0:
        return 0, 0
    per_lane = addrs.shape[1] * count
    lanes_per_pass = DWORDS_PER_CLOCK // (1 << (per_lane - 1).bit_length())
    return native.lds_banks(rows, lanes, addrs, count, k, lanes_per_pass)
