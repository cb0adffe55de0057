"""The emulator's native helper against the numpy formulations it replaces (lnbench/emu/native.c): bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from lnbench.emu import native
from lnbench.emu.errors import EmulatorUnavailable
from lnbench.emu.ops_vector import _fma_round_odd, fma_f32

try:
    native.lib()
except EmulatorUnavailable as exc:          # no zig here: nothing to compare
    pytest.skip(str(exc), allow_module_level=True)


def _bits(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def test_fma_f32_matches_the_numpy_round_to_odd_bit_for_bit():
    rng = np.random.default_rng(7)
    n = 200_000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    near_cancel = (-(a.astype(np.float64) * b)).astype(np.float32) * (1 + rng.integers(-3, 4, n) * 2.0**-23)
    tiny = rng.integers(0, 2**24, n, dtype=np.uint64).astype(np.uint32).view(np.float32)   # denormals
    cases = [(a, b, near_cancel.astype(np.float32)), (tiny, a, tiny), (a, b, rng.standard_normal(n).astype(np.float32))]
    for x, y, z in cases + [(_bits(rng, n), _bits(rng, n), _bits(rng, n)) for _ in range(3)]:
        with np.errstate(all="ignore"):
            want = _fma_round_odd(x, y, z).astype(np.float32)
        got = np.empty_like(want)
        native.lib().lnbench_fma_f32(native._ptr(x), native._ptr(y), native._ptr(z), n, native._ptr(got))
        finite = ~np.isnan(want)
        assert np.array_equal(got[finite].view(np.uint32), want[finite].view(np.uint32))
        assert np.array_equal(np.isnan(got), np.isnan(want))


def test_fma_f32_leaves_nan_results_and_other_types_to_numpy():
    a = np.array([1.0, np.nan], np.float32)
    assert native.fma_f32(a, a, a) is None                        # a NaN result: numpy decides its payload
    assert native.fma_f32(a[:1], a[:1], a[:1].astype(np.float16)) is None
    with np.errstate(all="ignore"):
        assert np.array_equal(fma_f32(a, a, a).view(np.uint32), _fma_round_odd(a, a, a).astype(np.float32).view(np.uint32))
    col = np.array([[2.0], [3.0]], np.float32)                    # broadcast shapes, as a scalar operand gives
    row = np.ones((2, 64), np.float32)
    assert np.array_equal(native.fma_f32(row, col, row), row * col + row)


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
@pytest.mark.parametrize("parts, ndw", [(1, 1), (2, 1), (1, 4)])
def test_lds_race_in_place_update_equals_the_general_one(write, parts, ndw):
    """Accesses whose dwords rise in access order (no dword twice) update the race keys in place; the same accesses
    in another order take the general path (state read first, updates applied after). With no dword twice the
    order cannot matter: the keys, the benign-write count and the LDS bytes must come out the same."""
    rng = np.random.default_rng(parts * 10 + ndw + write)
    groups_n, lds_bytes, waves = 2, 4096, 6
    n_dw = lds_bytes // 4
    m = parts * ndw
    n = 48
    dwords = np.sort(rng.choice(np.arange(0, n_dw - m * 2, m * 2), n, replace=False))   # room for every part
    group = np.repeat([0, 1], n // 2)
    addrs = np.stack([dwords * 4 + 4 * ndw * p for p in range(parts)], axis=1).astype(np.int64)
    wave = np.where(group == 0, rng.integers(0, 3, n), rng.integers(3, 6, n)).astype(np.int64)
    epoch, wave_id = np.ones(waves, np.int64), np.arange(waves, dtype=np.int64)
    lds0 = rng.integers(0, 256, (groups_n, lds_bytes), dtype=np.uint8)
    wkey0 = np.full((groups_n, n_dw), -1, np.int64)
    rkey0 = np.full((groups_n, n_dw), -1, np.int64)
    if write:                                        # other waves of the epoch wrote some of these dwords before
        values = lds0.view(np.uint32)[group[:, None], (addrs[:, :, None] // 4 + np.arange(ndw)).reshape(n, -1)]
        for i in range(0, n, 3):
            wkey0[group[i], addrs[i, 0] // 4] = (1 << 32) | ((wave[i] + 1) % 3 + 3 * group[i])
    else:                                            # ...or read them (the readers become several)
        values = None
        for i in range(0, n, 2):
            rkey0[group[i], addrs[i, 0] // 4] = (1 << 32) | ((wave[i] + 1) % 3 + 3 * group[i])
    results = []
    for order in (np.arange(n), rng.permutation(n)):
        wkey, rkey, lds = wkey0.copy(), rkey0.copy(), lds0.copy()
        found, info = native.lds_race(wkey, rkey, lds, addrs[order], group[order], wave[order], epoch, wave_id, ndw,
                                      None if values is None else np.ascontiguousarray(values[order]))
        results.append((found, info.copy(), wkey, rkey, lds))
    (fa, ia, wa, ra, la), (fb, ib, wb, rb, lb) = results
    assert fa == fb == -1 and ia[5] == ib[5] and (ia[5] > 0) == write
    np.testing.assert_array_equal(wa, wb)
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(la, lb)
    if not write:
        assert (ra == ((1 << 32) | 0xFFFFFFFF)).any()    # several readers noted
