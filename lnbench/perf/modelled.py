"""`lnbench perf --device emu[:ARCH]`: no timing. Every case runs once on the emulated device (in parallel over
cases, like verify), and each launch's profile becomes modelled floors on every target of the arch
(lnbench.modelled). Rows are the `profile` kind, each labelled modelled; two runs give identical rows.

    plan   options and config checked once (targets, backends that run on the emulator, cases)
    run    execute each case (worker processes), floors per launch × target × mode → ProfileRow
"""
from __future__ import annotations

import base64
import os
import pickle
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lnbench import settings as cfg
from lnbench import validate
from lnbench.backends import OWN_FLYDSL, check_backend_names, record_sources, runs_flydsl, source_spec
from lnbench.constants import KERNEL_OPS
from lnbench.run.device import Device, emulator_status, parse_device
from lnbench.errors import LnbenchUsageError
from lnbench.run.metadata import provenance
from lnbench.modelled.floors import MODES, floors
from lnbench.modelled.targets import Target, targets_for
from lnbench.perf.options import PerfOptions
from lnbench.results import PROFILE, ProfileRow, RunRecord
from lnbench.scaffold.setup import Setup, begin, element_bytes


@dataclass(frozen=True)
class ModelCase:
    """One variant to execute: a backend's kernels for op × dtype × M × N."""

    backend: str
    op: str
    dtype: str
    m: int
    n: int
    abi: str
    strategy: str

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}"


@dataclass
class ModelledPlan:
    dev: Device
    targets: list[Target]
    modes: list[str]
    cases: list[ModelCase]
    eps: float
    seed: int
    jobs: int
    run: RunRecord
    outputs: tuple[Path | None, Path | None, Path | None]


def is_emulated(device: str | None) -> bool:
    """Does --device name the emulated device (emu, emu:ARCH)?"""
    return bool(device) and str(device).strip().lower().split(":", 1)[0] == "emu"


def _variants(backend: str) -> list[tuple[str, str]]:
    """(abi, dγ strategy) of the kernels a backend runs ('' for a kernel source: its launcher says)."""
    return {"flydsl": [("pointer", "deterministic")], "flydsl-tensor": [("tensor", "deterministic")],
            "flydsl-atomic": [("pointer", "atomic")]}.get(backend, [("", "")])


