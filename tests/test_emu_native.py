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
