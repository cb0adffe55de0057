"""The `lnbench abi-compare` command: config → cases → workers / compiles → rows → tables + CSV/JSON.

Runtime part, read top-down in `run`: the plan (lnbench.abi.plan) → P worker processes that each check and time
every case of the chosen pair (lnbench.abi.workers over lnbench.abi.pair_timing) → the parent aggregates
(lnbench.abi.aggregate.runtime_rows) → tables. On the null device (the default
for the flydsl pair without a ROCm GPU) the workers time the host side only (`direct`, `wrapper`) after
checking outputs by execution on the emulated device (lnbench.abi.null_device). Static part: compile both
ABIs for each arch and compare the compiled facts (lnbench.abi.static), plus the instructions each launch
executes on the emulated device where it is available. Exit 0 when everything ran, 1 on a failed check /
error / `--fail-if-slower` hit, 2 on usage errors.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import click

from lnbench import validate
from lnbench.abi.cases import PAIRS
from lnbench.backends import name_rows
from lnbench.cli_common import (EXIT_FAILED, EXIT_OK, config_option, console, device_option, eps_option, err_console,
                                guarded, kernel_source_option, md_option, nothing_ran, output_options, seed_option)
from lnbench.measure.protocol import protocol_options
from lnbench.run.gpus import devices_options
from lnbench.run.shard import shard_option

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.abi.plan import AbiPlan
    from lnbench.abi.workers import Share
    from lnbench.results import AbiRow


def executed_widths(shapes: list[tuple[int, int]], budget: int) -> dict[int, int]:
    """N -> rows the static part executes for that width: the smallest M of the shapes, within the budget."""
    from lnbench.abi.null_device import check_rows

    out: dict[int, int] = {}
    for m, n in shapes:
        out[n] = min(out.get(n, m), check_rows(m, n, budget))
    return out


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
def abi_compare_command(*, pair: str | None, shapes: tuple[str, ...], shape_set: str | None, dtypes: tuple[str, ...],
                        ops: tuple[str, ...], metrics: tuple[str, ...], arches: tuple[str, ...], static_only: bool,
                        runtime_only: bool, execute: bool | None, fail_pct: float | None, processes: int | None,
                        runs: int | None, warmup_s: float | None, min_warmup_calls: int | None,
                        target_run_s: float | None, min_iters: int | None, max_iters: int | None,
                        worker_timeout_s: float | None, eps: float | None, seed: int | None, device: str | None,
                        config_path: Path | None, planted_delay_us: float | None, details: bool, in_process: bool,
                        devices: str | None, force: bool, shard: str | None, kernel_src: Path | None,
                        md_path: Path | None, csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Tensor vs Pointer launch ABI: compiled-kernel facts side by side, and runtime speed-up with a CI."""
    from lnbench.abi.plan import AbiOptions, build_plan

    o = AbiOptions(pair=pair, shapes=shapes, shape_set=shape_set, dtypes=dtypes, ops=ops, metrics=metrics,
                   arches=arches, static_only=static_only, runtime_only=runtime_only, execute=execute,
                   fail_pct=fail_pct, processes=processes, runs=runs, warmup_s=warmup_s,
                   min_warmup_calls=min_warmup_calls, target_run_s=target_run_s, min_iters=min_iters,
                   max_iters=max_iters, worker_timeout_s=worker_timeout_s, eps=eps, seed=seed, device=device,
                   config_path=config_path, planted_delay_us=planted_delay_us, in_process=in_process,
                   devices=devices, force=force, shard=shard, kernel_src=kernel_src, md_path=md_path,
                   csv_path=csv_path, json_path=json_path)
    return run(build_plan(o), quiet, details)


