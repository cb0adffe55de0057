"""How long a verify run will take, before it starts and while it runs (the arithmetic: lnbench.eta).

The model, in seconds of one idle core: each unit (a case on a backend) costs a fixed part plus a part per
element of x, per backend kind (EMULATED_COST for FlyDSL kernels on the emulated device, HOST_COST for a
backend on the CPU, GPU_COST on a GPU). A unit on the CPU that finds its case already set up in its process
(inputs, fp64 reference, torch baseline: lnbench.verify.runner.shared_setup, which keeps cases of up to
SETUP_SHARE_ELEMENTS for the next backend) costs only its own run and checks (SHARED_HOST_COST): on the
emulated device the torch unit of a case comes after its FlyDSL units and took 0.01–0.09 s, not the 0.25–0.44 s
of a unit that sets its case up. Each (backend, dtype, N, eps) the FlyDSL kernels meet costs a compile
(COMPILE_S), the run a start-up (STARTUP_S: imports, the workers' first launch, the first reference). The units
are spread over the jobs longest first (eta.makespan) and the whole scaled by how busy the machine is
(eta.slowdown). While it runs, eta.RunningEstimate corrects the model by the wall time the finished units
really took.
"""
from __future__ import annotations

from lnbench.backends import runs_flydsl
from lnbench.device import Device
from lnbench.eta import RunningEstimate, busy_threads, makespan, slowdown
from lnbench.verify import prestart
from lnbench.verify.cases import Case

#: (seconds per unit, seconds per element of x) of a FlyDSL verify case on the emulated device (forward,
#: backward twice) on one idle core of the 2-core x86-64 development machine: wall times of units from 8x64 to
#: 4096x8192 divided by the machine's slowdown when they ran (eta.slowdown), December 2026; the table of runs is
#: in docs/running.md
EMULATED_COST = (0.06, 5.0e-7)
#: an autograd-3d case on the emulated device (forward and backward once) costs this share of a 2-D case of its
#: size: 0.34–0.42 s against 0.52–0.60 s at 256x4096, 0.67–0.85 s against 0.80–1.29 s at 1024x2048
EMULATED_AUTOGRAD = 0.7
#: the same for torch (and any backend) on the CPU: its case's set-up (inputs, fp64 reference, torch baseline), its
#: run and the checks: 1.6–2.2 s at 2048x8192 and 3.8–4.0 s at 4096x8192, 1 ms at 3x7 (load 2.9, December 2026)
HOST_COST = (0.01, 1.2e-7)
#: a unit on the CPU whose case another backend has set up in the same process: its own run and checks alone
#: (torch after the FlyDSL kernels on the emulated device: 0.01–0.09 s at 1–2 M elements)
SHARED_HOST_COST = (0.01, 1.5e-8)
#: the same on a GPU (inputs and the fp64 reference on the GPU; not calibrated on this machine)
GPU_COST = (0.05, 2.0e-9)
#: compiling the FlyDSL kernels of one (backend, dtype, N, eps) for the emulated device, in each worker (the
#: first unit of a new one took 0.06 s (8x64) to 0.3 s (1024x2048) longer than the next, FlyDSL's disk cache warm)
COMPILE_S = 0.1
#: a run's fixed start left once the estimate is printed: the workers' imports (started early, beside the
#: parent's: lnbench.verify.prestart), their first launch on the emulated device, the first fp64 reference (a
#: worker's first unit took 0.6–1.0 s longer than its next ones at a slowdown of 1.5)
STARTUP_S = 0.5
#: an emulated run in one process (--jobs 1) goes this many times slower per unit than in workers: the parent's
#: torch threads spin while they wait (workers run with OMP_WAIT_POLICY=PASSIVE), measured on 80 units
INLINE_EMULATED = 2.2
#: the estimated wall time above which verify warns before it starts
WARN_S = 180.0
#: cases of at most this many elements are set up once per process and shared by the backends verified on them
#: (lnbench.verify.runner.SETUP_SHARE_ELEMENTS; not imported: that module imports torch and the emulator)
SETUP_SHARE_ELEMENTS = 2 << 20


def unit_seconds(backend: str, case: Case, device: Device, inline: bool = False, set_up: bool = False) -> float:
    """Modelled seconds of one case on one backend, on one idle core (its kernels' compile not included);
    `inline`: the run is in this process, not in workers; `set_up`: another backend has set the case up in the
    same process (a unit on the CPU is cheaper for it)."""
    emulated = device.emulated and runs_flydsl(backend)
    if emulated:
        fixed, per_element = EMULATED_COST
    elif device.torch_device.type == "cuda":
        fixed, per_element = GPU_COST
    else:
        fixed, per_element = SHARED_HOST_COST if set_up else HOST_COST
    seconds = fixed + per_element * case.rows * case.n
    if emulated and case.kind == "autograd-3d":
        seconds *= EMULATED_AUTOGRAD
    return seconds * (INLINE_EMULATED if inline and device.emulated else 1.0)


def unit_costs(units: list[tuple[str, Case]], device: Device, inline: bool = False) -> dict[int, float]:
    """Modelled seconds of each unit of a run (index -> seconds; `units` in index order, backend by backend). A
    unit finds its case set up when a unit before it had the same case and the case is small enough to be kept
    (SETUP_SHARE_ELEMENTS): verify's workers keep to the row widths they have, so a case's units mostly meet in
    one worker."""
    seen: set[Case] = set()
    costs = {}
    for index, (backend, case) in enumerate(units):
        shared = case in seen and case.rows * case.n <= SETUP_SHARE_ELEMENTS
        costs[index] = unit_seconds(backend, case, device, inline, set_up=shared)
        seen.add(case)
    return costs


def compile_seconds(units: list[tuple[str, Case]], device: Device) -> float:
    """Modelled seconds of the FlyDSL compiles a run on the emulated device makes (one per backend, dtype, N, eps)."""
    if not device.emulated:
        return 0.0
    return COMPILE_S * len({(b, c.dtype, c.n, c.eps) for b, c in units if runs_flydsl(b)})


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
