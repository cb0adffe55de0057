"""Facts about this machine for `lnbench env`: devices, torch build, emulator, backends, FlyDSL toolkit."""
from __future__ import annotations

import platform
from typing import Any

import torch

from lnbench.version import __version__
from lnbench.backends import backend_names, probe_backend
from lnbench.constants import ARCHES
from lnbench.run.device import Device, emu_device, emulator_status, torch_device_info
from lnbench.run.metadata import gpu_runtime, package_version
from lnbench.machine.rocm import has_rocm_gpu


def _device_row(dev: Device) -> dict[str, Any]:
    return {"device": dev.name, "name": dev.label, "arch": dev.arch}


def device_facts() -> list[dict[str, Any]]:
    """One row per device lnbench can use: the CPU always, each GPU torch sees, the emulated arches."""
    rows = [_device_row(torch_device_info(torch.device("cpu")))]
    if torch.cuda.is_available():
        rows += [_device_row(torch_device_info(torch.device("cuda", i))) for i in range(torch.cuda.device_count())]
    if emulator_status()[0]:
        rows += [_device_row(emu_device(arch)) for arch in ARCHES]
    return rows


def backend_facts(device: Device) -> list[dict[str, Any]]:
    """Every registered backend with its availability on `device` and the reason when it cannot run."""
    rows = []
    for name in backend_names():
        backend, avail = probe_backend(name, device)
        status = "runnable" if avail.runnable else ("compile-only" if avail.can_compile else "unavailable")
        rows.append({"backend": name, "status": status, "reason": avail.reason,
                     "description": backend.description if backend else "",
                     "ops": ",".join(backend.ops) if backend else ""})
    return rows


def toolkit_fact() -> str:
    """Which linker toolkit FlyDSL compiles with (ROCm install, the pip-only ziglang route, or none)."""
    try:
        from lnbench.flydsl.toolkit import describe
        return describe()
    except Exception as exc:  # the toolkit probe must never break `lnbench env`
        return f"unknown ({type(exc).__name__}: {exc})"


def emulator_fact() -> str:
    """Whether the emulated device (--device emu) can run here, and what it is."""
    ok, reason = emulator_status()
    if not ok:
        return f"unavailable ({reason})"
    try:
        from lnbench.emu import runtime
        return runtime.describe()
    except Exception:  # noqa: BLE001 - the description is a nicety; availability is what matters
        return f"available: {', '.join('emu:' + a for a in ARCHES)}"


def software_facts() -> dict[str, str]:
    return {
        "lnbench": __version__, "python": platform.python_version(),
        "torch": torch.__version__, "gpu runtime": gpu_runtime(), "ROCm GPU": "yes" if has_rocm_gpu() else "no",
        "flydsl": package_version("flydsl"), "click": package_version("click"), "rich": package_version("rich"),
        "pandas": package_version("pandas"), "liger-kernel": package_version("liger-kernel"),
        "triton": package_version("triton"), "ziglang": package_version("ziglang"),
        "tinygrad": package_version("tinygrad"), "numpy": package_version("numpy"),
        "msgpack": package_version("msgpack"), "FlyDSL toolkit": toolkit_fact(), "emulator": emulator_fact(),
    }