def run(plan: AbiPlan, quiet: bool, details: bool = True) -> int:
    """The runtime part: plan → workers (lnbench.abi.workers) → aggregate (lnbench.abi.aggregate) → its tables;
    the static part compiled (and executed) → its table; then every row to the files."""
    from lnbench.abi.aggregate import runtime_rows as aggregate_runtime
    from lnbench.abi.cases import pair_info
    from lnbench.abi.summary import MORE, print_static
    from lnbench.abi.workers import Share, not_run_status, time_shares
    from lnbench.scaffold.sink import ResultSink
    from lnbench.output.tables import silent_console
    from lnbench.results import AbiRow

    csv_final, json_final, md_final = plan.outputs
    runtime_rows: list[AbiRow] = []
    shares: list[Share] = []
    static: list[AbiRow] = []
    modelled: list[AbiRow] = []
    parts = (0 if plan.runtime_only else 1) + (0 if plan.static_only else 1)
    with ResultSink(csv_final, json_final, plan.metadata, parts, "parts (runtime, static)") as sink:
        if not plan.static_only:
            not_run = {metric: not_run_status(plan.pair, plan.dev, metric) for metric in plan.metrics}
            shares = time_shares(plan, [metric for metric in plan.metrics if not not_run[metric]], quiet)
            runtime_rows = aggregate_runtime(plan, shares, not_run)
            _print_runtime(plan, runtime_rows, shares, quiet, details)
            if plan.targets is not None:          # --device emu: each case's modelled device floor beside its host cost
                modelled = modelled_part(runtime_rows, plan, quiet)
            sink.replace(runtime_rows + modelled, 1)   # the runtime part is in the files while the static part runs
            _print_problems(runtime_rows, _problems(shares))
        if not plan.runtime_only:
            static = _static_part(plan, quiet)
            print_static(static, pair_info(plan.pair).labels if plan.backend_pair else None, details,
                         console if not quiet else silent_console())
        if plan.backend_pair is not None:        # each row names both sides' sources (module @ checkout commit)
            name_rows(runtime_rows + static, plan.metadata.kernel_sources,
                      {f"{slot}_source": name for slot, name in zip(("tensor", "pointer"), plan.backend_pair)})
        payloads = [p for share in shares for p in share.payloads]
        sink.finish(runtime_rows + modelled + static, plan.metadata,
                    {"checks": [c for p in payloads for c in p.checks], "worker_problems": _problems(shares),
                     "workers": [p.to_wire() for p in payloads]},
                    md_path=md_final, summary=_summary_line(runtime_rows, static))
    if not details and not quiet:
        console.print(MORE)
    problems = _problems(shares)
    code = _exit_code(runtime_rows, static, problems, plan.fail_pct)
    if not static and not any(row.status == "ok" for row in runtime_rows) and not problems:
        why = next((str(row.status) for row in runtime_rows if row.status), "no measurement")
        return nothing_ran(why)
    return code


def _problems(shares: Sequence[Share]) -> list[str]:
    """Every share's worker problems, a GPU's named."""
    return [f"{share.slot.label}: {p}" if share.slot else p for share in shares for p in share.problems]


def _print_runtime(plan: AbiPlan, rows: list[AbiRow], shares: Sequence[Share], quiet: bool, details: bool) -> None:
    """The runtime table (quiet: kept for the Markdown only) and what its two sides are."""
    from lnbench.abi.cases import pair_info
    from lnbench.abi.summary import print_runtime
    from lnbench.output.tables import silent_console

    protocol, metadata = plan.protocol, plan.metadata
    how = (f"median of {protocol.processes} worker medians × {protocol.runs} runs"
           if any(s.payloads or s.problems for s in shares) else "no worker ran: nothing timed")
    print_runtime(rows, f"abi-compare runtime: {plan.pair} on {metadata.device_label} ({how})",
                  details, console if not quiet else silent_console())
    if not quiet:
        labels = pair_info(plan.pair).labels
        console.print(f"Tensor = {labels['tensor']}; Pointer = {labels['pointer']}. speed-up = Tensor time / "
                      f"Pointer time (> 1: Pointer faster); `same` = the {metadata.confidence} bootstrap "
                      f"interval contains 1.")


def _print_problems(rows: Sequence[AbiRow], problems: list[str]) -> None:
    """The workers' problems, then each failed check's or error's detail."""
    for problem in problems:
        console.print(f"[red]{problem}[/red]")
    for row in rows:
        if row.status in ("check failed", "error") and row.detail:
            console.print(f"[red]{row.op} {row.dtype} {row.shape} {row.metric}:[/red] {row.detail}")


