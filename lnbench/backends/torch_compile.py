"""torch.compile of F.layer_norm (Inductor): a peer for `perf` on fwd and fwd+bwd.

The compiled function returns y only, so forward gives (y, None, None) even when stats are asked for;
there is no standalone backward from saved stats (backward raises NotImplementedError). fwd+bwd goes
through the compiled function's autograd path (AOTAutograd's compiled backward).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any, Callable

import torch
import torch.nn.functional as F

from lnbench.backends.base import Availability, Backend
from lnbench.run.device import Device


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _cxx_compiler() -> str | None:
    """The C++ compiler Inductor's CPU backend would use ($CXX, else c++/g++/clang++ on PATH)."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class TorchCompileBackend(Backend):
    name = "compile"
    description = "torch.compile(F.layer_norm) (Inductor; no stats, no standalone backward)"
    deterministic = True
    ops = ("fwd", "fwd+bwd")

    def __init__(self) -> None:
        self._compiled: Callable[..., Any] | None = None

    def availability(self, device: Device) -> Availability:
        if not hasattr(torch, "compile"):
            return Availability(False, f"torch {torch.__version__} has no torch.compile")
        if device.is_gpu:
            if not torch.cuda.is_available():
                return Availability(False, "torch sees no GPU")
            if importlib.util.find_spec("triton") is None:
                return Availability(False, "torch.compile on a GPU needs triton (not installed)")
            return Availability(True)
        if _cxx_compiler() is None:
            return Availability(False, "torch.compile on the CPU needs a C++ compiler (none on PATH; set CXX)")
        return Availability(True)

    def preload(self) -> None:
        import torch._inductor.compile_fx  # noqa: F401,PLC0415 - Inductor's import is most of a first compile's set-up

    def _fn(self) -> Callable[..., Any]:
        # dynamic=False: one specialised kernel per shape, as a tuned peer would ship.
        if self._compiled is None:
            self._compiled = torch.compile(_layer_norm, dynamic=False)
        return self._compiled

    def forward(self, x, weight, bias, eps, store_stats=True):
        return self._fn()(x, weight, bias, eps), None, None

    def backward(self, dy, x, weight, mean, rstd):
        raise NotImplementedError(
            "the compile backend has no standalone backward: torch.compile(F.layer_norm) keeps no stats; "
            "time its backward through --op fwd+bwd")

    def layernorm(self, x, weight, bias, eps):
        return self._fn()(x, weight, bias, eps)
