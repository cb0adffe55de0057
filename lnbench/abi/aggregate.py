"""Worker payloads -> one runtime row per case × measurement (median of worker medians, speed-up, paired bootstrap
interval, verdict)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from lnbench.measure import stats
from lnbench.abi.messages import AbiWorkerPayload, MetricRecord, Share
from lnbench.abi.pair_timing import METRICS
from lnbench.abi.schedule import SIDES
from lnbench.measure import kernel_stats
from lnbench.measure.stats import worker_flags
from lnbench.results import AbiRow

if TYPE_CHECKING:
    from lnbench.abi.plan import AbiPlan

NOT_RUN_NO_ROCM = "not run (no ROCm GPU)"
NOT_RUN_EMULATED = "not run (emulated device: no timing)"
NOT_RUN_NO_FLYDSL = "not run (flydsl not installed)"
NOT_RUN_NULL_DEVICE_TIME = "not run (null device: no device time)"
#: the `scope` of the rows measured on the null device: FlyDSL's real launch path, kernels never executed
HOST_ONLY_NULL = "host only (null device)"


def base_row(pair: str, labels: dict[str, str], op: str, dtype: str, shape: Sequence[int], metric: str,
             **cells: Any) -> AbiRow:
    """A runtime row of one case × measurement, with `cells`."""
    m, n = int(shape[0]), int(shape[1])
    return AbiRow(part="runtime", pair=pair, op=op, dtype=dtype, shape=f"{m}x{n}", M=m, N=n, metric=metric,
                  tensor_label=labels.get("tensor", "tensor"), pointer_label=labels.get("pointer", "pointer"),
                  **cells)


def not_run_rows(pair: str, labels: dict[str, str], ops: Sequence[str], dtypes: Sequence[str],
                 shapes: Sequence[Sequence[int]], status: str, metrics: Sequence[str] = METRICS) -> list[AbiRow]:
    """Placeholder rows when the runtime part cannot run here (e.g. no ROCm GPU)."""
    return [base_row(pair, labels, op, dtype, shape, metric, status=status)
            for op in ops for dtype in dtypes for shape in shapes for metric in metrics]


def aggregate(pair: str, labels: dict[str, str], payloads: Sequence[AbiWorkerPayload],
              metrics: Sequence[str] = METRICS, *, n_boot: int = 4000, confidence: float = 0.95,
              seed: int = 0) -> list[AbiRow]:
    """Rows from the payloads of the workers that returned results (partial payloads included)."""
    rows: list[AbiRow] = []
    if not payloads:
        return rows
    first = payloads[0]
    check_problems: dict[str, list[str]] = {}
    for payload in payloads:
        for check in payload.checks:
            if not check["ok"]:
                check_problems.setdefault(check["case"], []).append(f"{check['check']}: {check['detail']}")
    for key, entry in first.cases.items():
        for metric in metrics:
            if metric not in entry.metrics:
                continue
            row = base_row(pair, labels, entry.op, entry.dtype, entry.shape, metric)
            rows.append(row)
            if key in check_problems:
                row.set(status="check failed", detail=check_problems[key][0])
                continue
            skipped = entry.metrics[metric].skipped
            if skipped:
                row.set(status=f"not measured ({skipped})")
                if metric == "device":    # no kernel time either, for the same reason
                    for side in SIDES:
                        row.set(**kernel_stats.row_columns(kernel_stats.not_available(skipped), None, f"{side}_"))
                continue
            workers = [(i if p.worker is None else p.worker, p.cases[key].metrics[metric])
                       for i, p in enumerate(payloads) if key in p.cases]
            workers = [(w, r) for w, r in workers if r.tensor and r.pointer]
            records = [r for _, r in workers]
            if not records:
                row.set(status="error", detail="no worker produced run values")
                continue
            t_runs = [list(r.tensor) for r in records]
            p_runs = [list(r.pointer) for r in records]
            t_med, t_min, t_max = stats.across_workers(stats.worker_medians(t_runs))
            p_med, p_min, p_max = stats.across_workers(stats.worker_medians(p_runs))
            est = stats.paired_bootstrap(t_runs, p_runs, n_boot=n_boot, confidence=confidence, seed=seed)
            names = [f"worker {w}" for w, _ in workers]
            flags = [f"{side}: {text}" for side, runs in (("Tensor", t_runs), ("Pointer", p_runs))
                     for text in worker_flags(runs, names).values()]
            spin_short = sum(int(r.spin_short) for r in records)
            row.set(
                tensor_us=t_med, tensor_min_us=t_min, tensor_max_us=t_max,
                pointer_us=p_med, pointer_min_us=p_min, pointer_max_us=p_max,
                tensor_calls_per_s=1e6 / t_med if t_med > 0 else None,
                pointer_calls_per_s=1e6 / p_med if p_med > 0 else None,
                speedup=est.speedup, ci_low=est.ci_low, ci_high=est.ci_high, confidence=est.confidence,
                mw_p=est.p_value, verdict=est.verdict, slowdown_pct=est.slowdown_pct,
                iters=int(np.median([r.iters for r in records])), workers=len(records),
                runs=min(len(r) for r in t_runs), spin_short=spin_short, status="ok", worker_flag="; ".join(flags),
                detail=(f"{spin_short} device run(s): spin ended before the host finished enqueueing"
                        if spin_short else ""))
            if metric == "device":
                row.set(**kernel_columns(records, row, n_boot=n_boot, confidence=confidence, seed=seed))
    return rows


def kernel_columns(records: Sequence[MetricRecord], row: AbiRow, *, n_boot: int, confidence: float,
                   seed: int) -> dict[str, Any]:
    """Kernel time of a `device` row, per side (median of worker medians, min–max, kernels per call, names,
    gap = event time − kernel time), and the kernel-time speed-up Tensor / Pointer with its paired bootstrap
    interval."""
    out: dict[str, Any] = {}
    for side in SIDES:
        agg = kernel_stats.aggregate([(r.kernel or {}).get(side) for r in records])
        out.update(kernel_stats.row_columns(agg, row.value(f"{side}_us"), f"{side}_"))
    paired = [r.kernel for r in records if r.kernel is not None
              and all((r.kernel.get(side) or {}).get("status") == "ok" for side in SIDES)]
    if paired:  # paired by worker, as the stream-time speed-up
        est = stats.paired_bootstrap([k["tensor"]["run_us"] for k in paired],
                                     [k["pointer"]["run_us"] for k in paired],
                                     n_boot=n_boot, confidence=confidence, seed=seed)
        out.update(kernel_speedup=est.speedup, kernel_ci_low=est.ci_low, kernel_ci_high=est.ci_high,
                   kernel_verdict=est.verdict)
    return out


def runtime_rows(plan: AbiPlan, shares: Sequence[Share], not_run: Mapping[str, str]) -> list[AbiRow]:
    """The runtime part's rows (the aggregate stage): `not run (reason)` rows for the metrics no worker can take
    here (not_run), each share's workers aggregated (on the null device scoped to the host; with --devices naming
    the GPU), in the order of the options."""
    from lnbench import settings as cfg
    from lnbench.abi.cases import pair_info
    from lnbench.abi.plan import TABLE

    labels = pair_info(plan.pair).labels
    measured = [metric for metric in plan.metrics if not not_run[metric]]
    rows = [row for metric in plan.metrics if not_run[metric]
            for row in not_run_rows(plan.pair, labels, plan.ops, plan.dtypes, plan.shapes, not_run[metric], [metric])]
    for share in shares:
        timed = aggregate(plan.pair, labels, share.payloads, measured,
                          n_boot=int(cfg.require(plan.table, "bootstrap", int, TABLE)),
                          confidence=float(cfg.require(plan.table, "confidence", (int, float), TABLE)),
                          seed=int(cfg.require(plan.table, "stats_seed", int, TABLE)))
        if not share.payloads:
            timed = not_run_rows(plan.pair, labels, plan.ops, plan.dtypes, share.shapes,
                                 "error (no worker returned results)", measured)
        for row in timed:
            if not plan.dev.times_are_real:                        # the null device: host work only
                row.scope = HOST_ONLY_NULL
            if share.slot is not None:
                row.set(gpu=share.slot.label, gpu_model=share.slot.model, timed_alone=True)
        rows += timed
    return _in_order(rows, plan.ops, plan.dtypes, plan.shapes, plan.metrics)


def _in_order(rows: list[AbiRow], ops: Sequence[str], dtypes: Sequence[str], shapes: Sequence[tuple[int, int]],
              metrics: Sequence[str]) -> list[AbiRow]:
    """Rows sorted by the options' order of op, dtype, shape and metric (a value not among them last)."""
    shape_names = [f"{m}x{n}" for m, n in shapes]

    def rank(row: AbiRow) -> tuple[int, ...]:
        return tuple(seq.index(value) if (value := row.value(key)) in seq else len(seq)
                     for seq, key in ((ops, "op"), (dtypes, "dtype"), (shape_names, "shape"), (metrics, "metric")))
    return sorted(rows, key=rank)
