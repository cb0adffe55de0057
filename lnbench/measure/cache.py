"""The device's memory facts a measurement needs: its last-level cache (to size cold-mode rotation and the
kernel timer's flush) and its free memory."""
from __future__ import annotations

from pathlib import Path

import torch

MIB = 1 << 20
#: AMD Instinct parts with a 256 MiB Infinity Cache (MALL) behind L2
_INFINITY_CACHE = {"gfx942": 256 * MIB, "gfx950": 256 * MIB}
_CPU_LLC_FALLBACK = 32 * MIB
_GPU_LLC_FALLBACK = 256 * MIB


def llc_bytes(device: torch.device) -> tuple[int, str]:
    """(last-level cache bytes, how it was found) for `device`."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        mall = _INFINITY_CACHE.get(arch, 0) if torch.version.hip is not None else 0
        if l2 <= 0:
            return _GPU_LLC_FALLBACK + mall, f"L2 size not exposed by torch: assumed {_GPU_LLC_FALLBACK // MIB} MiB"
        source = f"L2 {l2 / MIB:g} MiB" + (f" + Infinity Cache {mall // MIB} MiB ({arch})" if mall else "")
        return l2 + mall, source
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": MIB, "G": 1 << 30}.get(size[-1:].upper(), 1)
        digits = size.rstrip("KkMmGg")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    if best:
        return best, f"CPU cache {best / MIB:g} MiB (sysfs)"
    return _CPU_LLC_FALLBACK, f"CPU cache unknown: assumed {_CPU_LLC_FALLBACK // MIB} MiB"


def free_memory(device: torch.device) -> int:
    """Free bytes on the device (GPU: mem_get_info; CPU: available physical memory, else 4 GiB)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30
