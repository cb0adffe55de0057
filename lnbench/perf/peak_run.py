"""The plan and run of one `lnbench peak`: options and config checked once (`build_peak_plan`), then the copy
timed on a machine that is quiet enough and its record stored in the cache (`run_peak`); perf/tables.py's
`print_peak` renders it. Kept apart from peak.py (the cache and the copy itself), which perf's own plan reads."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench import validate
from lnbench.cli_common import SharedOptions
from lnbench.run.clocks import gpu_facts
from lnbench.run.device import Device
from lnbench.measure import load
from lnbench.perf.peak import copy_size, default_peak_path, measure_copy_bandwidth, reserve_peak_file, store_peak
from lnbench.perf.plan import loaded_policy, timed_device
from lnbench.scaffold.setup import begin


@dataclass(frozen=True)
class PeakPlan:
    """What one `lnbench peak` measures: where, how many bytes a copy moves, how often, and which cache it updates."""
    dev: Device
    size: int                 # bytes copied per call (source; the copy reads and writes it)
    runs: int
    path: Path                # the peak cache, checked to be one and writable
    policy: str               # --if-loaded: warn or refuse on a busy machine


@dataclass(frozen=True)
class PeakOptions(SharedOptions):
    """`lnbench peak`'s options as given (None: the default or the config's value applies): the shared ones
    (cli_common.SharedOptions: --device, --config) and its own."""

    size_mib: float | None = None
    runs: int = 10
    peak_file: Path | None = None
    if_loaded: str | None = None

def build_peak_plan(o: PeakOptions) -> PeakPlan:
    """Every option checked (a usage error names the one at fault) before anything is timed."""
    validate.number(o.runs, "peak_runs", "--runs")
    if o.size_mib is not None:
        validate.number(o.size_mib, "size_mib", "--size-mib")
    policy = loaded_policy(o.if_loaded, begin("peak", o.config_path, "perf").table)
    dev = timed_device(o.device)
    path = Path(o.peak_file or default_peak_path())
    reserve_peak_file(path)
    return PeakPlan(dev, copy_size(dev.torch_device, o.size_mib), o.runs, path, policy)


def run_peak(plan: PeakPlan) -> tuple[dict[str, Any], str, load.LoadFacts]:
    """Time the copy while holding the host's timing lock (refused on a busy machine when the policy says so),
    store the record as the device's current one. Returns (the record, the change_beyond_noise line or '', the
    load the copy was timed under)."""
    lock = load.hold("peak")
    try:
        load_before = load.check(lock)
        load.refuse_if_loaded(load_before, plan.policy)
        record = measure_copy_bandwidth(plan.dev.torch_device, plan.size, plan.runs)
        record.update({k: v for k, v in gpu_facts(plan.dev.torch_device).items() if k in ("driver", "clocks")})
        facts = load.metadata(load_before, load.check(lock))
        record.update(facts.cells())
    finally:
        lock.release()
    _, change = store_peak(plan.dev.torch_device, record, plan.path)
    return record, change, facts
