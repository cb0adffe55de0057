"""The pass rule: max|err_backend| <= k * max|err_torch_same_dtype| + atol(dtype, tensor) [* sqrt(M)] + floor.

`floor` is the conditioning floor of fp32 accumulation: a correct kernel that forms the row mean
as a sum of N fp32 values is off by about sqrt(N) ulps of |mean|; x̂ = (x - mean)·rstd amplifies
that by rstd. Where |mean|·rstd is large (constant rows: rstd = 1/sqrt(eps)) torch's Welford
happens to be exact and would otherwise set the bar at zero. For ordinary rows the floor is ~1e-7.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lnbench.config import DTYPES, default_config, require, section
from lnbench.validate import number as check_number
from lnbench.reference import TENSORS

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

    def xhat_error(self, ulps: float) -> float:
        """Expected fp32 error of x̂ from a summed mean: ulps · eps32 · sqrt(N) · |mean|·rstd."""
        return ulps * FP32_EPS * math.sqrt(self.n) * self.mean_times_rstd

    def floor(self, tensor: str, ulps: float) -> float:
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
        ulps = check_number(tol.get("fp32_ulps", 4.0), "fp32_ulps", "config [verify.tolerance] fp32_ulps")
        return cls(float(k), atol, float(ulps))
