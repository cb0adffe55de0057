"""The `lnbench abi-compare` command: config → cases → workers / compiles → rows → tables + CSV/JSON.

Runtime part: P worker processes (lnbench.measure.workers) each check and time every case of the chosen
pair (lnbench.abi.pair_timing); the parent aggregates (lnbench.abi.aggregate). On the null device (the default
for the flydsl pair without a ROCm GPU) the workers time the host side only (`direct`, `wrapper`) after
checking outputs by execution on the emulated device (lnbench.abi.null_device). Static part: compile both
ABIs for each arch and compare the compiled facts (lnbench.abi.static), plus the instructions each launch
executes on the emulated device where it is available. Exit 0 when everything ran, 1 on a failed check /
error / `--fail-if-slower` hit, 2 on usage errors.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import click

from lnbench import settings as cfg
from lnbench import validate
from lnbench.results import AbiRow, verdicts
from lnbench.results.verdicts import Verdict
from lnbench.measure import stats
from lnbench.abi.aggregate import (HOST_ONLY_NULL, NOT_RUN_EMULATED, NOT_RUN_NO_FLYDSL, NOT_RUN_NO_ROCM,
                                   NOT_RUN_NULL_DEVICE_TIME, aggregate, not_run_rows)
from lnbench.abi.cases import PAIRS, flydsl_pair, pair_info
from lnbench.abi.messages import AbiWorkerPayload, AbiWorkerSpec
from lnbench.abi.null_device import check_rows
from lnbench.abi.plan import TABLE, AbiOptions, AbiPlan, build_plan, check_elements
from lnbench.abi.static import flydsl_installed, static_rows
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, config_option, console, device_option, eps_option,
                                err_console, guarded, kernel_source_option, md_option, nothing_ran, output_options,
                                seed_option)
from lnbench.output.sink import ResultSink
from lnbench.backends import name_rows
from lnbench.run.device import Device
from lnbench.run.gpus import GpuSlot, deal, devices_options, run_spread
from lnbench.measure.host_lock import lock_environment
from lnbench.measure.protocol import Protocol, protocol_options
from lnbench.run.progress import CommandProgress
from lnbench.abi.summary import MORE, print_runtime, print_static
from lnbench.output.tables import silent_console
from lnbench.run.shard import shard_option

WORKER_MODULE = "lnbench.abi.worker_main"

def executed_widths(shapes: list[tuple[int, int]], budget: int) -> dict[int, int]:
    """N -> rows the static part executes for that width: the smallest M of the shapes, within the budget."""
    out: dict[int, int] = {}
    for m, n in shapes:
        out[n] = min(out.get(n, m), check_rows(m, n, budget))
    return out


def _in_order(rows: list[AbiRow], ops, dtypes, shapes, metrics) -> list[AbiRow]:
    shape_names = [f"{m}x{n}" for m, n in shapes]

    def rank(row: Mapping[str, Any]) -> tuple[int, ...]:
        return tuple(seq.index(row[key]) if row[key] in seq else len(seq)
                     for seq, key in ((ops, "op"), (dtypes, "dtype"), (shape_names, "shape"), (metrics, "metric")))
    return sorted(rows, key=rank)


def probe_shapes(shapes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """An extra, untimed shape for the alternation check when all shapes share one N."""
    if len({n for _, n in shapes}) >= 2:
        return []
    m, n = shapes[0]
    return [(m, n * 2 if n <= 8192 else n // 2)]


def not_run_status(pair: str, device: Device, metric: str) -> str:
    """`not run (reason)` when no worker can measure `metric` of `pair` on `device`, else ''."""
    if not device.host_times_are_real:
        return NOT_RUN_EMULATED
    if flydsl_pair(pair) and not device.launches_flydsl:
        return NOT_RUN_NO_ROCM
    if flydsl_pair(pair) and not flydsl_installed():
        return NOT_RUN_NO_FLYDSL
    if metric == "device" and not device.times_are_real:     # the null device: launches execute nothing
        return NOT_RUN_NULL_DEVICE_TIME
    return ""


def _run_runtime(pair: str, ops, dtypes, shapes, metrics, device: Device, protocol: Protocol,
                 table: dict[str, Any], eps: float, seed: int, pair_options: dict[str, Any], in_process: bool,
                 quiet: bool, slots: list[GpuSlot] | None = None
                 ) -> tuple[list[AbiRow], list[AbiWorkerPayload], list[str]]:
    """(rows, worker payloads, worker problems) of the runtime part: the workers time the metrics that can run
    here, every other metric gets `not run (reason)` rows (see not_run_status).

    slots (--devices): the shapes are dealt out over the GPUs, and every GPU's workers start at once; each
    worker's timed turn holds the host lock exclusive (lnbench.measure.host_lock), so it times while no other
    GPU is timing: what abi-compare measures is the host's cost of a launch, which any other timing on the host
    would move. Rows name their GPU."""
    labels = pair_info(pair).labels
    not_run = {metric: not_run_status(pair, device, metric) for metric in metrics}
    measured = [metric for metric in metrics if not not_run[metric]]
    rows = [row for metric in metrics if not_run[metric]
            for row in not_run_rows(pair, labels, ops, dtypes, shapes, not_run[metric], [metric])]
    shares = [(slot, share) for slot, share in (zip(slots, deal(shapes, len(slots))) if slots else [(None, shapes)])
              if share] if measured else []
    if not shares:
        return _in_order(rows, ops, dtypes, shapes, metrics), [], []
    total = sum(len(share) * len(ops) * len(dtypes) + protocol.runs for _, share in shares) * protocol.processes
    done: dict[tuple[int, int], int] = {}
    guard = threading.Lock()
    got: dict[int, tuple[list[AbiWorkerPayload], list[str]]] = {}
    with CommandProgress(err_console, f"abi-compare {pair}", total, quiet) as progress:

        def on_progress(number: int, worker: int, count: int, label: str) -> None:
            with guard:
                done[(number, worker)] = count
                where = f"{slot.label} " if (slot := shares[number][0]) else ""
                progress.update(sum(done.values()), label, f"abi-compare {pair} {where}worker {worker + 1}/"
                                                           f"{protocol.processes}")

        def run_share(number: int, stop: threading.Event | None, lock: dict[str, str]) -> None:
            slot, share = shares[number]
            env = {**slot.env(), **lock} if slot else None
            where = slot.worker_device if slot else str(device.torch_device)
            got[number] = _run_workers(pair, ops, dtypes, share, measured, device, protocol, table, eps, seed,
                                       pair_options, in_process, where, env, lambda *a: on_progress(number, *a), stop)

        if slots:
            numbers = {slot.index: k for k, (slot, _) in enumerate(shares) if slot is not None}     # (all are)
            with lock_environment() as lock:
                run_spread([slot for slot, _ in shares if slot is not None], [[k] for k in range(len(shares))],
                           lambda slot, items, stop: run_share(items[0], stop, lock),
                           lambda record: got.setdefault(numbers[record.slot.index],
                                                         ([], [record.error] if record.error else [])))
        else:
            run_share(0, None, {})
    payloads: list[AbiWorkerPayload] = []
    problems: list[str] = []
    for number, (slot, share) in enumerate(shares):
        mine, trouble = got.get(number, ([], ["no result"]))
        timed = aggregate(pair, labels, mine, measured, n_boot=int(cfg.require(table, "bootstrap", int, TABLE)),
                          confidence=float(cfg.require(table, "confidence", (int, float), TABLE)),
                          seed=int(cfg.require(table, "stats_seed", int, TABLE)))
        if not mine:
            timed = not_run_rows(pair, labels, ops, dtypes, share, "error (no worker returned results)", measured)
        for row in timed:
            if not device.times_are_real:                        # the null device: host work only
                row["scope"] = HOST_ONLY_NULL
            if slot is not None:
                row.update(gpu=slot.label, gpu_model=slot.model, timed_alone=True)
        payloads += mine
        problems += [f"{slot.label}: {p}" if slot else p for p in trouble]
        rows += timed
    return _in_order(rows, ops, dtypes, shapes, metrics), payloads, problems


def _run_workers(pair: str, ops, dtypes, shapes, metrics, device: Device, protocol: Protocol,
                 table: dict[str, Any], eps: float, seed: int, pair_options: dict[str, Any], in_process: bool,
                 where: str, env: dict[str, str | None] | None, on_progress: Callable[[int, int, str], None],
                 stop: threading.Event | None = None) -> tuple[list[AbiWorkerPayload], list[str]]:
    """(payloads, problems) of P workers timing `metrics` of every case on `where` (in this process with
    in_process), with `env` added to theirs (a GPU's visibility and the host lock, --devices).
    on_progress(worker, units done, label)."""
    spec = AbiWorkerSpec(pair, list(ops), list(dtypes), [(m, n) for m, n in shapes], eps, seed, protocol,
                         [(m, n) for m, n in probe_shapes(shapes)], where, list(metrics), pair_options)
    if device.is_null:                          # each worker activates it (and checks by execution on the emulator)
        spec = replace(spec, lnbench_device=device.name, check_elements=check_elements(table))
    specs = [replace(spec, worker_index=i) for i in range(protocol.processes)]
    payloads: list[AbiWorkerPayload] = []
    problems: list[str] = []
    if in_process:
        from lnbench.abi.worker_main import run_spec
        for i, one in enumerate(specs):
            count = [0]

            def advance(label: str, i: int = i, count: list[int] = count) -> None:
                count[0] += 1
                on_progress(i, count[0], label)

            payloads.append(run_spec(one, on_progress=advance))
        return payloads, problems
    from lnbench.measure.workers import run_workers
    for result in run_workers(WORKER_MODULE, specs, protocol.worker_timeout_s, env=env, on_progress=on_progress,
                              stop=stop):
        if result.payload:
            payloads.append(AbiWorkerPayload.from_wire(result.payload))
        if not result.ok:
            problems.append(result.problem())
    return payloads, problems


@click.command("abi-compare")
@click.option("--pair", help="Call-path pair (default: config, flydsl): " + ", ".join(PAIRS) + ", or A,B: two FlyDSL "
                             "kernel backends side by side, e.g. flydsl-src,flydsl (FlyDSL's LayerNorm vs lnbench's; "
                             "A takes the Tensor slot, B the Pointer slot).")
@click.option("--shapes", multiple=True, help="MxN list, e.g. 32x1024,4096x4096 (default: config). Static part: their N.")
@click.option("--shape-set", help="Named shape set of the config's [abi_compare.shape_sets], e.g. full (the default run: "
                                  "[abi_compare] shapes).")
@click.option("--dtype", "dtypes", multiple=True, help="f32, f16, bf16 (repeatable or comma list; default: config).")
@click.option("--op", "ops", multiple=True, help="fwd, fwd-nostats, bwd (repeatable or comma list).")
@click.option("--metric", "metrics", multiple=True, help="direct, wrapper, device (repeatable or comma list).")
@click.option("--arch", "arches", multiple=True,
              help="Static part: gfx942, gfx950 (default: the arch of the ROCm GPU or emulated device, else both).")
@click.option("--static-only", is_flag=True, help="Only the compile-only comparison (no GPU needed).")
@click.option("--runtime-only", is_flag=True, help="Only the runtime comparison.")
@click.option("--execute/--no-execute", "execute", default=None,
              help="Static part: also run both ABIs of every variant on the emulated device (where it is available) "
                   "and show the wave-instructions each launch executes (default: execute).")
@click.option("--fail-if-slower", "fail_pct", type=validate.FLOAT, metavar="PCT",
              help="Exit 1 when the Pointer side is significantly slower than the Tensor side by more than PCT %.")
@protocol_options
@eps_option
@seed_option("Input seed (default: config).")
@device_option("cpu, cuda, cuda:N, emu[:gfx950], null[:gfx950] (default: the GPU when there is one; for the flydsl "
               "pair without a ROCm GPU, null: host cost only; emu: static part for its arch, runtime rows `not run`).")
@config_option
@click.option("--planted-delay-us", type=validate.FLOAT, help="planted-slow pair: extra host µs per call on the pointer side.")
@click.option("--details", is_flag=True, help="Print every row (default: a summary per op and measurement, and per "
                                              "arch, op and kernel; every row is in the CSV/JSON).")
@click.option("--in-process", is_flag=True, hidden=True, help="Run the P workers inside this process (tests, debugging).")
@devices_options
@shard_option
@kernel_source_option
@md_option
@output_options
@guarded
def abi_compare_command(details: bool, quiet: bool, **options: Any) -> int:
    """Tensor vs Pointer launch ABI: compiled-kernel facts side by side, and runtime speed-up with a CI."""
    return run(build_plan(AbiOptions(**options)), quiet, details)


def run(plan: AbiPlan, quiet: bool, details: bool = True) -> int:
    """The runtime part in workers, the static part compiled (and executed), tables printed, rows written."""
    (pair, backend_pair, every_shape, part, shape_list, slots, dtype_list, op_list, metric_list, dev, arch_list,
     eps_value, seed_value, protocol, strategy, pair_options, run_them, metadata, table) = (
        plan.pair, plan.backend_pair, plan.every_shape, plan.part, plan.shapes, plan.slots, plan.dtypes, plan.ops,
        plan.metrics, plan.dev, plan.arches, plan.eps, plan.seed, plan.protocol, plan.strategy, plan.pair_options,
        plan.run_them, plan.metadata, plan.table)
    static_only, runtime_only, in_process, fail_pct = plan.static_only, plan.runtime_only, plan.in_process, plan.fail_pct
    csv_final, json_final, md_final = plan.outputs
    runtime_rows: list[AbiRow] = []
    payloads: list[AbiWorkerPayload] = []
    problems: list[str] = []
    static: list[AbiRow] = []
    modelled: list[AbiRow] = []
    parts = (0 if runtime_only else 1) + (0 if static_only else 1)
    with ResultSink(csv_final, json_final, metadata, parts, "parts (runtime, static)") as sink:
        if not static_only:
            runtime_rows, payloads, problems = _run_runtime(
                pair, op_list, dtype_list, shape_list, metric_list, dev, protocol, table, eps_value, seed_value,
                pair_options, in_process, quiet, slots)
            how = (f"median of {protocol.processes} worker medians × {protocol.runs} runs" if payloads or problems
                   else "no worker ran: nothing timed")
            print_runtime(runtime_rows, f"abi-compare runtime: {pair} on {metadata.device_label} ({how})",
                          details, console if not quiet else silent_console())
            if not quiet:
                labels = pair_info(pair).labels
                console.print(f"Tensor = {labels['tensor']}; Pointer = {labels['pointer']}. speed-up = Tensor time / "
                              f"Pointer time (> 1: Pointer faster); `same` = the {metadata.confidence} bootstrap "
                              f"interval contains 1.")
            if plan.targets is not None:          # --device emu: each case's modelled device floor beside its host cost
                modelled = modelled_part(runtime_rows, plan, quiet)
            sink.replace(runtime_rows + modelled, 1)   # the runtime part is in the files while the static part runs
            for problem in problems:
                console.print(f"[red]{problem}[/red]")
            for row in runtime_rows:
                if row.get("status") in ("check failed", "error") and row.get("detail"):
                    console.print(f"[red]{row['op']} {row['dtype']} {row['shape']} {row['metric']}:[/red] "
                                  f"{row['detail']}")

        if not runtime_only:
            widths = part.select(list(dict.fromkeys(n for _, n in every_shape)))
            rows_for = executed_widths(every_shape, check_elements(table)) if run_them else None
            with CommandProgress(err_console, "compiling" + (" and executing" if run_them else ""),
                                 len(arch_list) * len(op_list) * len(dtype_list) * len(widths), quiet) as progress:
                pair_fns = {}
                if backend_pair is not None:
                    from lnbench.abi.backend_pairs import pair_execute_fn, pair_facts_fn
                    pair_fns = {"facts_fn": pair_facts_fn(backend_pair), "execute_fn": pair_execute_fn(backend_pair)}
                static = static_rows(arch_list, op_list, dtype_list, widths, eps=eps_value, dgamma_strategy=strategy,
                                     on_step=lambda: progress.advance(), execute=rows_for, **pair_fns)
            print_static(static, pair_info(pair).labels if backend_pair else None, details,
                         console if not quiet else silent_console())

        if backend_pair is not None:            # each row names both sides' sources (module @ checkout commit)
            name_rows(runtime_rows + static, metadata.kernel_sources,
                      {f"{slot}_source": name for slot, name in zip(("tensor", "pointer"), backend_pair)})
        checks = [c for p in payloads for c in p.checks]
        sink.finish(runtime_rows + modelled + static, metadata,
                    {"checks": checks, "worker_problems": problems, "workers": [p.to_wire() for p in payloads]},
                    md_path=md_final, summary=_summary_line(runtime_rows, static))
    if not details and not quiet:
        console.print(MORE)
    code = _exit_code(runtime_rows, static, problems, fail_pct)
    if not static and not any(row.get("status") == "ok" for row in runtime_rows) and not problems:
        why = next((str(row.get("status")) for row in runtime_rows if row.get("status")), "no measurement")
        return nothing_ran(why)
    return code


def modelled_part(runtime_rows: Sequence[Mapping[str, Any]], plan: AbiPlan, quiet: bool) -> list[AbiRow]:
    """The modelled rows of `abi-compare --device emu` (lnbench.abi.modelled), printed as their own table."""
    from lnbench.abi.modelled import modelled_rows
    from lnbench.run.device import activate, emu_device
    from lnbench.output.tables import Column, fmt_time_us, render_table

    activate(emu_device(plan.dev.arch))
    assert plan.targets is not None                 # an emulated device's plan has its targets
    rows = modelled_rows(runtime_rows, plan.targets, plan.dev.arch, plan.eps, plan.strategy)
    plan.metadata.modelled_targets = [t.name for t in plan.targets]
    columns = [Column(k, k, justify="left") for k in ("op", "dtype", "shape", "target")] + [
        Column(f"{s}_{w}", f"{s} {label}", fmt_time_us) for s in ("tensor", "pointer")
        for w, label in (("us", "host (measured)"), ("bound_us", "device floor (MODELLED)"))] + [
        Column("tensor_limit", "Tensor limited by", justify="left"),
        Column("pointer_limit", "Pointer limited by", justify="left")]
    render_table(console if not quiet else silent_console(),
                 f"abi-compare on emu:{plan.dev.arch}: host cost measured on {plan.dev.name} beside the MODELLED "
                 f"device floor (hot; lower bound, not a timing)", columns, rows)
    return rows


def _bad(runtime_rows: Sequence[Mapping[str, Any]], static: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows with an error or a failed check."""
    return [r for r in [*runtime_rows, *static] if str(r.get("status", "")).startswith(("error", "check failed"))
            or str(r.get("exec_status", "")).startswith("error")]


def _verdicts(runtime_rows: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    ok_rows = [r for r in runtime_rows if r.get("status") == "ok"]
    return ok_rows, {v: sum(r.get("verdict") == v for r in ok_rows)
                     for v in (Verdict.FASTER, Verdict.SAME, Verdict.SLOWER, Verdict.TOO_FEW)}


def _summary_line(runtime_rows: Sequence[Mapping[str, Any]], static: Sequence[Mapping[str, Any]]) -> str:
    """`runtime: 6 measured (3 FASTER, ...), 3 not measured; static: 8 of 8 kernel rows compiled; 0 errors`."""
    ok_rows, counts = _verdicts(runtime_rows)
    parts = []
    if runtime_rows:
        parts.append(f"runtime: {len(ok_rows)} measured ({', '.join(f'{n} {v}' for v, n in counts.items())}), "
                     f"{len(runtime_rows) - len(ok_rows)} not measured")
    if static:
        parts.append(f"static: {sum(r.get('status') == 'ok' for r in static)} of {len(static)} kernel rows compiled")
    return "; ".join(parts + [f"{len(_bad(runtime_rows, static))} errors"])


def _exit_code(runtime_rows: Sequence[Mapping[str, Any]], static: Sequence[Mapping[str, Any]], problems: list[str],
               fail_pct: float | None) -> int:
    """Print the summary line; 1 on errors, failed checks, worker problems or a --fail-if-slower hit."""
    bad = _bad(runtime_rows, static)
    slower = [r for r in runtime_rows if r.get("status") == "ok"
              and verdicts.fails_gate(r["verdict"], r["slowdown_pct"], fail_pct)] if fail_pct is not None else []
    ok_rows, counts = _verdicts(runtime_rows)
    warning = stats.too_few_warning(counts[Verdict.TOO_FEW], "measurement",
                                    float(ok_rows[0]["confidence"]) if ok_rows else 0.95)
    if warning:
        err_console.print(warning, soft_wrap=True, highlight=False)
    console.print(_summary_line(runtime_rows, static))
    for r in slower:
        console.print(f"[bold red]--fail-if-slower {fail_pct:g}: Pointer side {r['slowdown_pct']:.1f}% slower "
                      f"on {r['op']} {r['dtype']} {r['shape']} {r['metric']} "
                      f"(speed-up {r['speedup']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}])[/bold red]")
    return EXIT_FAILED if bad or problems or slower else EXIT_OK
