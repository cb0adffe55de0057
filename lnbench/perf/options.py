"""The options of `lnbench perf` as one typed record (its click options, built once from click's keywords);
both of its plans read it: the timed one (perf.plan) and the modelled one (perf.modelled, `--device emu`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PerfOptions:
    """`lnbench perf`'s options as given (None or empty: left out, the config's value applies); --if-loaded,
    --quiet and --flydsl-table are the run's, not the plan's."""

    backends: tuple[str, ...] = ()
    baseline: str | None = None
    ops: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    shape_set: str | None = None
    processes: int | None = None
    runs: int | None = None
    warmup_s: float | None = None
    min_warmup_calls: int | None = None
    target_run_s: float | None = None
    min_iters: int | None = None
    max_iters: int | None = None
    worker_timeout_s: float | None = None
    cold_factor: float | None = None
    llc_mib: float | None = None
    headline: str = "stream"
    kernel_timer: bool | None = None
    eps: float | None = None
    seed: int | None = None
    device: str | None = None
    devices: str | None = None
    force: bool = False
    alone_below_mib: float | None = None
    shard: str | None = None
    config_path: Path | None = None
    peak_file: Path | None = None
    kernel_src: Path | None = None
    md_path: Path | None = None
    csv_path: Path | None = None
    json_path: Path | None = None
