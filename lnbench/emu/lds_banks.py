"""LDS bank conflicts of one ds_read / ds_write step: the cycles the LDS banks are busy.

The model (CDNA 3's LDS, docs/targets.md [S4]): 32 banks of 4 bytes, dword `d` in bank `d % 32`, 128 bytes a
clock. A wave's instruction is served in passes of as many lanes as fill 128 bytes (32 lanes for 4 bytes per
lane, 16 for 8, 8 for 12 or 16). A pass takes as many clocks as the most distinct dwords any one bank holds
among its lanes' addresses (lanes reading one dword share it: a broadcast, no conflict); at least one clock
when a lane of the pass is active. The conflict cycles are the clocks beyond one per active pass.

Waves of a step usually share one address pattern (each workgroup has its own LDS at the same offsets), so the
patterns are counted once each and weighed by how many waves hold them.
"""
from __future__ import annotations

import numpy as np

BANKS = 32
DWORDS_PER_CLOCK = 32
WAVE = 64
#: (pattern bytes, dwords per lane) -> (clocks, passes): the same few patterns recur every batch and launch
_SEEN: dict[tuple[bytes, int], tuple[int, int]] = {}
#: fixed odd multipliers of the row hash (deterministic: a seeded generator)
_MIX = np.random.default_rng(31).integers(1, 2**63, size=WAVE * 8, dtype=np.uint64) | np.uint64(1)


def bank_cycles(rows: np.ndarray, lanes: np.ndarray, addrs: np.ndarray, count: int, k: int) -> tuple[int, int]:
    """(clocks the banks are busy, active passes) of one LDS instruction over the `k` waves of a step.

    rows, lanes: the step row (0..k-1) and lane of each active access; addrs: (accesses, parts) byte addresses,
    each part `count` dwords long."""
    if rows.size == 0:
        return 0, 0
    parts = addrs.shape[1]
    per_lane = parts * count
    lanes_per_pass = DWORDS_PER_CLOCK // (1 << (per_lane - 1).bit_length())
    dwords = (addrs[:, :, None] // 4 + np.arange(count)).reshape(rows.size, per_lane)
    if rows.size == k * WAVE:                      # every lane active: accesses are in wave, then lane order
        flat = dwords.reshape(k, WAVE * per_lane)
    else:
        pattern = np.full((k, WAVE, per_lane), -1, np.int64)
        pattern[rows, lanes] = dwords
        flat = pattern.reshape(k, -1)
    unique, weights = _distinct_rows(flat)
    busy = passes = 0
    for one, weight in zip(unique, weights):
        key = (one.tobytes(), per_lane)
        hit = _SEEN.get(key)
        if hit is None:
            if len(_SEEN) > 4096:
                _SEEN.clear()
            hit = _SEEN[key] = _one_wave(one.reshape(WAVE, per_lane), lanes_per_pass)
        busy += hit[0] * int(weight)
        passes += hit[1] * int(weight)
    return busy, passes


def _distinct_rows(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, how many times each occurs): rows keyed by a 64-bit hash (one matrix-vector product),
    checked against their key's first row; a collision falls back to an exact row sort."""
    keys = flat.astype(np.uint64) @ _MIX[:flat.shape[1]]
    _, first, inverse, weights = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    if (flat == flat[first][inverse]).all():
        return flat[first], weights
    return np.unique(flat, axis=0, return_counts=True)


def _one_wave(pattern: np.ndarray, lanes_per_pass: int) -> tuple[int, int]:
    """(clocks, active passes) of one wave's pattern (WAVE, dwords per lane), -1 for an inactive lane."""
    group = np.repeat(np.arange(WAVE) // lanes_per_pass, pattern.shape[1])
    d = pattern.reshape(-1)
    live = d >= 0
    group, d = group[live], d[live]
    if d.size == 0:
        return 0, 0
    distinct = np.unique(group * (1 << 32) + d)                       # one entry per (pass, dword)
    pass_of, dword = distinct >> 32, distinct & 0xFFFFFFFF
    bank_key = pass_of * BANKS + dword % BANKS
    keys, depth = np.unique(bank_key, return_counts=True)             # distinct dwords per (pass, bank)
    degree = np.zeros(WAVE, np.int64)
    np.maximum.at(degree, keys // BANKS, depth)
    return int(degree.sum()), int(np.count_nonzero(degree))
