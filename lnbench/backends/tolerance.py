"""The pass rule: max|err_backend| <= k * max|err_torch_same_dtype| + atol(dtype, tensor) [* sqrt(M)] + floor.

`floor` is the conditioning floor of fp32 accumulation: a correct kernel that forms the row mean
as a sum of N fp32 values is off by about sqrt(N) ulps of the row's magnitude; x̂ = (x - mean)·rstd
amplifies that by rstd. Where |mean|·rstd is large (constant rows: rstd = 1/sqrt(eps)) torch's Welford
happens to be exact and would otherwise set the bar at zero. For ordinary rows the y floor is ~1e-7.

The mean tensor itself needs the same floor, without rstd (the mean is in x's units): its error is
that of an fp32 sum, |fl(Σx) − Σx|/N ≲ ulps · eps32 · sqrt(N) · mean|x| (mean|x| = Σ|x_i|/N, the
magnitude in the standard summation bound). Without it the mean's bar is 2·torch's error + atol, an
absolute 1e-6 for f32: on `offset` rows (|mean| ≈ 1e3, one fp32 ulp = 6.1e-5) torch's Welford is at
times within a quarter ulp of the fp64 mean (1.5e-5, seed 1, 3x257), which puts the bar at half an ulp
(3.1e-5), below what even a correctly rounded mean can guarantee (0.5 ulp). A correct pairwise /
cascade sum (torch's x.mean, the self-test's control) is off by up to ~2 ulps there (1.07e-4), a
sequential sum or a per-thread Welford by up to ~11 ulps at N=257 and ~37 at N=4097 (measured, seeds
0..30) — all inside 4 · eps32 · sqrt(N) · mean|x| (7.6e-3 at N=257, about 125 ulps), while a mean
stored in bf16 (one bf16 ulp at 1e3 = 4) stays caught by orders of magnitude.

dx = rstd·(wdy − c1 − x̂·c2) gets the same kind of floor: c1 = mean(wdy) is an fp32 sum (error
≲ ulps·eps32·sqrt(N)·max|wdy|) and x̂ carries the mean's error (xhat_error) into the x̂·c2 term, both
amplified by rstd: ulps · eps32 · sqrt(N) · max_row(rstd·(max|wdy| + |c2|·|mean|·rstd)). On constant
rows (rstd = 316 at eps = 1e-5, |dx| ≈ 1e3, one fp32 ulp = 6.1e-5) the absolute f32 atol of 1e-5 is
again below an ulp, and a correct control was off by 1.1e-4 where torch was off by 4.9e-5 (bar 1.08e-4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lnbench.settings import default_config, require, section
from lnbench.constants import DTYPES
from lnbench.validate import number as check_number
from lnbench.backends.reference import TENSORS

#: tensors reduced over rows: their atol grows with sqrt(M)
ROW_REDUCED = ("dweight", "dbias")
FP32_EPS = 2.0 ** -23


@dataclass(frozen=True)
class Conditioning:
    """What the conditioning floor needs from a case: row width, rows, max |mean|·rstd, magnitudes."""

    n: int
    rows: int
    mean_times_rstd: float
    max_weight: float
    max_dy: float
    #: max over rows of mean|x| (Σ|x_i|/N): the magnitude of the fp32 row sum behind the mean
    mean_abs_x: float = 0.0
    #: max over rows of rstd·(max|wdy| + |c2|·|mean|·rstd): what dx's fp32 sums are amplified into
    dx_scale: float = 0.0

    def xhat_error(self, ulps: float) -> float:
        """Expected fp32 error of x̂ from a summed mean: ulps · eps32 · sqrt(N) · |mean|·rstd."""
        return ulps * FP32_EPS * math.sqrt(self.n) * self.mean_times_rstd

    def mean_error(self, ulps: float) -> float:
        """Expected fp32 error of a summed row mean: ulps · eps32 · sqrt(N) · mean|x| (no rstd: x's units)."""
        return ulps * FP32_EPS * math.sqrt(self.n) * self.mean_abs_x

    def floor(self, tensor: str, ulps: float) -> float:
        if tensor == "mean":
            return self.mean_error(ulps)
        if tensor == "dx":
            return ulps * FP32_EPS * math.sqrt(self.n) * self.dx_scale
        if tensor == "y":
            return self.xhat_error(ulps) * self.max_weight
        if tensor == "dweight":
            return self.xhat_error(ulps) * self.max_dy * math.sqrt(self.rows)
        return 0.0


@dataclass(frozen=True)
class Tolerance:
    k: float
    atol: dict[str, dict[str, float]]  # dtype -> tensor -> atol
    fp32_ulps: float = 4.0

    def allowed(self, tensor: str, dtype: str, rows: int, torch_err: float,
                cond: Conditioning | None = None) -> float:
        scale = math.sqrt(rows) if tensor in ROW_REDUCED else 1.0
        floor = cond.floor(tensor, self.fp32_ulps) if cond else 0.0
        return self.k * torch_err + self.atol[dtype][tensor] * scale + floor

    @classmethod
    def packaged(cls) -> "Tolerance":
        """The rule with the packaged defaults' numbers (`[verify.tolerance]` of default.toml)."""
        return cls.from_config(section(default_config(), "verify"))

    @classmethod
    def from_config(cls, verify_table: dict[str, Any]) -> "Tolerance":
        tol = require(verify_table, "tolerance", dict, "verify")
        k = check_number(tol.get("k"), "k", "config [verify.tolerance] k")    # finite, within validate.LIMITS
        atol_table = require(tol, "atol", dict, "verify.tolerance")
        atol: dict[str, dict[str, float]] = {}
        for dtype in DTYPES:
            per = require(atol_table, dtype, dict, "verify.tolerance.atol")
            atol[dtype] = {t: float(check_number(per.get(t), "atol", f"config [verify.tolerance.atol.{dtype}] {t}"))
                           for t in TENSORS}
        ulps = check_number(tol.get("fp32_ulps", cls.fp32_ulps), "fp32_ulps", "config [verify.tolerance] fp32_ulps")
        return cls(float(k), atol, float(ulps))