def build_modelled_plan(o: PerfOptions) -> ModelledPlan:
    """Check the options that apply (the timing protocol's do not: nothing is timed), the targets and the
    backends, before any work; reserve the outputs."""
    if o.devices:
        raise LnbenchUsageError("--devices spreads timing over GPUs; the emulated device is one: drop --devices")
    if o.shard:
        raise LnbenchUsageError("--shard is not supported with the emulated device (cases run once, in parallel)")
    dev = parse_device(o.device)
    usable, why = emulator_status()
    if not usable:
        raise LnbenchUsageError(f"the emulated device cannot run here: {why}")
    Setup.check_toolkit(required=True)
    setup = begin("perf", o.config_path, "perf")
    config, table = setup.config, setup.table
    targets = targets_for(config, dev.arch)
    if not targets:
        raise LnbenchUsageError(f"no target of arch {dev.arch} in the config's [targets]")
    setup.use_kernel_src(o.kernel_src)
    requested = validate.listed(o.backends, "backend", cfg.require(table, "backends", list, "perf"))
    names = list(dict.fromkeys(n for b in requested for n in (["flydsl"] if b == "auto" else [b])))
    check_backend_names(names)
    for name in names:
        if not runs_flydsl(name):
            raise LnbenchUsageError(f"backend {name} does not run on the emulated device (FlyDSL kernels only: "
                                    f"{', '.join(OWN_FLYDSL)}, flydsl-src, a kernel source)")
    op_list = validate.listed(o.ops, "op", cfg.require(table, "ops", list, "perf"))
    op_list = [op for item in op_list for op in (["fwd", "bwd"] if item == "fwd+bwd" else [item])]
    for op in op_list:
        if op not in KERNEL_OPS:
            raise LnbenchUsageError(f"unknown op {op!r}; choose from {', '.join(KERNEL_OPS)}, fwd+bwd")
    mode_list = validate.listed(o.modes, "mode", [m for m in cfg.require(table, "modes", list, "perf") if m in MODES])
    if set(mode_list) - set(MODES):
        raise LnbenchUsageError(f"the emulated device models the modes {', '.join(MODES)}, not "
                                f"{', '.join(sorted(set(mode_list) - set(MODES)))}")
    dtype_list = cfg.parse_dtypes(o.dtypes, cfg.require(table, "dtypes", list, "perf"))
    shape_list = cfg.chosen_shapes(config, "perf", o.shapes, o.shape_set)
    setup.fit(shape_list, element_bytes(8, dtype_list), dev,
              "perf on the emulated device (x, y, dy, dx and workspace in host memory)")
    eps_value = cfg.option_or_config(o.eps, table, "eps", "--eps", (int, float), "perf", validate.eps)
    seed_value = cfg.option_or_config(o.seed, table, "seed", "--seed", int, "perf", validate.seed)
    cases = [ModelCase(b, op, dt, m, n, abi, strategy) for b in names for abi, strategy in _variants(b)
             for op in op_list for dt in dtype_list for m, n in shape_list]
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path)
    run = provenance(dev, PROFILE, "perf")
    run.set(modelled=True, targets={t.name: _figures(t) for t in targets}, modes=",".join(mode_list),
            eps=float(eps_value), seed=int(seed_value))
    jobs = max(1, min(len(cases), len(os.sched_getaffinity(0))))
    run.jobs = jobs
    return ModelledPlan(dev, targets, mode_list, cases, float(eps_value), int(seed_value), jobs,
                        record_sources(run, names), outputs)


def _figures(t: Target) -> dict[str, Any]:
    return {k: v for k, v in asdict(t).items() if v not in (None, {}) and k != "name"}


def execute_case(case: ModelCase, arch: str, eps: float, seed: int) -> list[Any]:
    """Run one case on the emulated device (in a worker or here): its launches (inspect.ExecutedKernel)."""
    from lnbench.flydsl.inspect import execute_variant
    spec = source_spec(case.backend) if case.backend not in OWN_FLYDSL else None
    return execute_variant(case.op, case.dtype, case.m, case.n, case.abi or "pointer", arch, eps=eps,
                           dgamma_strategy=case.strategy or "deterministic", seed=seed, source=spec)


def case_rows(case: ModelCase, launches: list[Any], plan: ModelledPlan) -> list[ProfileRow]:
    """The rows of one case: launch × target × mode."""
    from lnbench.flydsl.inspect import kernel_role
    rows = []
    for k in launches:
        loaded, stored = k.unique_bytes()
        launch = k.as_launch()
        profile = dict(grid="x".join(map(str, k.grid)), block="x".join(map(str, k.block)),
                       workgroups=launch.workgroups, waves_per_group=launch.waves_per_group,
                       exec_instructions=k.total, **{f"exec_{c}": n for c, n in k.wave_instructions.items()},
                       unique_bytes_loaded=loaded, unique_bytes_stored=stored,
                       global_bytes_loaded=k.global_bytes_loaded, global_bytes_stored=k.global_bytes_stored,
                       lds_bytes=k.lds_bytes, lds_bank_cycles=k.lds_bank_cycles,
                       lds_conflict_cycles=k.lds_conflict_cycles, vgprs=k.vgprs, agprs=k.agprs, sgprs=k.sgprs,
                       lds_alloc=k.lds_alloc, code_object=k.code_object,
                       intensity=64 * k.wave_instructions.get("valu", 0) / max(loaded + stored, 1))
        for t in plan.targets:
            for mode in plan.modes:
                f = floors(launch, t, mode)
                row = ProfileRow(modelled=True, backend=case.backend, op=case.op, dtype=case.dtype, shape=case.shape,
                                 M=case.m, N=case.n, launch=kernel_role(k.kernel_name), kernel_name=k.kernel_name,
                                 abi=k.abi, dgamma_strategy=k.dgamma_strategy, arch=plan.dev.arch, target=t.name,
                                 mode=mode, status="ok", **profile)
                row.set(waves_per_simd=f.occupancy.waves_per_simd, workgroups_per_cu=f.occupancy.workgroups_per_cu,
                        occupancy_limiter=f.occupancy.limiter, busiest_cu_workgroups=f.busiest_cu_workgroups,
                        memory_us=f.memory_us, lds_us=f.lds_us, launch_us=f.launch_us,
                        bound_us=f.bound_us, bound_by=f.bound_by, notes="; ".join(f.notes))
                row.set(**{f"issue_{cls}_us": us for cls, us in f.issue_us.items()})
                rows.append(row)
    return rows


