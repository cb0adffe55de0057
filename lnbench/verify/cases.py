"""Verify cases (kind × dtype × shape × eps) and their seeded random inputs."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lnbench import validate
from lnbench.settings import check_eps_values  # noqa: F401 - one rule for the config and the cases
from lnbench.constants import DTYPES
from lnbench.errors import LnbenchUsageError

#: kinds of input rows (docs/reference.md says what each catches); every kind runs on every requested shape
KINDS: tuple[str, ...] = ("randn", "offset", "constant", "eps2", "autograd-3d")
#: the offset kind's row mean (x = OFFSET + N(0, 1))
OFFSET = 1e3
#: |mean|/σ of the rows each kind generates, what cancellation in E[x²]−E[x]² grows with (verify.diagnosis):
#: ~0 for N(0, 1) rows (|mean| ~ 1/√N), OFFSET for offset rows, unbounded for constant rows (σ = 0)
MEAN_OVER_SIGMA: dict[str, float] = {"randn": 0.0, "offset": OFFSET, "constant": math.inf, "eps2": 0.0,
                                     "autograd-3d": 0.0}


@dataclass(frozen=True)
class Case:
    """One verify case. `m` counts rows of the flattened input."""

    kind: str
    dtype: str
    m: int
    n: int
    eps: float
    seed: int

    @property
    def shape(self) -> tuple[int, ...]:
        if self.kind == "autograd-3d":
            return (2, max(1, self.m // 2), self.n)
        return (self.m, self.n)

    @property
    def rows(self) -> int:
        """Rows after flattening leading dims."""
        rows = 1
        for dim in self.shape[:-1]:
            rows *= dim
        return rows

    @property
    def label(self) -> str:
        return f"{self.kind} {self.dtype} {'x'.join(map(str, self.shape))} eps={self.eps:g}"


@dataclass
class Inputs:
    x: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    dy: torch.Tensor


def build_cases(shapes: list[tuple[int, int]], dtypes: list[str], eps_values: list[float], seed: int,
                kinds: tuple[str, ...] = KINDS) -> list[Case]:
    """Every kind for every dtype and shape; each case gets its own seed derived from `seed`.

    `eps_values` is the config's `[verify] eps`: the first is every kind's eps, and each further one gets
    its own `eps2` case (so a list of 3 tests 3 eps values). With a single eps there is no `eps2` case;
    an empty list or a repeated value (an `eps2` case that reruns the same eps would test nothing) is a
    usage error.
    """
    check_eps_values(eps_values)
    cases: list[Case] = []
    for dtype in dtypes:
        for m, n in shapes:
            for kind in kinds:
                for eps in (eps_values[1:] if kind == "eps2" else eps_values[:1]):
                    cases.append(Case(kind, dtype, m, n, eps, validate.derived_seed(seed, len(cases))))
    return cases


def make_inputs(case: Case, device: torch.device) -> Inputs:
    """Fresh random inputs (never zeros) for a case, drawn on the CPU with a fixed seed, then moved."""
    gen = torch.Generator().manual_seed(case.seed)
    dtype = DTYPES[case.dtype]
    shape, n = case.shape, case.shape[-1]
    if case.kind == "constant":
        x = torch.randn(*shape[:-1], 1, generator=gen).expand(shape).contiguous()
    else:
        x = torch.randn(*shape, generator=gen)
        if case.kind == "offset":
            x = x + OFFSET
    weight = 1.0 + 0.5 * torch.randn(n, generator=gen)
    bias = 0.5 * torch.randn(n, generator=gen)
    dy = torch.randn(*shape, generator=gen)
    return Inputs(*(t.to(dtype=dtype).to(device) for t in (x, weight, bias, dy)))
