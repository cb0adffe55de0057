"""How long a verify run will take, before it starts and while it runs (the arithmetic: lnbench.run.eta).

The model, in seconds of one idle core: each unit (a case on a backend) costs a fixed part plus a part per
element of x, per kind of unit (`unit_kind`: EMULATED_COST for FlyDSL kernels on the emulated device, HOST_COST
for a backend on the CPU, GPU_COST on a GPU). A unit on the CPU that finds its case already set up in its process
(inputs, fp64 reference, torch baseline: lnbench.verify.runner.shared_setup, which keeps cases of up to
SETUP_SHARE_ELEMENTS for the next backend) costs only its own run and checks (SHARED_HOST_COST): on the
emulated device the torch unit of a case comes after its FlyDSL units and took 0.01–0.09 s, not the 0.25–0.44 s
of a unit that sets its case up. Each (backend, dtype, N, eps) the FlyDSL kernels meet costs a compile:
COMPILE_S where FlyDSL's disk cache has its kernels, COLD_COMPILE_S where it does not (`compile_seconds`); the
run a start-up (STARTUP_S: imports, the workers' first launch, the first reference). Off the emulated device, a
backend's first unit in the run also carries the backend's first use (`first_use_seconds`: Liger's Triton kernels
loaded or compiled, FIRST_USE_S), which comes mid-run, where that unit runs. The units are spread over
the jobs longest first (eta.makespan) and the whole scaled by how busy the machine is (eta.slowdown). While it
runs, eta.RunningEstimate corrects the model by the wall time the finished units really took.

The constants below are only the first guess (FIRST_GUESS) on a machine that has never run: each finished run
records what its units, compiles and start took (lnbench.run.calibration), and the next run's constants are fitted
from those (VerifyCosts, lnbench.verify.calibrate).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from lnbench.backends import runs_flydsl
from lnbench.run.device import Device
from lnbench.run.eta import RunningEstimate, busy_threads, makespan, slowdown
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
#: the same where FlyDSL's disk cache does not have the kernels (a fresh machine, another FlyDSL, changed kernels):
#: 0.1-0.3 s per kernel against 0.03-0.07 s cached, two to four kernels each (emu:gfx942, 8x64 and 64x1000 f32 in
#: one process, 2-core machine at load 3.5)
COLD_COMPILE_S = 0.4
#: a run's fixed start left once the estimate is printed: the workers' first launch on the emulated device and
#: the first fp64 reference (the workers are forks of the parent, which has imported what they need:
#: lnbench.run.pool; a worker's first unit took 0.6–1.0 s longer than its next ones at a slowdown of 1.5)
STARTUP_S = 0.5
#: the same on a GPU: the device's context and torch's first calls there (an NVIDIA H200: 4-5 s after the estimate
#: line, the first unit 2.2 s of it, on a machine that has never run; December 2026)
GPU_STARTUP_S = 3.0
#: a backend's first unit in a run, off the emulated device, beyond its kind's model: (its caches warm, cold).
#: Liger's first LayerNorm call on an NVIDIA H100 (Triton loading its kernels from its cache, or compiling them in a
#: fresh HOME) took 11 s and 16 s where the other units of its size took a millisecond (December 2026); the live
#: estimate said "~0 s left" through it. Fitted per backend once a run has recorded one (verify.first.BACKEND).
FIRST_USE_S = {"liger": (11.0, 16.0)}
#: the compile cache (lnbench.run.upfront.pending_compiles' names) whose coldness makes a backend's first use cold
FIRST_USE_CACHE = {"liger": "Triton (Liger)", "compile": "Inductor (torch.compile)"}

#: an emulated run in one process (--jobs 1) goes this many times slower per unit than in workers: the parent's
#: torch threads spin while they wait (workers run with OMP_WAIT_POLICY=PASSIVE), measured on 80 units
INLINE_EMULATED = 2.2
#: the estimated wall time above which verify warns before it starts
WARN_S = 180.0
#: cases of at most this many elements are set up once per process and shared by the backends verified on them
#: (lnbench.verify.runner.SETUP_SHARE_ELEMENTS; not imported: that module imports torch and the emulator)
SETUP_SHARE_ELEMENTS = 2 << 20

#: the kinds of unit with a cost of their own (`unit_kind`; each also as KIND.inline: in one process, --jobs 1)
KINDS = ("emulated", "emulated-autograd", "host", "host-shared", "gpu")


@dataclass(frozen=True)
class VerifyCosts:
    """The model's constants on one machine and device, in seconds of one idle core: (fixed, per element) by
    kind of unit (`unit_kind`; a KIND.inline missing here is KIND's × `inline`), a compile warm and cold, the
    start. FIRST_GUESS holds the constants above; lnbench.verify.calibrate fits them from recorded runs."""

    units: dict[str, tuple[float, ...]] = field(default_factory=lambda: {
        "emulated": EMULATED_COST, "emulated-autograd": (EMULATED_COST[0] * EMULATED_AUTOGRAD,
                                                         EMULATED_COST[1] * EMULATED_AUTOGRAD),
        "host": HOST_COST, "host-shared": SHARED_HOST_COST, "gpu": GPU_COST})
    compile_s: float = COMPILE_S
    cold_compile_s: float = COLD_COMPILE_S
    startup_s: float = STARTUP_S
    inline: float = INLINE_EMULATED
    #: the start of a run with FlyDSL compiles pending (its workers' first units in a fresh HOME); < 0: none
    #: recorded, startup_s
    cold_startup_s: float = -1.0
    #: an emulated unit's seconds on a backend over those of the kind's fit (flydsl-atomic's took half flydsl's)
    backends: dict[str, float] = field(default_factory=dict)
    #: by kind, the sizes recorded often enough (elements, the median seconds of their units): a unit of such a
    #: size costs that, any other the kind's fit (`sized`)
    sizes: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    #: a backend's first use (its first unit beyond its kind), by backend and by "BACKEND.cold" (fitted; else
    #: FIRST_USE_S)
    first_use: dict[str, float] = field(default_factory=dict)

    def first_use_s(self, backend: str, cold: bool) -> float:
        """Seconds a backend's first unit carries beyond its kind (recorded here, else FIRST_USE_S, else 0)."""
        name = f"{backend}.cold" if cold else backend
        if name in self.first_use:
            return self.first_use[name]
        return FIRST_USE_S.get(backend, (0.0, 0.0))[int(cold)]

    def start(self, cold: bool) -> float:
        """The run's start: cold_startup_s where compiles are pending and one is recorded, else startup_s."""
        return self.cold_startup_s if cold and self.cold_startup_s >= 0 else self.startup_s

    def sized(self, kind: str, elements: float, fitted: float) -> float:
        """A unit's seconds: the median of its kind's recorded units of its size (`sizes`), else `fitted` (the
        kind's fit). The emulated units do not grow smoothly with their elements (on the 2-core machine 37x2000
        took 0.36-0.75 s, 64x256 0.24-0.29 s, 96x384 0.27 s and 128x8192 0.5-1.0 s), and a run's sizes are mostly
        ones it ran before; a size between two recorded ones is not on the line between them (96x384 took half
        what the line from 64x256 to 37x2000 says), so it takes the smooth fit."""
        known = dict(self.sizes.get(kind, ()))
        if not known and kind.endswith(".inline"):
            known = {x: seconds * self.inline for x, seconds in self.sizes.get(kind.removesuffix(".inline"), ())}
        return known.get(elements, fitted) if fitted > 0 else fitted

    def unit(self, kind: str) -> tuple[float, float, float]:
        """(fixed, per element, per √element) of a unit of `kind` (a cost given as (fixed, per element) has no
        part per √element)."""
        if kind in self.units:
            fixed, per_element, *root = self.units[kind]
            return fixed, per_element, (root or [0.0])[0]
        fixed, per_element, per_root = self.unit(kind.removesuffix(".inline"))
        return fixed * self.inline, per_element * self.inline, per_root * self.inline

    def backend(self, backend: str, kind: str) -> float:
        """What a unit of `kind` on `backend` costs over the kind's fit (emulated units only; 1 elsewhere)."""
        return self.backends.get(backend, 1.0) if kind.startswith("emulated") else 1.0


FIRST_GUESS = VerifyCosts()


def unit_kind(backend: str, case: Case, device: Device, inline: bool = False, set_up: bool = False) -> str:
    """Which cost a unit has: `emulated` (FlyDSL kernels on the emulated device; `emulated-autograd` for an
    autograd-3d case, forward and backward once), `gpu`, `host` (a backend on the CPU setting its case up) or
    `host-shared` (its case set up by an earlier backend in the same process); `.inline` after it for a unit of
    an emulated run in this process (`inline`)."""
    if device.emulated and runs_flydsl(backend):
        kind = "emulated-autograd" if case.kind == "autograd-3d" else "emulated"
    elif device.torch_device.type == "cuda":
        kind = "gpu"
    else:
        kind = "host-shared" if set_up else "host"
    return f"{kind}.inline" if inline and device.emulated else kind


def unit_seconds(backend: str, case: Case, device: Device, inline: bool = False, set_up: bool = False,
                 costs: VerifyCosts = FIRST_GUESS) -> float:
    """Modelled seconds of one case on one backend, on one idle core (its kernels' compile not included);
    `inline`: the run is in this process, not in workers; `set_up`: another backend has set the case up in the
    same process (a unit on the CPU is cheaper for it)."""
    kind = unit_kind(backend, case, device, inline, set_up)
    fixed, per_element, per_root = costs.unit(kind)
    elements = case.rows * case.n
    fitted = fixed + per_element * elements + per_root * math.sqrt(elements)
    return costs.sized(kind, elements, fitted) * costs.backend(backend, kind)


def shared_units(units: list[tuple[str, Case]]) -> list[bool]:
    """Whether each unit finds its case set up: a unit before it had the same case and the case is small enough
    to be kept (SETUP_SHARE_ELEMENTS): verify's workers keep to the row widths they have, so a case's units
    mostly meet in one worker."""
    seen: set[Case] = set()
    shared = []
    for _, case in units:
        shared.append(case in seen and case.rows * case.n <= SETUP_SHARE_ELEMENTS)
        seen.add(case)
    return shared


def unit_costs(units: list[tuple[str, Case]], device: Device, inline: bool = False,
               costs: VerifyCosts = FIRST_GUESS) -> dict[int, float]:
    """Modelled seconds of each unit of a run (index -> seconds; `units` in index order, backend by backend)."""
    return {index: unit_seconds(backend, case, device, inline, shared, costs)
            for index, ((backend, case), shared) in enumerate(zip(units, shared_units(units)))}


def first_units(units: list[tuple[str, Case]]) -> dict[int, str]:
    """The index of each backend's first unit but the run's own first (unit index -> backend): what the run's first
    unit carries beyond its kind (the device's context, torch's first calls, its backend's first use) is the run's
    start (VerifyCosts.startup_s)."""
    first: dict[str, int] = {}
    for index, (backend, _) in enumerate(units):
        first.setdefault(backend, index)
    return {index: backend for backend, index in first.items() if index > 0}


def first_use_seconds(units: list[tuple[str, Case]], device: Device, pending: tuple[str, ...] = (),
                      costs: VerifyCosts = FIRST_GUESS) -> dict[int, float]:
    """What each backend's first unit carries beyond its kind, off the emulated device (unit index -> seconds;
    there FlyDSL's compiles are modelled apart): cold where its compile cache is among `pending`."""
    if device.emulated:
        return {}
    costs_of = {index: costs.first_use_s(backend, FIRST_USE_CACHE.get(backend, "") in pending)
                for index, backend in first_units(units).items()}
    return {index: seconds for index, seconds in costs_of.items() if seconds > 0}


def compile_key(backend: str, case: Case, device: Device) -> str:
    """What one compile is of: the FlyDSL kernels of a backend for a dtype, N and eps on an arch."""
    return f"{backend} {device.arch} {case.dtype} {case.n} {case.eps:g}"


def compile_keys(units: list[tuple[str, Case]], device: Device) -> set[str]:
    """The compiles a run on the emulated device makes (one per backend, dtype, N, eps)."""
    if not device.emulated:
        return set()
    return {compile_key(b, c, device) for b, c in units if runs_flydsl(b)}


def compile_seconds(units: list[tuple[str, Case]], device: Device, costs: VerifyCosts = FIRST_GUESS,
                    warm: set[str] | frozenset[str] = frozenset()) -> float:
    """Modelled seconds of the FlyDSL compiles a run on the emulated device makes: those of `warm` (FlyDSL's
    disk cache has their kernels) at costs.compile_s, the others at costs.cold_compile_s."""
    keys = compile_keys(units, device)
    return costs.compile_s * len(keys & set(warm)) + costs.cold_compile_s * len(keys - set(warm))


def compile_shares(units: list[tuple[str, Case]], device: Device, costs: VerifyCosts = FIRST_GUESS,
                   warm: set[str] | frozenset[str] = frozenset()) -> dict[int, float]:
    """compile_seconds spread over the units that need each compile (unit index -> seconds): a compile happens
    when a worker first meets its (backend, dtype, N, eps), all through the run, not at its start (counted as
    start-up, a cold run's compiles made the time left 4× short once its largest units were done)."""
    keys = {i: compile_key(b, c, device) for i, (b, c) in enumerate(units) if device.emulated and runs_flydsl(b)}
    count: dict[str, int] = {}
    for key in keys.values():
        count[key] = count.get(key, 0) + 1
    return {i: (costs.compile_s if key in warm else costs.cold_compile_s) / count[key] for i, key in keys.items()}


class Estimate:
    """Wall time of a run of units with modelled costs, before it starts (`wall_s`) and while it runs
    (`remaining_s`, after each `finished(unit)`)."""

    def __init__(self, costs: dict[int, float], jobs: int, compile_s: float = 0.0, others: float | None = None,
                 cpus: int | None = None, startup_s: float = STARTUP_S) -> None:
        self.costs, self.jobs = costs, max(1, jobs)
        self.others = busy_threads() if others is None else others
        self.scale = slowdown(self.jobs, self.others, cpus)
        self.fixed = (startup_s + compile_s / self.jobs) * self.scale
        self.wall_s = self.fixed + makespan(costs.values(), self.jobs) * self.scale
        self.done_cost = 0.0
        self.left = dict(costs)
        self.running = RunningEstimate(self.wall_s, in_flight_s=self.fixed + self.in_flight_s())

    def in_flight_s(self) -> float:
        """Modelled wall seconds of the units running now: the largest left, one per job (handed out longest
        first), over the jobs."""
        return sum(heapq.nlargest(self.jobs, self.left.values())) / self.jobs * self.scale

    def finished(self, unit: int) -> None:
        self.done_cost += self.costs.get(unit, 0.0)
        self.left.pop(unit, None)
        self.running.done(self.fixed + self.done_cost / self.jobs * self.scale, self.in_flight_s())

    def remaining_s(self) -> float:
        return self.running.remaining_s()
