"""Perf cases (backend × op × dtype × shape × mode) and the per-worker order (backend order rotated)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lnbench import validate
from lnbench.backends import get_backend
from lnbench.run.device import Device
from lnbench.results import PerfRow


@dataclass(frozen=True)
class PerfCase:
    """One timed case. `skip` is the reason it is not run ('' = run it)."""

    id: int
    backend: str
    op: str
    dtype: str
    m: int
    n: int
    mode: str
    eps: float
    seed: int
    skip: str = ""

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}"

    def row(self, **cells: Any) -> PerfRow:
        """A row of this case: its identity columns, and `cells`."""
        return PerfRow(backend=self.backend, op=self.op, dtype=self.dtype, shape=self.shape, M=self.m, N=self.n,
                       mode=self.mode, **cells)


def backend_skips(names: list[str], device: Device) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (reason it cannot run here or '', ops it supports). Never raises for a broken backend."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name in names:
        try:
            backend = get_backend(name)
            avail = backend.availability(device)
            out[name] = ("" if avail.runnable else (avail.reason or "not runnable here"), tuple(backend.ops))
        except Exception as exc:  # noqa: BLE001 - an optional backend that fails to import is "not run"
            out[name] = (f"cannot load: {type(exc).__name__}: {exc}".splitlines()[0], ())
    return out


def build_cases(backends: list[str], ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]],
                modes: list[str], eps: float, seed: int,
                skips: dict[str, tuple[str, tuple[str, ...]]]) -> list[PerfCase]:
    """Every combination, backend-major; cases a backend cannot run carry their reason in `skip`."""
    cases: list[PerfCase] = []
    for backend in backends:
        reason, supported = skips.get(backend, ("", ()))
        for op in ops:
            for dtype in dtypes:
                for m, n in shapes:
                    for mode in modes:
                        skip = reason or ("" if op in supported else f"{backend} has no {op} op")
                        cases.append(PerfCase(len(cases), backend, op, dtype, m, n, mode, eps,
                                              validate.derived_seed(seed, 7919 * (m * 31 + n)), skip))
    return cases


def worker_order(cases: list[PerfCase], backends: list[str], worker: int) -> list[PerfCase]:
    """Runnable cases for worker `worker`: backend order rotated by the worker index, so no backend
    always goes first; within a backend the case order is kept."""
    if not backends:
        return []
    shift = worker % len(backends)
    order = backends[shift:] + backends[:shift]
    return [c for name in order for c in cases if c.backend == name and not c.skip]
