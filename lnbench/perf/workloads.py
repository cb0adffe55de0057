"""Workloads: for one backend × op × mode × shape × dtype, the inputs and a zero-argument callable to time.

What one call does, per op (the callable returns nothing; its outputs are kept or dropped as below):
    fwd          backend.forward(x, γ, β, eps, store_stats=True)
    fwd-nostats  backend.forward(x, γ, β, eps, store_stats=False)
    bwd          backend.backward(dy, x, γ, mean, rstd) from stats saved once, before timing, by the same
                 backend's forward. The harness never zeroes anything: a backend whose dγ/dβ accumulate
                 atomically zeroes them inside its own backward, so that zeroing IS inside the bwd timing
                 (and its bytes are not in the byte model unless the backend declares them as workspace).
    fwd+bwd      the public autograd path: y = backend.layernorm(x, γ, β, eps), then
                 torch.autograd.grad(y, (x, γ, β), dy) (grads returned, never accumulated into .grad).

Modes:
    hot   one input set, outputs dropped after each call (the allocator hands back the same block): the
          working set stays cache-resident when it fits; "device" timer: events around back-to-back
          calls, so host overhead shows where it exceeds device time (launch-bound behaviour).
    cold  S input sets, and the outputs of the last S calls kept alive (so each call writes a fresh block),
          S = max(2, ceil(cold_factor × LLC / bytes per set)), capped so the sets use at most
          cold_mem_fraction of free device memory, and at 4096 sets (noted in the row when a cap bites).
          LLC = the L2 size torch reports (+ the 256 MiB Infinity Cache on MI300X/MI355X, gfx942/gfx950);
          CPUs read L3 from sysfs. Nothing is flushed: rotation only,
          so no flush ever lands inside (or between) timed calls. "held" timer: the stream is held by a
          spin kernel while the calls are queued, so the figure is device time (HBM-bound), not host time.
    wall  as hot, but timed on the host wall clock (allocation and Python wrapper included), synced per run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from lnbench.backends.base import Backend
from lnbench.constants import FORWARD_OPS
from lnbench.measure.cache import free_memory, llc_bytes
from lnbench.perf.bytes_model import op_bytes
from lnbench.perf.protocol import PerfProtocol

MIB = 1 << 20
#: at most this many rotated sets (only shapes of a few KiB reach it; they are launch-bound anyway)
MAX_SETS = 4096


@dataclass
class Workload:
    """A ready-to-time call. nbytes: byte-model bytes per call; sets: rotated input sets (1 = hot)."""

    fn: Callable[[], object]
    timer: str
    nbytes: int
    sets: int
    working_set_bytes: int
    llc_bytes: int
    note: str = ""


def cold_sets(per_set: int, llc: int, factor: float, mem_cap: int, max_sets: int = MAX_SETS) -> tuple[int, str]:
    """Number of rotated sets for cold mode, and a note when the memory cap (or the set cap, which only
    tiny, launch-bound shapes reach) keeps the rotated total under factor × LLC."""
    want = max(2, math.ceil(factor * llc / max(per_set, 1)))
    allowed = max(1, min(mem_cap // max(per_set, 1), max_sets))
    if want <= allowed:
        return want, ""
    why = "the set cap" if allowed == max_sets else "the memory cap"
    return allowed, (f"cold: {allowed} set(s) under {why}; {allowed * per_set / MIB:.3g} MiB "
                     f"rotated vs {factor:g}× LLC = {factor * llc / MIB:.0f} MiB wanted")


def _inputs(sets: int, m: int, n: int, dtype: torch.dtype, device: torch.device, seed: int
            ) -> dict[str, Any]:
    """x and dy as `sets` separate (m, n) tensors, each its own allocation (storage offset 0, so compiled
    backends see identical, aligned inputs and never recompile per set); γ, β shared."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def stack() -> list[torch.Tensor]:
        out = []
        for _ in range(sets):
            out.append(torch.randn(m, n, generator=gen, device=device, dtype=torch.float32).to(dtype))
        return out

    return {
        "x": stack(), "dy": stack(),
        "weight": (1.0 + 0.5 * torch.randn(n, generator=gen, device=device)).to(dtype),
        "bias": (0.5 * torch.randn(n, generator=gen, device=device)).to(dtype),
    }