def failed_row(case: ModelCase, plan: ModelledPlan, detail: str) -> ProfileRow:
    return ProfileRow(modelled=True, backend=case.backend, op=case.op, dtype=case.dtype, shape=case.shape, M=case.m,
                      N=case.n, launch="", arch=plan.dev.arch, target="", mode="", status="error", detail=detail)


def run_cases(plan: ModelledPlan, on_case) -> list[ProfileRow]:
    """Execute every case (worker processes when there is more than one job: lnbench.run.units, each worker
    `python -m lnbench.perf.modelled SPEC FD`), rows in case order; `on_case(index, case, rows, measured)` is
    called after each case, `measured` its (seconds, compile seconds, compiles, cold ones) where it ran (None
    where it failed). A worker that dies costs only the case it was running (its error row)."""
    rows: list[ProfileRow] = []
    args = (plan.dev.arch, plan.eps, plan.seed)
    if plan.jobs == 1:
        _preload()
        for index, case in enumerate(plan.cases):
            got = _attempt(case, *args)
            rows += (done := _rows(case, got, plan))
            on_case(index, case, done, got[2])
        return rows
    from lnbench.run import units
    from lnbench.run.pool import WORKER_ENV, Pool, Worker

    finished: dict[int, list[ProfileRow]] = {}

    def answered(unit: int, answer: dict[str, Any], slot: None) -> None:
        got = pickle.loads(base64.b64decode(answer["got"]))
        finished[unit] = _rows(plan.cases[unit], got, plan)
        on_case(unit, plan.cases[unit], finished[unit], got[2])

    def lost(gone: units.Lost, slot: None) -> None:
        detail = f"worker process died (exit {gone.exit_code}) while running this case" + (
            f": {gone.last_line}" if gone.last_line else "")
        finished[gone.unit] = [failed_row(plan.cases[gone.unit], plan, detail)]
        on_case(gone.unit, plan.cases[gone.unit], finished[gone.unit], None)

    with Pool("lnbench-profile-") as pool:
        spec = pool.root / "spec.pickle"
        spec.write_bytes(pickle.dumps((plan.cases, *args)))

        def start(number: int, slot: None) -> Worker:
            return pool.start(number, "lnbench.perf.modelled", [str(spec)], WORKER_ENV, pool.folder(f"w{number}"),
                              answers=True)

        units.run_units(pool, start, units.InOrder(range(len(plan.cases))), [None] * plan.jobs, answered, lost)
    return [row for index in sorted(finished) for row in finished[index]]


def worker_main(argv: list[str]) -> None:
    """Worker side (`python -m lnbench.perf.modelled SPEC FD`): execute each case named on stdin and answer on the
    pipe (lnbench.run.units.serve) with what `_attempt` returned, pickled."""
    from lnbench.run.pool import worker_setup
    from lnbench.run.units import serve

    worker_setup()
    cases, arch, eps, seed = pickle.loads(Path(argv[0]).read_bytes())
    _preload()
    serve(lambda unit: {"got": base64.b64encode(pickle.dumps(_attempt(cases[unit], arch, eps, seed))).decode()},
          int(argv[1]))


