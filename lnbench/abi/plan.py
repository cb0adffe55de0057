"""The plan of one `lnbench abi-compare`: options and config checked once, the pair, device, shapes, protocol."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lnbench import settings as cfg
from lnbench import validate
from lnbench.abi.cases import PAIRS, flydsl_pair, pair_info, split_pair
from lnbench.abi.null_device import CHECK_ELEMENTS
from lnbench.abi.pair_timing import METRICS
from lnbench.abi.static import default_arches, flydsl_installed
from lnbench.backends import OWN_FLYDSL, record_sources, runs_flydsl
from lnbench.run.device import Device, compile_device, emulator_status, null_device, parse_device
from lnbench.constants import KERNEL_OPS
from lnbench.errors import LnbenchUsageError
from lnbench.modelled.targets import targets_for
from lnbench.run.gpus import parse_devices, record_devices
from lnbench.cli_common import SharedOptions
from lnbench.measure.protocol import Protocol, TimingOptions
from lnbench.run.metadata import provenance
from lnbench.results import ABI, AbiRun
from lnbench.machine.rocm import has_rocm_gpu
from lnbench.scaffold.setup import begin, element_bytes
from lnbench.run.shard import Shard, parse_shard, record_shard

TABLE = "abi_compare"


def _choose(values: Sequence[str], table: dict[str, Any], key: str, allowed: Sequence[str], what: str) -> list[str]:
    """A list option's items (else the config's `key` list), each one of `allowed`; empty is a usage error."""
    return validate.choices(values, allowed, what, cfg.require(table, key, list, TABLE))


def choose_device(name: str | None, pair: str) -> Device:
    """--device, checked. Left out (or `auto`) for the flydsl pair where there is no ROCm GPU: the null device
    (host cost of both ABIs) where it can run here, else the default device (FlyDSL rows `not run`)."""
    if name not in (None, "auto") or not flydsl_pair(pair) or has_rocm_gpu() or not emulator_status()[0]:
        return parse_device(name)
    return null_device()


def check_elements(table: dict[str, Any]) -> int:
    """`[abi_compare] check_elements`: element budget of what runs on the emulated device (executed checks of
    the null device, executed columns of the static part); optional, an integer >= 1."""
    return validate.number(table.get("check_elements", CHECK_ELEMENTS), "check_elements",
                           f"config [{TABLE}] check_elements")


def check_backend_pair(pair: str) -> tuple[str, str] | None:
    """Check --pair (pair_info); for a backend pair A,B, both must be FlyDSL kernel backends: (A, B), else None."""
    pair_info(pair)
    both = split_pair(pair) if pair not in PAIRS else None
    if both is None:
        return None
    for name in both:
        if not runs_flydsl(name):
            raise LnbenchUsageError(f"--pair {pair}: {name} is not a FlyDSL kernel backend (flydsl, flydsl-tensor, "
                                    f"flydsl-atomic, flydsl-src, a [backends.NAME], an lnbench.backends plugin "
                                    f"or module:PKG.MOD)")
    if both[0] == both[1]:
        raise LnbenchUsageError(f"--pair {pair}: name two different backends")
    return both


def refuse_idle_options(pair: str, static_only: bool, runtime_only: bool, arches: Sequence[str],
                        fail_pct: float | None, planted_delay_us: float | None, execute: bool | None = None) -> None:
    """A usage error for an option given on the command line that the chosen run would ignore (config values
    never count: an option left out is None, or empty for --arch)."""
    if static_only and fail_pct is not None:
        raise LnbenchUsageError("--fail-if-slower does nothing with --static-only: it judges the runtime part")
    if static_only and planted_delay_us is not None:
        raise LnbenchUsageError("--planted-delay-us does nothing with --static-only: it slows the runtime part")
    if planted_delay_us is not None and pair != "planted-slow":
        raise LnbenchUsageError(f"--planted-delay-us does nothing with --pair {pair}: it applies only to "
                                f"--pair planted-slow")
    if runtime_only and arches:
        raise LnbenchUsageError("--arch does nothing with --runtime-only: it picks the static part's arches "
                                "(the runtime part runs on --device, e.g. null:gfx950)")
    if runtime_only and execute is not None:
        raise LnbenchUsageError(f"--{'' if execute else 'no-'}execute does nothing with --runtime-only: it is about "
                                f"the static part")


def refuse_runtime_options(static_only: bool, given: Sequence[tuple[str, Any]]) -> None:
    """With --static-only, a usage error for a runtime option given on the command line (flag, value; left out
    is None or empty): checked after the values themselves, so a bad value is named first."""
    flags = [flag for flag, value in given if value is not None and value != ()]
    if static_only and flags:
        raise LnbenchUsageError(f"{flags[0]} does nothing with --static-only: it sets the runtime part (the static "
                                f"part compiles, and executes on the emulated device, untimed)")


#: tensors of M×N a runtime case holds (inputs and outputs of both call paths), each in the case dtype
ABI_TENSORS = 8

@dataclass
class AbiPlan:
    """An abi-compare run after its checks: the pair and its options, where and what it measures, the outputs."""
    pair: str
    backend_pair: tuple[str, str] | None
    every_shape: list[tuple[int, int]]
    part: Shard
    shapes: list[tuple[int, int]]
    slots: list[Any] | None
    dtypes: list[str]
    ops: list[str]
    metrics: list[str]
    dev: Device
    arches: list[str]
    eps: float
    seed: int
    protocol: Protocol
    strategy: str
    pair_options: dict[str, Any]
    run_them: bool
    metadata: AbiRun
    table: dict[str, Any]
    static_only: bool
    runtime_only: bool
    in_process: bool
    fail_pct: float | None
    outputs: tuple[Path | None, Path | None, Path | None]
    #: --device emu[:ARCH]: the host cost is measured on null:ARCH and each case's modelled device floor is
    #: put beside it (lnbench.abi.modelled); the targets of ARCH
    targets: list[Any] | None = None


@dataclass(frozen=True)
class AbiOptions(SharedOptions, TimingOptions):
    """`lnbench abi-compare`'s options as given (None or empty: left out, the config's value applies): the shared
    ones (cli_common.SharedOptions, measure.protocol.TimingOptions) and its own; --details and --quiet are the
    run's, not the plan's."""

    pair: str | None = None
    ops: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    arches: tuple[str, ...] = ()
    static_only: bool = False
    runtime_only: bool = False
    execute: bool | None = None
    fail_pct: float | None = None
    eps: float | None = None
    planted_delay_us: float | None = None
    in_process: bool = False

def _runtime_device(name: str | None, pair: str, static_only: bool, config: dict[str, Any]
                    ) -> tuple[Device, list[Any] | None]:
    """The device the runtime part uses, and on an emulated one the targets of its arch: a FlyDSL pair's host cost
    is then measured on null:ARCH and each case's device floor modelled beside it."""
    dev = choose_device(name, pair)
    targets = None
    if dev.emulated and flydsl_pair(pair) and not static_only:
        targets = targets_for(config, dev.arch)
        dev = null_device(dev.arch)
    if dev.is_null:
        if not flydsl_pair(pair):
            raise LnbenchUsageError(f"the null device times FlyDSL launches: use it with --pair flydsl "
                                    f"(--pair {pair} runs on cpu or a GPU)")
        ok, why = emulator_status()
        if not ok:
            raise LnbenchUsageError(f"device {dev.name!r} is unavailable: {why}")
    return dev, targets


