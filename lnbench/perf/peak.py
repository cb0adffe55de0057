"""Measured peak: device-to-device copy bandwidth, once per device, cached as JSON under results/.

A copy of B bytes reads B and writes B, so bandwidth = 2·B / time (decimal GB/s). The buffer is large
(default 1 GiB on a GPU, capped at a quarter of free memory; 256 MiB on the CPU) so caches do not matter.
The cache file maps device name -> {"gbps", "bytes", "median_us", "runs_us", "timestamp", ...}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from lnbench.metadata import device_name, timestamp
from lnbench.perf.timing import measure
from lnbench.perf.workloads import free_memory
from lnbench import validate
from lnbench.errors import LnbenchUsageError
from lnbench.report import check_writable, default_results_dir, write_json

MIB = 1 << 20
PEAK_FILE = "peak.json"


def default_peak_path() -> Path:
    """results/peak.json ($LNBENCH_RESULTS_DIR overrides the folder), resolved at call time."""
    return default_results_dir() / PEAK_FILE


def measure_copy_bandwidth(device: torch.device, size_bytes: int | None = None, runs: int = 10
                           ) -> dict[str, Any]:
    """Time dst.copy_(src) on `device` and return the record stored in the cache."""
    if size_bytes is None:
        want = 1 << 30 if device.type == "cuda" else 256 * MIB
        size_bytes = int(min(want, free_memory(device) // 4))
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
    return record if isinstance(record, dict) and isinstance(record.get("gbps"), (int, float)) else None


def store_peak(device: torch.device, record: dict[str, Any], path: Path | None = None) -> Path:
    """Merge the record under this device's name into the cache file (atomic write)."""
    path = Path(path or default_peak_path())
    cache = load_cache(path)
    cache[device_name(device)] = record
    return write_json(cache, path)
