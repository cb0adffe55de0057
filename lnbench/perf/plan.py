"""The plan of one `lnbench perf`: options and config checked once, the device, protocol, cases and groups."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench import settings as cfg
from lnbench import validate
from lnbench.backends import backend_names, check_backend_names, is_backend_name, record_sources
from lnbench.run.device import Device, parse_device
from lnbench.errors import LnbenchUsageError
from lnbench.run.gpus import parse_devices, record_devices
from lnbench.measure import load
from lnbench.measure.kernel_timer import unavailable_reason
from lnbench.run.metadata import provenance
from lnbench.perf.cases import backend_skips, build_cases
from lnbench.perf.peak import default_peak_path, load_peak
from lnbench.perf.options import PerfOptions
from lnbench.perf.protocol import PerfProtocol
from lnbench.perf.spread import Group, plan_groups
from lnbench.scaffold.setup import begin, element_bytes
from lnbench.run.shard import parse_shard, record_shard
from lnbench.results import PERF, PerfRun


def check_headline(timer: str, kernel_timer: bool, dev: Device, reason: str) -> str:
    """The --timer value (a click Choice of HEADLINES), checked: `kernel` needs the kernel timer on and a
    device with GPU activity (`reason`: why there is none, '' when there is)."""
    if timer == "kernel":
        if not kernel_timer:
            raise LnbenchUsageError("--timer kernel needs the kernel timer (drop --no-kernel-timer, or set "
                                    "[perf] kernel_timer = true)")
        if reason:
            raise LnbenchUsageError(f"--timer kernel cannot run on {dev.name}: {reason}")
    return timer


def timed_device(name: str | None, other: str = "") -> Device:
    """The --device to time on; the emulated device is refused (its times say nothing about hardware). `other`:
    an option that also chose the device (--devices), so --device is one too many."""
    if other:
        raise LnbenchUsageError(f"--device and {other} both choose where to run: give one")
    dev = parse_device(name)
    if not dev.times_are_real:
        if not dev.executes_flydsl:             # the null device: launches complete without running anything
            raise LnbenchUsageError(f"{dev.name} executes nothing (launches complete at once), so there is no "
                                    f"kernel time to measure (its host cost: `lnbench abi-compare --device {dev.name}`)")
        raise LnbenchUsageError(f"{dev.name} is an emulated device: its times mean nothing, so it cannot be "
                                f"timed (use `lnbench verify --device {dev.name}` to check results)")
    return dev


def choose_backends(requested: list[str], device: Device) -> list[str]:
    """Expand `auto` (FlyDSL on a ROCm GPU, plus torch) and reject unknown names (usage error)."""
    out: list[str] = []
    for name in requested:
        names = (["flydsl", "torch"] if device.executes_flydsl else ["torch"]) if name == "auto" else [name]
        for item in names:
            item = {n.lower(): n for n in backend_names()}.get(item.lower(), item)
            check_backend_names([item])
            if item not in out:
                out.append(item)
    if not out:
        raise LnbenchUsageError("no backend given")
    return out


def _list_option(values: tuple[str, ...], table: dict[str, Any], key: str) -> list[str]:
    return validate.listed(values, key.removesuffix("s"), cfg.require(table, key, list, "perf"))



def loaded_policy(option: str | None, table: dict[str, Any]) -> str:
    policy = option or str(cfg.require(table, "if_loaded", str, "perf"))
    if policy not in load.POLICIES:
        raise LnbenchUsageError(f"config [perf] if_loaded must be one of {', '.join(load.POLICIES)}, got {policy!r}")
    return policy


def perf_run(dev: Device, protocol: PerfProtocol, baseline: str, headline: str, backends: list[str]) -> PerfRun:
    """The run record of a perf run as planned: identity, protocol, baseline and headline, kernel sources (the
    rest, measured, is set when the run ends)."""
    run = provenance(dev, PERF, "perf")
    run.set(P=protocol.processes, R=protocol.runs, I_min=protocol.min_iters, I_max=protocol.max_iters,
            warmup_s_min=protocol.warmup_s, min_warmup_calls=protocol.min_warmup_calls,
            target_run_s=protocol.target_run_s, modes=",".join(protocol.modes), baseline=baseline,
            cold_factor=protocol.cold_factor, headline=headline)
    return record_sources(run, backends)


#: tensors of M×N a perf case holds at once (x, y, dy, dx, and backends' workspace), each in the case dtype
PERF_TENSORS = 8

@dataclass
class PerfPlan:
    """A perf run after its checks: where it times, with which protocol, which cases in which groups."""
    dev: Device
    slots: list[Any] | None
    table: dict[str, Any]
    protocol: PerfProtocol
    headline: str
    kernel_pass: bool
    no_kernel_time: str
    backends: list[str]
    baseline: str
    host_share: float
    spread: bool
    run: PerfRun
    cases: list[Any]
    groups: list[Group]
    peak: dict | None
    peak_file: Path | None
    outputs: tuple[Path | None, Path | None, Path | None]


def build_plan(o: PerfOptions) -> PerfPlan:
    """Check every option against the config once (exit 2 on bad input), reserve the outputs, plan the groups."""
    part = parse_shard(o.shard)
    slots = parse_devices(o.devices, o.force)
    dev = timed_device(slots[0].process_device if slots else o.device, "--devices" if slots and o.device else "")
    setup = begin("perf", o.config_path, "perf")
    config, table = setup.config, setup.table
    alone_mib = cfg.option_or_config(o.alone_below_mib, table, "alone_below_mib", "--alone-below-mib", (int, float),
                                     "perf", lambda value, label: validate.number(value, "alone_below_mib", label))
    host_share = float(cfg.require(table, "alone_host_fraction", (int, float), "perf"))
    protocol = PerfProtocol.from_table(
        table, processes=o.processes, runs=o.runs, warmup_s=o.warmup_s, min_warmup_calls=o.min_warmup_calls,
        target_run_s=o.target_run_s, min_iters=o.min_iters, max_iters=o.max_iters,
        worker_timeout_s=o.worker_timeout_s, cold_factor=o.cold_factor, llc_mib=o.llc_mib,
        kernel_timer=True if o.kernel_timer is None and o.headline == "kernel" else o.kernel_timer,
        modes=tuple(cfg.split_list(o.modes, "mode")) or None, ops=tuple(cfg.split_list(o.ops, "op")) or None)
    no_kernel_time = unavailable_reason(dev)
    headline = check_headline(o.headline, protocol.kernel_timer, dev, no_kernel_time)
    kernel_pass = protocol.kernel_timer and not no_kernel_time
    setup.use_kernel_src(o.kernel_src)           # [backends.NAME]: passed on to the workers
    backend_list = choose_backends(_list_option(o.backends, table, "backends"), dev)
    base_name = str(cfg.option_or_config(o.baseline, table, "baseline", "--baseline", str, "perf"))
    if not is_backend_name(base_name):
        raise LnbenchUsageError(f"unknown baseline {base_name!r}; choose from {', '.join(backend_names())}")
    dtype_list = cfg.parse_dtypes(o.dtypes, cfg.require(table, "dtypes", list, "perf"))
    shape_list = cfg.chosen_shapes(config, "perf", o.shapes, o.shape_set)
    # FlyDSL kernels (lnbench's or a kernel source's), lnbench's limits: before any worker starts
    setup.check_kernels(backend_list if dev.executes_flydsl else [], shape_list, dtype_list)
    eps_value = cfg.option_or_config(o.eps, table, "eps", "--eps", (int, float), "perf", validate.eps)
    base_seed = cfg.option_or_config(o.seed, table, "seed", "--seed", int, "perf", validate.seed)
    setup.fit(shape_list, element_bytes(PERF_TENSORS, dtype_list), dev,
              "perf (x, y, dy, dx and workspace, beside the cold-mode rotation)",
              1.0 - protocol.cold_mem_fraction if "cold" in protocol.modes else 1.0)
    skips = backend_skips(backend_list, dev)
    every_case = build_cases(backend_list, list(protocol.ops), dtype_list, shape_list, list(protocol.modes),
                             eps_value, base_seed, skips)
    cases = part.part(every_case, "case(s)")
    peak_input = {"--peak-file": o.peak_file} if o.peak_file else {"the peak cache": default_peak_path()}
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path, peak_input)
    spread = slots is not None and len(slots) > 1    # one GPU: nothing else is timing, nothing runs apart
    run = perf_run(dev, protocol, base_name, headline, backend_list)
    record_devices(record_shard(run, part, len(every_case)), slots, alone_mib if spread else None)
    if spread:
        run.alone_host_fraction = host_share
    groups = plan_groups(cases, backend_list, protocol.processes, str(dev.torch_device), slots,
                         alone_mib if spread else 0.0)
    peak = load_peak(dev.torch_device, o.peak_file)
    return PerfPlan(dev, slots, table, protocol, headline, kernel_pass, no_kernel_time, backend_list, base_name,
                    host_share, spread, run, cases, groups, peak, o.peak_file, outputs)
