"""The pass rule: max|err_backend| <= k * max|err_torch_same_dtype| + atol(dtype, tensor) [* sqrt(M)]."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lnbench.config import DTYPES, require
from lnbench.errors import LnbenchUsageError
from lnbench.reference import TENSORS

#: tensors reduced over rows: their atol grows with sqrt(M)
ROW_REDUCED = ("dweight", "dbias")


@dataclass(frozen=True)
class Tolerance:
    k: float
    atol: dict[str, dict[str, float]]  # dtype -> tensor -> atol

    def allowed(self, tensor: str, dtype: str, rows: int, torch_err: float) -> float:
        scale = math.sqrt(rows) if tensor in ROW_REDUCED else 1.0
        return self.k * torch_err + self.atol[dtype][tensor] * scale

    @classmethod
    def from_config(cls, verify_table: dict[str, Any]) -> "Tolerance":
        tol = require(verify_table, "tolerance", dict, "verify")
        k = require(tol, "k", (int, float), "verify.tolerance")
        atol_table = require(tol, "atol", dict, "verify.tolerance")
        atol: dict[str, dict[str, float]] = {}
        for dtype in DTYPES:
            per = require(atol_table, dtype, dict, "verify.tolerance.atol")
            atol[dtype] = {t: float(require(per, t, (int, float), f"verify.tolerance.atol.{dtype}")) for t in TENSORS}
            if any(v < 0 for v in atol[dtype].values()):
                raise LnbenchUsageError(f"config [verify.tolerance.atol.{dtype}] values must be >= 0")
        if k < 0:
            raise LnbenchUsageError("config [verify.tolerance] k must be >= 0")
        return cls(float(k), atol)
