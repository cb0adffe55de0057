"""Measured peak: device-to-device copy bandwidth, once per device, cached as JSON under results/.

A copy of B bytes reads B and writes B, so bandwidth = 2·B / time (decimal GB/s). Source + destination
must be at least PEAK_MIN_LLC_FACTOR × the last-level cache, or the copy runs in the cache: the default size
(1 GiB on a GPU, 256 MiB on the CPU) grows to follow that rule on a machine with a larger cache, and
`--size-mib` is held to it too.
The cache file maps device name -> the current record {"gbps", "bytes", "median_us", "runs_us", "timestamp",
...} plus "history": the earlier records of that device (newest last), so what was measured when is kept.
A new figure outside the noise of the cached one (their per-run GB/s ranges do not overlap) is reported.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeGuard

import torch

from lnbench.run.metadata import device_name, timestamp
from lnbench.measure.timing import measure
from lnbench.perf import workloads
from lnbench import validate
from lnbench.errors import LnbenchUsageError
from lnbench.output.files import check_writable, default_results_dir, write_json
from lnbench.perf.protocol import PEAK_MIN_LLC_FACTOR

MIB = 1 << 20
PEAK_FILE = "peak.json"
#: earlier records kept per device
HISTORY = 50


def default_peak_path() -> Path:
    """results/peak.json ($LNBENCH_RESULTS_DIR overrides the folder), resolved at call time."""
    return default_results_dir() / PEAK_FILE


def copy_size(device: torch.device, size_mib: float | None) -> int:
    """Bytes copied per call: --size-mib, or the default (1 GiB on a GPU, 256 MiB on the CPU, raised to the
    smallest size the cache rule allows); a usage error when the size breaks the rule or does not fit."""
    llc, _ = workloads.llc_bytes(device)
    least = PEAK_MIN_LLC_FACTOR * llc / 2
    if size_mib is not None:
        size = int(size_mib * MIB)
        if size < least:                                   # source + destination must dwarf the cache
            raise LnbenchUsageError(f"--size-mib {size_mib:g}: a copy that small runs in the {llc / MIB:g} MiB "
                                    f"last-level cache and would cache a cache speed as the peak; use at least "
                                    f"{least / MIB:g} MiB")
        what = f"--size-mib {size_mib:g}"
    else:
        size = max(1 << 30 if device.type == "cuda" else 256 * MIB, -(-int(least) // MIB) * MIB)
        what = f"the default copy ({size / MIB:g} MiB, at least {PEAK_MIN_LLC_FACTOR // 2}× the {llc / MIB:g} MiB " \
               f"last-level cache)"
    free = workloads.free_memory(device)
    if 2 * size > 0.9 * free:                              # source and destination
        raise LnbenchUsageError(f"{what}: a copy needs {2 * size / MIB:.0f} MiB, {device} has {free / MIB:.0f} MiB free")
    return size


def measure_copy_bandwidth(device: torch.device, size_bytes: int, runs: int = 10) -> dict[str, Any]:
    """Time dst.copy_(src) on `device` and return the record stored in the cache."""
    numel = max(size_bytes // 4, 1)
    src = torch.rand(numel, dtype=torch.float32, device=device)  # real data, never zeros
    dst = torch.empty_like(src)
    result = measure(lambda: dst.copy_(src), device, runs=runs, warmup_s=0.2, min_warmup_calls=5,
                     target_run_s=0.05, min_iters=3, max_iters=50)
    nbytes = 2 * numel * 4
    return {"gbps": nbytes / (result.median_us * 1e-6) / 1e9, "bytes": nbytes, "copy_bytes": numel * 4,
            "median_us": result.median_us, "runs_us": result.run_us, "iters_per_run": result.iters_per_run,
            "timer": result.timer, "device": str(device), "torch_version": torch.__version__,
            "timestamp": timestamp()}


def load_cache(path: Path | None = None) -> dict[str, Any]:
    """The whole cache ({} when missing or unreadable, or not a regular file: /dev/null, a FIFO)."""
    path = Path(path or default_peak_path())
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _measured(record: Any) -> TypeGuard[dict[str, Any]]:
    """A record with a figure % peak can divide by: a positive finite number `gbps` (a hand-edited 0, -5, NaN
    or true is none)."""
    gbps = record.get("gbps") if isinstance(record, dict) else None
    return isinstance(gbps, (int, float)) and not isinstance(gbps, bool) and math.isfinite(gbps) and gbps > 0


def _not_a_cache(text: str) -> str | None:
    """Why `text` is not a peak cache (a JSON object of device name -> record with a numeric gbps), or None.
    An empty file is an empty cache."""
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(data, dict):
        return "not a JSON object"
    for name, record in data.items():
        if not (isinstance(record, dict) and isinstance(record.get("gbps"), (int, float))):
            return f"entry {name!r} has no numeric gbps"
    return None


def cache_problem(path: Path) -> str | None:
    """Why an existing file at `path` is not a peak cache (None when it is one, or when there is no file)."""
    if not path.is_file():
        return None
    try:
        return _not_a_cache(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {getattr(exc, 'strerror', None) or exc}"


def reserve_peak_file(path: Path) -> Path:
    """Make the cache `lnbench peak` updates ready before measuring: a file that is there must be a peak cache
    (anything else would be replaced by it), then report.check_writable. A usage error otherwise."""
    validate.not_stdout("--peak-file", path)
    why = cache_problem(path)
    if why:
        raise LnbenchUsageError(f"--peak-file {path} exists and is not an lnbench peak cache ({why}); "
                                f"choose another path or remove it")
    return check_writable(path)


def load_peak(device: torch.device, path: Path | None = None) -> dict[str, Any] | None:
    """The cached record for this device's name, or None (perf then says `lnbench peak` is missing)."""
    record = load_cache(path).get(device_name(device))
    if not _measured(record):
        return None
    return {k: v for k, v in record.items() if k != "history"}


