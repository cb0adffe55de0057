"""Facts about this machine for `lnbench env`: device, torch build, backends, FlyDSL toolkit."""
from __future__ import annotations

from typing import Any

import torch

from lnbench.backends import backend_names, probe_backend
from lnbench.metadata import device_arch, device_name, gpu_runtime, package_version
from lnbench.rocm import has_rocm_gpu


def device_facts() -> list[dict[str, Any]]:
    """One row per device torch sees (the CPU always)."""
    rows = [{"device": "cpu", "name": device_name(torch.device("cpu")), "arch": device_arch(torch.device("cpu"))}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            dev = torch.device("cuda", index)
            rows.append({"device": str(dev), "name": device_name(dev), "arch": device_arch(dev)})
    return rows


def backend_facts(device: torch.device) -> list[dict[str, Any]]:
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


def software_facts() -> dict[str, str]:
    return {
        "torch": torch.__version__, "gpu runtime": gpu_runtime(), "ROCm GPU": "yes" if has_rocm_gpu() else "no",
        "flydsl": package_version("flydsl"), "click": package_version("click"), "rich": package_version("rich"),
        "pandas": package_version("pandas"), "liger-kernel": package_version("liger-kernel"),
        "triton": package_version("triton"), "ziglang": package_version("ziglang"),
        "FlyDSL toolkit": toolkit_fact(),
    }
