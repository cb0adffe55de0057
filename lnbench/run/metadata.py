"""The identity of a run every result records (its run record's identity section): the command line, versions
(lnbench, torch, FlyDSL, GPU runtime, driver), device, git commit, timestamp."""
from __future__ import annotations

import importlib.metadata
from typing import Any, TypeVar

import torch

from lnbench.version import __version__
from lnbench.run.device import Device, torch_device_info
from lnbench.results import IdentifiedRun, Kind
from lnbench.machine.checkout import command_line, git_commit, timestamp

#: the run record class of the kind a run record is made for
RunT = TypeVar("RunT", bound=IdentifiedRun)


def package_version(name: str) -> str:
    """Installed version of a distribution, or 'not installed' (never imports it)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def device_name(device: torch.device) -> str:
    """Human name of a torch device ('cpu (x86_64)', 'NVIDIA H200', 'AMD Instinct MI300X')."""
    return torch_device_info(device).label


def gpu_runtime() -> str:
    """'hip X', 'cuda X' or 'cpu-only' for the torch build in use."""
    if torch.version.hip is not None:
        return f"hip {torch.version.hip}"
    if torch.version.cuda is not None:
        return f"cuda {torch.version.cuda}"
    return "cpu-only"


def driver_version(device: Device) -> str:
    """The GPU driver's version as the vendor tool reports it (amd-smi, nvidia-smi), or `n/a (no GPU)`."""
    if device.torch_device.type != "cuda":
        return "n/a (no GPU)"
    from lnbench.run import clocks
    return str(clocks.gpu_facts(device.torch_device).get("driver", ""))


def provenance(device: Device, kind: Kind[Any, RunT], command: str | None = None) -> RunT:
    """A run record of `kind` with the run's identity set: command line, versions, device, commit, time, threads
    (`device` says emu:gfx942 for emulated runs). `command`: the lnbench command named in the record."""
    run = kind.run(command_line=command_line(), lnbench_version=__version__, torch_version=torch.__version__,
                   flydsl_version=package_version("flydsl"), gpu_runtime=gpu_runtime(),
                   driver=driver_version(device), device=device.name, device_name=device.label,
                   device_arch=device.arch, git_commit=git_commit(), timestamp=timestamp(),
                   # CPU timings depend on it (torch's intra-op threads; OMP_NUM_THREADS sets it, workers inherit it)
                   torch_threads=torch.get_num_threads())
    if device.emulated:
        run.emu_checks = emu_checks()
    if command:
        run.lnbench_command = command
    return run


def emu_checks() -> str:
    """The sanitizer checks emulated launches run in this process ('memory,lds,waitcnt,initcheck,race')."""
    from lnbench.emu import checks, runtime
    return checks.canonical(runtime.active_checks())