def _static_part(plan: AbiPlan, quiet: bool) -> list[AbiRow]:
    """Both ABIs of every variant compiled for every arch (and executed on the emulated device where it runs)."""
    from lnbench.abi.plan import check_elements
    from lnbench.abi.static import static_rows
    from lnbench.run.progress import CommandProgress

    widths = plan.part.select(list(dict.fromkeys(n for _, n in plan.every_shape)))
    rows_for = executed_widths(plan.every_shape, check_elements(plan.table)) if plan.run_them else None
    with CommandProgress(err_console, "compiling" + (" and executing" if plan.run_them else ""),
                         len(plan.arches) * len(plan.ops) * len(plan.dtypes) * len(widths), quiet) as progress:
        pair_fns = {}
        if plan.backend_pair is not None:
            from lnbench.abi.backend_pairs import pair_execute_fn, pair_facts_fn
            pair_fns = {"facts_fn": pair_facts_fn(plan.backend_pair), "execute_fn": pair_execute_fn(plan.backend_pair)}
        return static_rows(plan.arches, plan.ops, plan.dtypes, widths, eps=plan.eps, dgamma_strategy=plan.strategy,
                           on_step=lambda: progress.advance(), execute=rows_for, **pair_fns)


def modelled_part(runtime_rows: Sequence[AbiRow], plan: AbiPlan, quiet: bool) -> list[AbiRow]:
    """The modelled rows of `abi-compare --device emu` (lnbench.abi.modelled), printed as their own table."""
    from lnbench.output.tables import silent_console

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


def _bad(runtime_rows: Sequence[AbiRow], static: Sequence[AbiRow]) -> list[AbiRow]:
    """Rows with an error or a failed check."""
    return [r for r in [*runtime_rows, *static] if str(r.status or "").startswith(("error", "check failed"))
            or str(r.exec_status or "").startswith("error")]


def _verdicts(runtime_rows: Sequence[AbiRow]) -> tuple[list[AbiRow], dict[str, int]]:
    from lnbench.results.verdicts import Verdict

    ok_rows = [r for r in runtime_rows if r.status == "ok"]
    return ok_rows, {v: sum(r.verdict == v for r in ok_rows)
                     for v in (Verdict.FASTER, Verdict.SAME, Verdict.SLOWER, Verdict.TOO_FEW)}


def _summary_line(runtime_rows: Sequence[AbiRow], static: Sequence[AbiRow]) -> str:
    """`runtime: 6 measured (3 FASTER, ...), 3 not measured; static: 8 of 8 kernel rows compiled; 0 errors`."""
    ok_rows, counts = _verdicts(runtime_rows)
    parts = []
    if runtime_rows:
        parts.append(f"runtime: {len(ok_rows)} measured ({', '.join(f'{n} {v}' for v, n in counts.items())}), "
                     f"{len(runtime_rows) - len(ok_rows)} not measured")
    if static:
        parts.append(f"static: {sum(r.status == 'ok' for r in static)} of {len(static)} kernel rows compiled")
    return "; ".join(parts + [f"{len(_bad(runtime_rows, static))} errors"])


def _exit_code(runtime_rows: Sequence[AbiRow], static: Sequence[AbiRow], problems: list[str],
               fail_pct: float | None) -> int:
    """Print the summary line; 1 on errors, failed checks, worker problems or a --fail-if-slower hit."""
    from lnbench.measure import stats
    from lnbench.results import verdicts
    from lnbench.results.verdicts import Verdict

    bad = _bad(runtime_rows, static)
    slower = [r for r in runtime_rows if r.status == "ok"
              and verdicts.fails_gate(r.verdict, r.slowdown_pct, fail_pct)] if fail_pct is not None else []
    ok_rows, counts = _verdicts(runtime_rows)
    warning = stats.too_few_warning(counts[Verdict.TOO_FEW], "measurement",
                                    float(ok_rows[0].confidence or 0.95) if ok_rows else 0.95)
    if warning:
        err_console.print(warning, soft_wrap=True, highlight=False)
    console.print(_summary_line(runtime_rows, static))
    for r in slower:
        console.print(f"[bold red]--fail-if-slower {fail_pct:g}: Pointer side {r.slowdown_pct:.1f}% slower "
                      f"on {r.op} {r.dtype} {r.shape} {r.metric} "
                      f"(speed-up {r.speedup:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}])[/bold red]")
    return EXIT_FAILED if bad or problems or slower else EXIT_OK