def _rotating(call: Callable[[int], Any], sets: int) -> Callable[[], None]:
    """fn() calling call(0), call(1), ... round-robin; with sets > 1 the last `sets` results stay alive."""
    if sets == 1:
        def hot() -> None:
            call(0)
        return hot
    ring: list[Any] = [None] * sets
    state = [0]

    def cold() -> None:
        i = state[0]
        state[0] = i + 1 if i + 1 < sets else 0
        ring[i] = call(i)
    return cold


def workspace_bytes(backend: Backend, op: str, m: int, n: int, device: torch.device) -> int:
    """Extra bytes a backend declares through an optional `perf_workspace_bytes(op, m, n, device)`."""
    declare = getattr(backend, "perf_workspace_bytes", None)
    return int(declare(op, m, n, device)) if callable(declare) else 0


def build_workload(backend: Backend, op: str, mode: str, m: int, n: int, dtype: torch.dtype,
                   device: torch.device, *, eps: float = 1e-5, seed: int = 0,
                   cold_factor: float = PerfProtocol.cold_factor,
                   cold_mem_fraction: float = PerfProtocol.cold_mem_fraction, llc_override: int = 0) -> Workload:
    """Inputs and the zero-argument callable for one case; see the module docstring."""
    elem = torch.empty((), dtype=dtype).element_size()
    probe = _inputs(1, m, n, dtype, device, seed)
    w, b = probe["weight"], probe["bias"]
    stats = True
    if op == "fwd":
        stats = backend.forward(probe["x"][0], w, b, eps, store_stats=True)[1] is not None
    work = workspace_bytes(backend, op, m, n, device)
    nbytes = op_bytes(op, m, n, elem, stats=stats, workspace_bytes=work)
    llc, llc_note = llc_bytes(device)
    llc = llc_override or llc
    notes = [] if stats else ["forward returns no stats (not counted)"]
    sets = 1
    if mode == "cold":
        per_set = max(nbytes - 3 * n * elem - work, 1)
        sets, cap_note = cold_sets(per_set, llc, cold_factor, int(cold_mem_fraction * free_memory(device)))
        notes += [f"LLC {llc / MIB:g} MiB" + ("" if llc_override else f" ({llc_note})")] + ([cap_note] if cap_note else [])
    if sets == 1:
        data = probe
    else:
        del probe
        data = _inputs(sets, m, n, dtype, device, seed)
    xs, dys = data["x"], data["dy"]
    w, b = data["weight"], data["bias"]

    if op in FORWARD_OPS:
        keep = op == "fwd"
        call = lambda i: backend.forward(xs[i], w, b, eps, store_stats=keep)  # noqa: E731
    elif op == "bwd":
        saved = []
        for i in range(sets):
            _, mean, rstd = backend.forward(xs[i], w, b, eps, store_stats=True)
            if mean is None or rstd is None:
                raise RuntimeError(f"{backend.name} forward returned no stats: bwd cannot be timed")
            saved.append((mean, rstd))
        call = lambda i: backend.backward(dys[i], xs[i], w, saved[i][0], saved[i][1])  # noqa: E731
    elif op == "fwd+bwd":
        leaves = [xs[i].detach().requires_grad_(True) for i in range(sets)]
        wg, bg = w.detach().requires_grad_(True), b.detach().requires_grad_(True)

        def call(i: int) -> Any:
            with torch.enable_grad():
                y = backend.layernorm(leaves[i], wg, bg, eps)
                return torch.autograd.grad(y, (leaves[i], wg, bg), dys[i])
    else:
        raise ValueError(f"unknown op {op!r}")
    working = sets * (nbytes - work)
    timer = {"wall": "wall", "cold": "held"}.get(mode, "device")
    return Workload(_rotating(call, sets), timer, nbytes, sets, working, llc,
                    "; ".join(notes))
