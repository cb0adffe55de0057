"""How long a verify run will take, before it starts and while it runs (the arithmetic: lnbench.eta).

The model, in seconds of one idle core: each unit (a case on a backend) costs a fixed part plus a part per
element of x, per backend kind (EMULATED_COST for FlyDSL kernels on the emulated device, HOST_COST for a
backend on the CPU, GPU_COST on a GPU); each (backend, dtype, N, eps) the FlyDSL kernels meet costs a compile
(COMPILE_S); the run costs a start-up (STARTUP_S: imports, workers, the first reference). The units are spread
over the jobs longest first (eta.makespan) and the whole scaled by how busy the machine is (eta.slowdown). While it
runs, eta.RunningEstimate corrects the model by the wall time the finished units really took.
"""
from __future__ import annotations

from lnbench.device import Device
from lnbench.eta import RunningEstimate, busy_threads, makespan, slowdown
from lnbench.verify import prestart
from lnbench.verify.cases import Case

#: (seconds per unit, seconds per element of x) of a FlyDSL verify case on the emulated device (forward,
#: backward twice; autograd-3d: forward and backward once) on one idle core of the 2-core x86-64 development
#: machine: wall times of units from 8x64 to 4096x8192 divided by the machine's slowdown when they ran (eta.slowdown),
#: December 2026; the table of runs is in docs/running.md
EMULATED_COST = (0.06, 5.0e-7)
#: the same for torch (and any backend) on the CPU: fp64 reference and checks included
HOST_COST = (0.06, 1.8e-7)
#: the same on a GPU (inputs and the fp64 reference on the GPU; not calibrated on this machine)
GPU_COST = (0.05, 2.0e-9)
#: compiling the FlyDSL kernels of one (backend, dtype, N, eps) for the emulated device, in each worker
COMPILE_S = 0.1
#: a run's fixed start left once the estimate is printed: the workers' imports (started early, beside the
#: parent's: lnbench.verify.prestart), the first fp64 reference
STARTUP_S = 0.5
#: an emulated run in one process (--jobs 1) goes this many times slower per unit than in workers: the parent's
#: torch threads spin while they wait (workers run with OMP_WAIT_POLICY=PASSIVE), measured on 80 units
INLINE_EMULATED = 2.2
#: the estimated wall time above which verify warns before it starts
WARN_S = 180.0


def unit_seconds(backend: str, case: Case, device: Device, inline: bool = False) -> float:
    """Modelled seconds of one case on one backend, on one idle core (its kernels' compile not included);
    `inline`: the run is in this process, not in workers."""
    if device.emulated and backend.startswith("flydsl"):
        fixed, per_element = EMULATED_COST
    else:
        fixed, per_element = GPU_COST if device.torch_device.type == "cuda" else HOST_COST
    return (fixed + per_element * case.rows * case.n) * (INLINE_EMULATED if inline and device.emulated else 1.0)


def compile_seconds(units: list[tuple[str, Case]], device: Device) -> float:
    """Modelled seconds of the FlyDSL compiles a run on the emulated device makes (one per backend, dtype, N, eps)."""
    if not device.emulated:
        return 0.0
    return COMPILE_S * len({(b, c.dtype, c.n, c.eps) for b, c in units if b.startswith("flydsl")})


class Estimate:
    """Wall time of a run of units with modelled costs, before it starts (`wall_s`) and while it runs
    (`remaining_s`, after each `finished(unit)`)."""

    def __init__(self, costs: dict[int, float], jobs: int, compile_s: float = 0.0, others: float | None = None,
                 cpus: int | None = None) -> None:
        self.costs, self.jobs = costs, max(1, jobs)
        self.others = busy_threads(prestart.pids()) if others is None else others    # not its own early workers
        self.scale = slowdown(self.jobs, self.others, cpus)
        self.fixed = (STARTUP_S + compile_s / self.jobs) * self.scale
        self.wall_s = self.fixed + makespan(costs.values(), self.jobs) * self.scale
        self.done_cost = 0.0
        self.running = RunningEstimate(self.wall_s)

    def finished(self, unit: int) -> None:
        self.done_cost += self.costs.get(unit, 0.0)
        self.running.done(self.fixed + self.done_cost / self.jobs * self.scale)

    def remaining_s(self) -> float:
        return self.running.remaining_s()
