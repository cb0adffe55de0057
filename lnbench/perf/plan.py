"""The plan of one `lnbench perf`: options and config checked once, the device, protocol, cases and groups."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench import settings as cfg
from lnbench import validate
from lnbench.backends import (OWN_FLYDSL, backend_names, check_backend_names, configure_sources, is_backend_name,
                              record_sources, runs_flydsl, set_kernel_src)
from lnbench.cli_common import config_input, prepare_outputs
from lnbench.run.device import Device, parse_device
from lnbench.constants import DTYPES
from lnbench.errors import LnbenchUsageError
from lnbench.flydsl import preflight
from lnbench.run.gpus import parse_devices, record_devices
from lnbench.measure import load
from lnbench.measure.kernel_timer import unavailable_reason
from lnbench.run.metadata import provenance
from lnbench.perf.cases import backend_skips, build_cases
from lnbench.perf.peak import default_peak_path, load_peak
from lnbench.perf.protocol import PerfProtocol
from lnbench.perf.spread import Group, plan_groups
from lnbench.run.shard import parse_shard, record_shard
from lnbench.results import PERF, RunRecord


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


def perf_run(dev: Device, protocol: PerfProtocol, baseline: str, headline: str, backends: list[str]) -> RunRecord:
    """The run record of a perf run as planned: identity, protocol, baseline and headline, kernel sources (the
    rest, measured, is set when the run ends)."""
    run = provenance(dev, PERF, "perf")
    run.update(P=protocol.processes, R=protocol.runs, I_min=protocol.min_iters, I_max=protocol.max_iters,
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
    run: RunRecord
    cases: list[Any]
    groups: list[Group]
    peak: dict | None
    peak_file: Path | None
    outputs: tuple[Path | None, Path | None, Path | None]


def build_plan(*, backends, baseline, ops, modes, dtypes, shapes, shape_set, processes, runs, warmup_s,
               min_warmup_calls, target_run_s, min_iters, max_iters, worker_timeout_s, cold_factor, llc_mib,
               headline, kernel_timer, eps, seed, device, devices, force, alone_below_mib, shard, config_path,
               peak_file, kernel_src, md_path, csv_path, json_path) -> PerfPlan:
    """Check every option against the config once (exit 2 on bad input), reserve the outputs, plan the groups."""
    part = parse_shard(shard)
    slots = parse_devices(devices, force)
    dev = timed_device(slots[0].process_device if slots else device, "--devices" if slots and device else "")
    config = cfg.load_config(config_path)
    table = cfg.section(config, "perf")
    alone_mib = cfg.option_or_config(alone_below_mib, table, "alone_below_mib", "--alone-below-mib", (int, float),
                                     "perf", lambda value, label: validate.number(value, "alone_below_mib", label))
    host_share = float(cfg.require(table, "alone_host_fraction", (int, float), "perf"))
    protocol = PerfProtocol.from_table(
        table, processes=processes, runs=runs, warmup_s=warmup_s, min_warmup_calls=min_warmup_calls,
        target_run_s=target_run_s, min_iters=min_iters, max_iters=max_iters, worker_timeout_s=worker_timeout_s,
        cold_factor=cold_factor, llc_mib=llc_mib,
        kernel_timer=True if kernel_timer is None and headline == "kernel" else kernel_timer,
        modes=tuple(cfg.split_list(modes, "mode")) or None, ops=tuple(cfg.split_list(ops, "op")) or None)
    no_kernel_time = unavailable_reason(dev)
    headline = check_headline(headline, protocol.kernel_timer, dev, no_kernel_time)
    kernel_pass = protocol.kernel_timer and not no_kernel_time
    set_kernel_src(kernel_src)
    configure_sources(config)                    # [backends.NAME]: passed on to the workers
    backend_list = choose_backends(_list_option(backends, table, "backends"), dev)
    base_name = str(cfg.option_or_config(baseline, table, "baseline", "--baseline", str, "perf"))
    if not is_backend_name(base_name):
        raise LnbenchUsageError(f"unknown baseline {base_name!r}; choose from {', '.join(backend_names())}")
    dtype_list = cfg.parse_dtypes(dtypes, cfg.require(table, "dtypes", list, "perf"))
    shape_list = cfg.chosen_shapes(config, "perf", shapes, shape_set)
    if any(runs_flydsl(name) for name in backend_list) and dev.executes_flydsl:
        preflight.toolkit()                                 # FlyDSL kernels (lnbench's or a kernel source's)
    if any(name in OWN_FLYDSL for name in backend_list) and dev.executes_flydsl:
        preflight.kernel_widths([n for _, n in shape_list], dtype_list)   # lnbench's limits, before any worker starts
    eps_value = cfg.option_or_config(eps, table, "eps", "--eps", (int, float), "perf", validate.eps)
    base_seed = cfg.option_or_config(seed, table, "seed", "--seed", int, "perf", validate.seed)
    validate.shapes_fit(shape_list, PERF_TENSORS * max(DTYPES[d].itemsize for d in dtype_list), dev,
                        "perf (x, y, dy, dx and workspace, beside the cold-mode rotation)",
                        1.0 - protocol.cold_mem_fraction if "cold" in protocol.modes else 1.0)
    skips = backend_skips(backend_list, dev)
    every_case = build_cases(backend_list, list(protocol.ops), dtype_list, shape_list, list(protocol.modes),
                             eps_value, base_seed, skips)
    cases = part.part(every_case, "case(s)")
    peak_input = {"--peak-file": peak_file} if peak_file else {"the peak cache": default_peak_path()}
    csv_final, json_final, md_final = prepare_outputs("perf", csv_path, json_path,
                                                      {**config_input(config_path), **peak_input}, md_path)
    spread = slots is not None and len(slots) > 1    # one GPU: nothing else is timing, nothing runs apart
    run = perf_run(dev, protocol, base_name, headline, backend_list)
    record_devices(record_shard(run, part, len(every_case)), slots, alone_mib if spread else None)
    if spread:
        run.alone_host_fraction = host_share
    groups = plan_groups(cases, backend_list, protocol.processes, str(dev.torch_device), slots,
                         alone_mib if spread else 0.0)
    peak = load_peak(dev.torch_device, peak_file)
    return PerfPlan(dev, slots, table, protocol, headline, kernel_pass, no_kernel_time, backend_list, base_name,
                    host_share, spread, run, cases, groups, peak, peak_file, (csv_final, json_final, md_final))