def _preload() -> None:
    """Import what executing a case needs (FlyDSL, the emulator) before the first case: a process's start, not
    its first case's time (lnbench.perf.calibrate records the two apart)."""
    import importlib

    for module in ("lnbench.flydsl.inspect", "lnbench.flydsl.launch", "lnbench.emu.machine", "flydsl.compiler"):
        try:
            importlib.import_module(module)
        except ImportError:          # (a missing FlyDSL is reported by the case that needs it)
            pass


def _attempt(case: ModelCase, arch: str, eps: float, seed: int
             ) -> tuple[list[Any], str, tuple[float, float, int, int] | None]:
    """(launches, '', measured) or ([], why it failed, None): a fault or error in one case never stops the
    others. measured: the case's (seconds, compile seconds, compiles, cold ones) in the process that ran it."""
    from lnbench.flydsl import compile_log

    start, before = time.monotonic(), len(compile_log.COMPILES)
    try:
        launches = execute_case(case, arch, eps, seed)
    except Exception as exc:  # noqa: BLE001 - reported as the case's error row
        return [], f"{type(exc).__name__}: {exc}".splitlines()[0], None
    return launches, "", (time.monotonic() - start, *compile_log.since(before))


def _rows(case: ModelCase, got: tuple[list[Any], str, Any], plan: ModelledPlan) -> list[ProfileRow]:
    launches, error, _ = got
    return case_rows(case, launches, plan) if not error else [failed_row(case, plan, error)]


def finish(plan: ModelledPlan, started: float) -> None:
    plan.run.set(wall_s=round(time.monotonic() - started, 3))


def run_modelled(plan: ModelledPlan, quiet: bool) -> int:
    """Execute the cases (finished ones reach the result files as they come: an interrupt keeps them), print the
    modelled floors, write the profile rows; exit 1 when a case failed."""
    from rich.markup import escape

    from lnbench.cli_common import EXIT_FAILED, EXIT_OK, err_console
    from lnbench.run.eta import cores
    from lnbench.perf.calibrate import modelled_estimate
    from lnbench.perf.modelled_tables import print_profile
    from lnbench.run.progress import CommandProgress
    from lnbench.scaffold.sink import ResultSink

    started = time.monotonic()
    csv_path, json_path, md_path = plan.outputs
    estimate, record = modelled_estimate(plan.cases, plan.jobs, plan.dev, plan.eps)
    ahead = record.upfront
    if not quiet and ahead is not None:
        err_console.print(escape(ahead.line(f"{len(plan.cases)} cases, {plan.jobs} job{'s' if plan.jobs > 1 else ''}",
                                            estimate.others, cores())), soft_wrap=True, highlight=False)
    if ahead is not None:
        ahead.keep(plan.run)
    with ResultSink(csv_path, json_path, plan.run, len(plan.cases), "cases") as sink:
        with CommandProgress(err_console, "profiling", len(plan.cases), quiet, estimate.remaining_s) as progress:
            def on_case(index: int, case: ModelCase, rows: list[ProfileRow], measured: Any) -> None:
                sink.add(index, rows)
                record.case(index, measured)
                estimate.update(sink.done)
                progress.update(sink.done, f"{case.backend} {case.op} {case.dtype} {case.shape}", "emulated")
            rows = run_cases(plan, on_case)
        finish(plan, started)
        if ahead is not None:
            ahead.keep(plan.run, estimate.running.clock() - estimate.running.start)
        print_profile(rows, plan.dev.arch, quiet)
        sink.finish(rows, plan.run, md_path=md_path,
                    summary=f"{len(rows)} modelled row(s) over {len(plan.targets)} target(s)")
    record.finish()                 # what its cases, compiles and start took, for the next estimate here
    return EXIT_FAILED if any(r.status != "ok" for r in rows) else EXIT_OK

if __name__ == "__main__":
    from lnbench.perf.modelled import worker_main as _main     # (the module's own names, not __main__'s: pickles)

    _main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)     # every answer is written: skip the interpreter's teardown