def run_gbps(record: dict[str, Any]) -> list[float]:
    """The per-run GB/s of a record (empty for an old or hand-made one without run times)."""
    runs = record.get("runs_us")
    nbytes = record.get("bytes")
    if not isinstance(runs, list) or not isinstance(nbytes, (int, float)):
        return []
    return [nbytes / (us * 1e-6) / 1e9 for us in runs if isinstance(us, (int, float)) and us > 0]


def change_beyond_noise(old: dict[str, Any], new: dict[str, Any]) -> str:
    """'' when the new measurement agrees with the cached one (their per-run GB/s ranges overlap, or one has no
    runs to judge by), else one line saying what changed."""
    before, now = run_gbps(old), run_gbps(new)
    if not before or not now or (min(now) <= max(before) and min(before) <= max(now)):
        return ""
    change = (new["gbps"] / old["gbps"] - 1.0) * 100.0
    return (f"the measured peak changed beyond the noise: {old['gbps']:.4g} GB/s (runs {min(before):.4g}–"
            f"{max(before):.4g}, {old.get('timestamp', '?')}) → {new['gbps']:.4g} GB/s (runs {min(now):.4g}–"
            f"{max(now):.4g}), {change:+.1f}%; perf's % peak now uses the new figure (the old one stays in the "
            f"cache's history). A busy machine, another copy size or changed clocks can explain it; rerun "
            f"`lnbench peak` on a quiet machine to confirm")


def store_peak(device: torch.device, record: dict[str, Any], path: Path | None = None) -> tuple[Path, str]:
    """Make the record this device's current one in the cache file (atomic write); the one it replaces goes to
    the device's history. Returns (the file, the change_beyond_noise line: '' when none)."""
    path = Path(path or default_peak_path())
    cache = load_cache(path)
    old = cache.get(device_name(device))
    history: list[Any] = []
    change = ""
    if isinstance(old, dict):
        history = [h for h in old.get("history", []) if isinstance(h, dict)]
        history.append({k: v for k, v in old.items() if k != "history"})
        if _measured(old):
            change = change_beyond_noise(old, record)
    cache[device_name(device)] = {**record, "history": history[-HISTORY:]}
    return write_json(cache, path), change