def _pair_options(pair: str, backend_pair: tuple[str, str] | None, strategy: str, planted_delay_us: float | None,
                  table: dict[str, Any]) -> dict[str, Any]:
    """What the pair's workers build their sides with: the FlyDSL kernels' dγ strategy, a backend pair's names,
    the planted delay."""
    if pair == "flydsl":
        return {"dgamma_strategy": strategy}
    if backend_pair is not None:
        return {"backends": list(backend_pair)}
    if pair == "planted-slow":
        delay = cfg.option_or_config(planted_delay_us, table, "planted_delay_us", "--planted-delay-us",
                                     (int, float), TABLE)
        return {"delay_us": float(delay)}
    return {}


def _record_protocol(metadata: AbiRun, protocol: Protocol, seed: int, table: dict[str, Any]) -> None:
    """The runtime part's settings in the run record: what changes a measurement, beside the dγ strategy and the
    planted delay the plan records."""
    metadata.set(processes=protocol.processes, runs=protocol.runs, warmup_s=protocol.warmup_s,
                 target_run_s=protocol.target_run_s, iters_clamp=f"{protocol.min_iters}-{protocol.max_iters}",
                 seed=seed, confidence=table.get("confidence"), bootstrap=table.get("bootstrap"))


def build_plan(o: AbiOptions) -> AbiPlan:
    """Check every option against the config once (exit 2 on bad input) and reserve the outputs."""
    static_only, runtime_only = o.static_only, o.runtime_only
    fail_pct, planted_delay_us = o.fail_pct, o.planted_delay_us
    if static_only and runtime_only:
        raise LnbenchUsageError("--static-only and --runtime-only exclude each other")
    if fail_pct is not None:
        validate.number(fail_pct, "fail_if_slower", "--fail-if-slower")
    if planted_delay_us is not None:       # whatever the pair (config numbers are checked when the file is loaded)
        validate.number(planted_delay_us, "planted_delay_us", "--planted-delay-us")
    setup = begin("abi-compare", o.config_path, TABLE)
    config, table = setup.config, setup.table
    pair = str(cfg.option_or_config(o.pair or None, table, "pair", "--pair", str, TABLE))
    setup.use_kernel_src(o.kernel_src)
    backend_pair = check_backend_pair(pair)
    refuse_idle_options(pair, static_only, runtime_only, o.arches, fail_pct, planted_delay_us, o.execute)
    execute = True if o.execute is None else o.execute
    every_shape = (cfg.chosen_shapes(config, TABLE, o.shapes, o.shape_set) if o.shapes or o.shape_set is not None
                   else cfg.parse_shapes(cfg.require(table, "shapes", list, TABLE)))
    part = parse_shard(o.shard)            # a part: its share of the shapes (runtime) and of the widths (static)
    shape_list = part.part(every_shape, "shape(s)")
    if static_only:                        # then the parts split the widths alone: each part needs one
        part.part(list(dict.fromkeys(n for _, n in every_shape)), "distinct width(s)")
    slots = parse_devices(o.devices, o.force)
    if slots and (o.device is not None or o.in_process):
        raise LnbenchUsageError(f"--devices and {'--device' if o.device is not None else '--in-process'} exclude "
                                f"each other")
    dtype_list = cfg.parse_dtypes(o.dtypes, cfg.require(table, "dtypes", list, TABLE))
    op_list = _choose(o.ops, table, "ops", KERNEL_OPS, "op")
    metric_list = _choose(o.metrics, table, "metrics", METRICS, "measurement")
    # no activation here: null-device workers activate it themselves (before FlyDSL loads its runtime there),
    # and the static part activates the emulated device only to execute its variants
    dev, targets = _runtime_device(slots[0].process_device if slots else o.device, pair, static_only, config)
    arch_list = validate.arches(o.arches, default_arches(dev))
    check_elements(table)      # bootstrap, confidence, stats_seed: checked with every number when the config loaded
    eps_value = cfg.option_or_config(o.eps, table, "eps", "--eps", (int, float), TABLE, validate.eps)
    seed_value = cfg.option_or_config(o.seed, table, "seed", "--seed", int, TABLE, validate.seed)
    if not static_only and dev.torch_device.type in ("cpu", "cuda"):
        setup.fit(shape_list, element_bytes(ABI_TENSORS, dtype_list), dev, "abi-compare (both sides' tensors)")
    protocol = Protocol.from_table(table, processes=o.processes, runs=o.runs, warmup_s=o.warmup_s,
                                   min_warmup_calls=o.min_warmup_calls, target_run_s=o.target_run_s,
                                   min_iters=o.min_iters, max_iters=o.max_iters, worker_timeout_s=o.worker_timeout_s)
    refuse_runtime_options(static_only, [
        ("-P", o.processes), ("-R", o.runs), ("--warmup-s", o.warmup_s), ("--min-warmup-calls", o.min_warmup_calls),
        ("--target-run-s", o.target_run_s), ("--min-iters", o.min_iters), ("--max-iters", o.max_iters),
        ("--worker-timeout-s", o.worker_timeout_s), ("--metric", o.metrics), ("--seed", o.seed),
        ("--devices", o.devices)])
    strategy = validate.dgamma_strategy(cfg.require(table, "dgamma_strategy", str, TABLE),
                                        f"config [{TABLE}] dgamma_strategy")
    if not runtime_only or flydsl_pair(pair):      # FlyDSL kernels' known limits, before any compile
        if backend_pair is None or any(name in OWN_FLYDSL for name in backend_pair):
            setup.check_widths(shape_list, dtype_list)     # lnbench's own kernels' widths
        if flydsl_installed():
            setup.check_toolkit(required=True)
    pair_options = _pair_options(pair, backend_pair, strategy, planted_delay_us, table)
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path)
    run_them = not runtime_only and execute and flydsl_installed() and emulator_status()[0]
    executed_on = ",".join(f"emu:{arch}" for arch in arch_list) if run_them else None
    metadata = provenance(compile_device(arch_list) if static_only else dev, ABI, "abi-compare")
    metadata.set(pair=pair, eps=eps_value,
                 dgamma_strategy=strategy if pair == "flydsl" or not runtime_only else None,
                 planted_delay_us=pair_options.get("delay_us"), static_executed_on=executed_on)
    record_devices(record_shard(metadata, part, len(every_shape)), slots)
    record_sources(metadata, list(backend_pair or ()))
    if not static_only:
        _record_protocol(metadata, protocol, seed_value, table)
    return AbiPlan(pair, backend_pair, every_shape, part, shape_list, slots, dtype_list, op_list, metric_list, dev,
                   arch_list, eps_value, seed_value, protocol, strategy, pair_options, run_them, metadata, table,
                   static_only, runtime_only, o.in_process, fail_pct, outputs, targets)
