"""The plan of one `lnbench verify`: options and config checked once, the device, backends and cases chosen."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from lnbench import settings as cfg
from lnbench import validate
from lnbench.backends import backend_names, probe_backend, record_sources, requested_names
from lnbench.cli_common import SharedOptions, apply_emu_checks
from lnbench.run.device import Device, resolve_kernel_device
from lnbench.errors import LnbenchUsageError
from lnbench.run.gpus import parse_devices, record_devices
from lnbench.run.metadata import provenance
from lnbench.results import SELFTEST, VERIFY, SelftestRun, VerifyRun
from lnbench.scaffold.setup import begin
from lnbench.run.shard import WHOLE, parse_shard, record_shard
from lnbench.verify.cases import build_cases, check_eps_values
from lnbench.backends.tolerance import Tolerance

#: memory estimate per element of a verify shape: x, dy and every output in up to 4 bytes, and the fp64 autograd
#: reference (x, dy, y, x-hat, dx and temporaries in 8 bytes)
VERIFY_BYTES_PER_ELEMENT = 96

#: what `auto` verifies on the emulated device: every FlyDSL variant, and torch on the same inputs
EMULATED_AUTO: tuple[str, ...] = ("flydsl", "flydsl-tensor", "flydsl-atomic", "torch")


def choose_backends(requested: list[str], device: Device) -> tuple[list[str], str]:
    """Backend names to verify (`auto` expanded where it stands, repeats dropped) and a banner (non-empty when
    `auto` had to fall back or runs emulated). `requested` is already checked (validate.choices)."""
    out: list[str] = []
    banner = ""
    for name in requested:
        expanded = [name]
        if name == "auto":
            expanded, banner = _auto_backends(device)
        out.extend(item for item in expanded if item not in out)
    return out, banner


def _auto_backends(device: Device) -> tuple[list[str], str]:
    """What `auto` verifies on `device`, and the banner saying so where that is not the FlyDSL kernels alone."""
    if device.emulated:
        return list(EMULATED_AUTO), (f"Emulated device {device.name}: the FlyDSL kernels run on an instruction-set "
                               f"emulator on the CPU; results check correctness only.")
    if device.executes_flydsl:
        return ["flydsl"], ""
    runnable = []
    for name in backend_names():
        backend, avail = probe_backend(name, device)
        if backend is not None and avail.runnable and {"fwd", "bwd"} <= set(backend.ops):
            runnable.append(name)
    banner = (f"No ROCm GPU: the FlyDSL kernels cannot execute here, so `auto` verifies every runnable "
              f"backend instead ({', '.join(runnable)}). `--backend flydsl` compiles its kernels without running "
              f"them; `--device emu` runs them on the emulator.")
    return runnable, banner


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)



@dataclass
class VerifyPlan:
    """A verify run after its checks: what runs where, with which bar, and where its rows go."""
    self_test: bool
    tol: Tolerance
    shapes: list[tuple[int, int]]
    cases: list[Any]
    dev: Device
    slots: list[Any] | None
    job_count: int
    checks_line: str | None
    outputs: tuple[Path | None, Path | None, Path | None]
    metadata: VerifyRun | SelftestRun
    names: list[str]
    explicit: list[str]
    banner: str


@dataclass(frozen=True)
class VerifyOptions(SharedOptions):
    """`lnbench verify`'s options as given (None or empty: left out, the config's value applies): the shared ones
    (cli_common.SharedOptions) and its own; --details and --quiet are the run's, not the plan's."""

    backends: tuple[str, ...] = ("auto",)
    self_test: bool = False
    jobs: int | None = None

def build_plan(o: VerifyOptions) -> VerifyPlan:
    """Check every option against the config once (exit 2 on bad input) and reserve the outputs."""
    self_test, device, jobs = o.self_test, o.device, o.jobs
    setup = begin("selftest" if self_test else "verify", o.config_path, "verify")
    config, table = setup.config, setup.table
    tol = Tolerance.from_config(table)
    dtype_list = cfg.parse_dtypes(o.dtypes, cfg.require(table, "dtypes", list, "verify"))
    shape_list = cfg.chosen_shapes(config, "verify", o.shapes, o.shape_set)
    setup.use_kernel_src(o.kernel_src)
    requested = requested_names(o.backends, ["auto"])
    if self_test and click.get_current_context().get_parameter_source("backends") != click.core.ParameterSource.DEFAULT:
        raise LnbenchUsageError("--self-test checks planted bugs in a copy of the reference math, not a backend: "
                                "drop --backend")
    eps_values = [validate.eps(e, "config [verify] eps") for e in cfg.require(table, "eps", list, "verify")]
    check_eps_values(eps_values)   # before any output is prepared
    base_seed = cfg.option_or_config(o.seed, table, "seed", "--seed", int, "verify", validate.seed)
    job_count = usable_cores() if jobs is None else validate.number(jobs, "jobs", "--jobs")
    part = parse_shard(o.shard)
    if self_test and part != WHOLE:
        raise LnbenchUsageError("--self-test judges each planted bug over every case (and merge joins no self-test "
                                "parts): drop --shard")
    slots = parse_devices(o.devices, o.force)
    if slots and device is not None:
        raise LnbenchUsageError("--device and --devices both choose where to run: give one")
    if slots and jobs is not None:
        raise LnbenchUsageError("--jobs sets the emulated device's workers; with --devices each GPU has one")
    dev = resolve_kernel_device(slots[0].process_device if slots else device)
    checks_line = apply_emu_checks(o.emu_checks) if dev.emulated else None
    if o.emu_checks is not None and not dev.emulated:
        raise LnbenchUsageError(f"--emu-checks applies to the emulated device; this run is on {dev.name}")
    if dev.is_null:
        raise LnbenchUsageError(f"verify checks values, and the null device {dev.name} executes nothing: use "
                                f"--device emu (or emu:gfx950) for the FlyDSL kernels")
    setup.fit(shape_list, VERIFY_BYTES_PER_ELEMENT, dev, "verify (inputs, outputs, fp64 reference)")
    every_case = build_cases(shape_list, dtype_list, eps_values, base_seed)
    cases = part.part(every_case, "case(s)")
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path)
    metadata: VerifyRun | SelftestRun = provenance(dev, SELFTEST) if self_test else provenance(dev, VERIFY)
    metadata.seed = base_seed
    record_devices(record_shard(metadata, part, len(every_case)), slots)
    names: list[str]
    names, banner, explicit = [], "", []
    if not self_test:
        names, banner = choose_backends(requested, dev)
        explicit = [name for name in requested if name != "auto"]
        setup.check_kernels(names, shape_list, dtype_list)  # FlyDSL's toolkit, lnbench's kernels' known limits
        record_sources(metadata, names)
    return VerifyPlan(self_test, tol, shape_list, cases, dev, slots, job_count, checks_line, outputs, metadata, names,
                      explicit, banner)
