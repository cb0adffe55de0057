"""The identity of a run every result records (its run record's identity section): the command line, versions
(lnbench, torch, FlyDSL, GPU runtime, driver), device, git commit, timestamp."""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import importlib.metadata
import os
import subprocess
from pathlib import Path

import torch

import lnbench
from lnbench.device import Device, torch_device_info
from lnbench.results import Kind, RunRecord
from lnbench.processes import command_line  # noqa: F401 - part of this module's interface (compare.plan)


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


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """Short commit of the lnbench checkout, with `-dirty` when tracked files differ from it (a result from
    uncommitted code says so), or '' when it is not a git checkout."""
    return git_commit_of(Path(lnbench.__file__).parent)


def git_commit_of(folder: Path) -> str:
    """Short commit of the git checkout holding `folder`, `-dirty` when its tracked files differ; '' outside git
    (lnbench's own, or a kernel source's checkout), and '' when that checkout tracks nothing in `folder`: a copy
    installed into a virtual environment inside some other repository is not that repository's code."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if not commit or not git("ls-files", "--", "."):
        return ""
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def content_hash(folder: Path) -> str:
    """`content:<12 hex>`: sha256 of every .py file under `folder` (relative path and bytes, in path order; hidden
    folders and __pycache__ left out), naming a source tree that has no git checkout (a `git archive` export)."""
    digest = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        files += [Path(root, name) for name in names if name.endswith(".py")]
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + data + b"\0")
    return f"content:{digest.hexdigest()[:12]}"


def driver_version(device: Device) -> str:
    """The GPU driver's version as the vendor tool reports it (amd-smi, nvidia-smi), or `n/a (no GPU)`."""
    if device.torch_device.type != "cuda":
        return "n/a (no GPU)"
    from lnbench import clocks
    return str(clocks.gpu_facts(device.torch_device).get("driver", ""))


def timestamp() -> str:
    """UTC timestamp in ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def provenance(device: Device, kind: Kind, command: str | None = None) -> RunRecord:
    """A run record of `kind` with the run's identity set: command line, versions, device, commit, time, threads
    (`device` says emu:gfx942 for emulated runs). `command`: the lnbench command named in the record."""
    run = kind.run(command_line=command_line(), lnbench_version=lnbench.__version__, torch_version=torch.__version__,
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
