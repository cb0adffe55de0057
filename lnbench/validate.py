"""One validation layer for every command's input: list options, eps, seeds, arches, and whether a shape's
tensors fit in the device's memory (estimated before anything is allocated). Each check raises
LnbenchUsageError with a one-line message (exit 2)."""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from lnbench.errors import LnbenchUsageError

#: FlyDSL targets `inspect` and `abi-compare` compile for
ARCHES: tuple[str, ...] = ("gfx942", "gfx950")
#: bytes per element of each dtype lnbench handles
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
#: seeds go to torch.manual_seed / numpy default_rng, with small offsets added per case
SEED_MAX = 2**63 - 1


def split_list(values: Iterable[str] | str | None) -> list[str]:
    """Flatten repeatable and comma-separated option values: ("a,b", "c") -> [a, b, c].

    A value that is entirely blank gives nothing (callers report an empty list); a blank item inside a
    non-blank value (`64x256,`, `a,,b`) is a usage error.
    """
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        text = str(value)
        if not text.strip():
            continue
        items = [item.strip() for item in text.split(",")]
        if any(not item for item in items):
            raise LnbenchUsageError(f"empty item in list {text!r}: remove the extra comma")
        out.extend(items)
    return out


def choices(values: Iterable[str] | str | None, allowed: Sequence[str], what: str,
            default: Sequence[str] | None = None) -> list[str]:
    """Items of a list option, each one of `allowed` (order kept, no repeats); `default` when none given."""
    items = split_list(values)
    for item in items:
        if item not in allowed:
            raise LnbenchUsageError(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items or (default if default is not None else allowed)))


def arches(values: Iterable[str] | str | None, default: Sequence[str] | None = None) -> list[str]:
    """--arch values: gfx942 and/or gfx950 (the same rule for inspect and abi-compare)."""
    return choices(values, ARCHES, "arch", default)


def eps(value: Any, where: str = "eps") -> float:
    """A finite positive number (not a bool, not a list)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LnbenchUsageError(f"{where} must be a number, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise LnbenchUsageError(f"{where} must be a finite number > 0, got {value!r}")
    return float(value)


def seed(value: Any, where: str = "seed") -> int:
    """An integer in 0 .. 2**63-1 (what numpy and torch.manual_seed both accept, with room for offsets)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LnbenchUsageError(f"{where} must be an integer, got {value!r}")
    if not 0 <= value <= SEED_MAX:
        raise LnbenchUsageError(f"{where} must be in 0..2**63-1, got {value}")
    return value


def _mem_available_linux() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes(device: Any) -> int | None:
    """Free memory where `device`'s tensors live: torch.cuda.mem_get_info on a GPU, else MemAvailable of the
    host (the cpu, emulated and null devices keep tensors in host memory); None when unknown."""
    torch_device = getattr(device, "torch_device", device)
    if getattr(torch_device, "type", None) == "cuda":
        import torch
        try:
            return int(torch.cuda.mem_get_info(torch_device)[0])
        except Exception:  # noqa: BLE001 - unknown is fine: no check
            return None
    return _mem_available_linux()


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"  # pragma: no cover


def shapes_fit(shapes: Iterable[tuple[int, int]], bytes_per_element: float, device: Any,
               what: str = "this command", fraction: float = 1.0) -> None:
    """Usage error when a shape's tensors (estimated: M·N × bytes_per_element, plus per-row stats) would not
    fit in the device's free memory. Checked before anything is allocated."""
    free = available_bytes(device)
    if free is None:
        return
    free = int(free * fraction)
    for m, n in shapes:
        need = m * n * bytes_per_element + m * 64
        if need > free:
            raise LnbenchUsageError(
                f"shape {m}x{n} does not fit: {what} needs about {_size(need)}, "
                f"{getattr(device, 'name', device)} has {_size(free)} free")
