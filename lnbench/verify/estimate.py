"""How long a verify run will take, before it starts and while it runs.

Before: each unit (a case on a backend) costs a fixed part plus a part per element of x, measured per backend
kind (EMULATED_COST for the FlyDSL kernels on the emulated device, HOST_COST for a backend running on the host
or a GPU). While the run goes on, the estimate is refined: the wall time so far divided by the estimated
seconds of the units finished so far scales what is left (the measured speed of this machine, its load and the
number of jobs included).
"""
from __future__ import annotations

import time

from lnbench.device import Device
from lnbench.verify.cases import Case

#: (seconds per unit, seconds per element of x) of a FlyDSL verify case on the emulated device (forward,
#: backward twice; autograd-3d: forward and backward once) on one core of an x86-64 host: fitted to the main job
#: (`verify --dtype bf16`, ~80 s on an idle 2-core machine) and a 4096x4096 case (~65 s) with the emulator of
#: November 2026. A faster emulator or machine only makes the first estimate high: the run refines it.
EMULATED_COST = (0.25, 4.0e-6)
#: the same for torch (and any backend running on the host or a GPU): fp64 reference and checks included
HOST_COST = (0.01, 3.0e-7)
#: the estimated wall time above which verify warns before it starts
WARN_S = 180.0


def unit_seconds(backend: str, case: Case, device: Device) -> float:
    """Estimated seconds of one case on one backend, on one core."""
    fixed, per_element = EMULATED_COST if device.emulated and backend.startswith("flydsl") else HOST_COST
    elements = case.rows * case.n
    return fixed + per_element * elements


class Estimate:
    """Remaining time of a run of units with estimated costs, refined as units finish."""

    def __init__(self, costs: dict[int, float], jobs: int) -> None:
        self.costs, self.jobs = costs, max(1, jobs)
        self.total = sum(costs.values())
        self.done_cost = 0.0
        self.start = time.monotonic()

    @property
    def wall_s(self) -> float:
        """The estimated wall time of the whole run before any unit finished."""
        return self.total / self.jobs

    def finished(self, unit: int) -> None:
        self.done_cost += self.costs.get(unit, 0.0)

    def remaining_s(self) -> float:
        left = max(0.0, self.total - self.done_cost)
        elapsed = time.monotonic() - self.start
        if self.done_cost <= 0 or elapsed <= 0:
            return max(0.0, self.wall_s - elapsed)
        return left * elapsed / self.done_cost
