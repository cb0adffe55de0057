"""The names lnbench is built around, each defined once and imported everywhere else: the target arches, the
dtypes, the ops and the FlyDSL backward's dγ/dβ strategies."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: AMD Instinct targets: MI300X/MI325X (gfx942) and MI350X/MI355X (gfx950); the emulator runs both
ARCHES: tuple[str, ...] = ("gfx942", "gfx950")

#: canonical dtype name -> torch's name of it
_TORCH_DTYPES: dict[str, str] = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
#: the canonical dtype names
DTYPE_CHOICES: tuple[str, ...] = tuple(_TORCH_DTYPES)
#: bytes per element, by canonical name
ELEM_BYTES: dict[str, int] = {"f32": 4, "f16": 2, "bf16": 2}
#: DTYPES (canonical name -> torch dtype) and DTYPE_NAMES (torch dtype -> canonical name) are made on first use
#: (`__getattr__` below), so the commands that never touch a tensor (history, store, compare) do not import torch
DTYPES: dict[str, torch.dtype]
DTYPE_NAMES: dict[torch.dtype, str]


def __getattr__(name: str) -> Any:
    if name not in ("DTYPES", "DTYPE_NAMES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import torch

    dtypes = {short: getattr(torch, long) for short, long in _TORCH_DTYPES.items()}
    globals().update(DTYPES=dtypes, DTYPE_NAMES={v: k for k, v in dtypes.items()})
    return globals()[name]
#: every spelling a user may give -> canonical name
DTYPE_ALIASES: dict[str, str] = {
    "f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}

#: what a LayerNorm backend can run, as perf times it
OPS: tuple[str, ...] = ("fwd", "fwd-nostats", "bwd", "fwd+bwd")
#: the ops that are one kernel launch path each (inspect, abi-compare); fwd+bwd is the autograd composite
KERNEL_OPS: tuple[str, ...] = ("fwd", "fwd-nostats", "bwd")
#: the forward ops (with and without saved stats)
FORWARD_OPS: tuple[str, ...] = ("fwd", "fwd-nostats")

#: how perf times a case: hot (the same buffers back to back), cold (input/output sets rotated past the last-level
#: cache, the stream held), wall (host wall time per call of the public wrapper, allocation included)
PERF_MODES: tuple[str, ...] = ("hot", "cold", "wall")
#: what abi-compare measures per call: direct (hot call on preallocated outputs, host wall time), wrapper (the public
#: wrapper, allocation included, host wall time), device (device time, the stream held by a spin kernel)
ABI_METRICS: tuple[str, ...] = ("direct", "wrapper", "device")
#: what a timing command does on a busy machine (lnbench.measure.load)
LOAD_POLICIES: tuple[str, ...] = ("warn", "refuse")

#: dγ/dβ strategies of the FlyDSL backward: a second reduce kernel (bitwise reproducible) or fp32 atomics
STRATEGIES: tuple[str, ...] = ("deterministic", "atomic")

#: instruction classes of an executed kernel's profile (the emulator counts each executed instruction in one)
INSTRUCTION_CLASSES: tuple[str, ...] = ("salu", "valu", "vmem_load", "vmem_store", "smem", "lds", "cross_lane",
                                        "branch", "sync")
