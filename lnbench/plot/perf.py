"""perf results: GB/s against shape per backend, one panel per op, one picture per (dtype, mode).

Points are the headline (median of worker medians); error bars span the worker min–max; the measured copy
peak is a dashed line, and the right-hand axis reads % of that peak. Each panel has its own y range (fwd and
bwd reach different GB/s; a shared range fixed by the first panel cut the other's points off) and its own legend.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lnbench.results import PerfRun, ResultFile, require_columns
from lnbench.plot.figures import new_figure
from lnbench.plot.styles import backend_order, backend_styles


def _peak(result: ResultFile) -> float | None:
    value = result.run_as(PerfRun).peak_gbps or None
    if value is None and isinstance(result.extra.get("peak"), dict):
        value = result.extra["peak"].get("gbps")
    if value is None:
        return None
    try:
        peak = float(value)
    except (TypeError, ValueError):
        return None
    return peak if math.isfinite(peak) and peak > 0 else None


def timed_rows(result: ResultFile) -> pd.DataFrame:
    """Aggregate rows that hold a measurement, with numeric columns and the shape's M, N."""
    require_columns(result, ["row_kind", "backend", "op", "dtype", "shape", "mode", "median_us", "min_us", "max_us",
                             "gbps", "status"])
    frame = result.rows[result.rows.row_kind == "aggregate"].copy()
    for column in ("median_us", "min_us", "max_us", "gbps"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    ok = frame.status.astype(str).str.match(r"^(ok|partial)") & (frame.gbps > 0) & (frame.median_us > 0)
    frame = frame[ok].copy()
    dims = frame["shape"].astype(str).str.extract(r"^(\d+)x(\d+)$").astype(float)
    frame["M"], frame["N"] = dims[0], dims[1]
    return frame


def _shape_order(frame: pd.DataFrame) -> list[str]:
    """Shapes by hidden size N, then M (a sweep reads left to right in N)."""
    shapes = frame[["shape", "M", "N"]].drop_duplicates("shape").sort_values(["N", "M"])
    return list(shapes["shape"])


def perf_figures(result: ResultFile) -> list[tuple[str, Any]]:
    """(name, Figure) per (dtype, mode) present in the result, named `<dtype>-<mode>`; [] when nothing was timed."""
    frame = timed_rows(result)
    peak = _peak(result)
    device = result.run.device_name or result.run.device or ""
    styles = backend_styles(frame.backend)      # once for the whole set: a backend looks the same in every panel
    figures = []
    for (dtype, mode), group in frame.groupby(["dtype", "mode"], sort=False):
        ops = list(dict.fromkeys(group.op))
        shapes = _shape_order(group)
        x_of = {s: i for i, s in enumerate(shapes)}
        fig, axes = new_figure(1.2 + max(3.2, 0.55 * len(shapes)) * len(ops), 4.2, ncols=len(ops), squeeze=False)
        for ax, op in zip(axes[0], ops):
            sub = group[group.op == op]
            for backend in backend_order(sub.backend):
                rows = sub[sub.backend == backend]
                rows = rows.assign(x=rows["shape"].map(x_of)).sort_values("x")
                low = rows.gbps * rows.median_us / rows.max_us      # slowest worker
                high = rows.gbps * rows.median_us / rows.min_us     # fastest worker
                # clipped at 0: gbps·median/max is gbps again, ± an ulp, where the slowest worker is the median
                yerr = [(rows.gbps - low).clip(lower=0), (high - rows.gbps).clip(lower=0)]
                ax.errorbar(rows.x, rows.gbps, yerr=yerr, capsize=3, label=backend,
                            **styles[backend])
            if peak:
                ax.axhline(peak, linestyle="--", color="black", linewidth=1, label=f"copy peak {peak:.4g} GB/s")
                right = ax.secondary_yaxis("right", functions=(lambda g: g / peak * 100, lambda p: p * peak / 100))
                right.set_ylabel("% of copy peak" if op == ops[-1] else "")
            ax.set_xticks(range(len(shapes)), shapes, rotation=40, ha="right", fontsize=8)
            ax.set_title(op)
            ax.set_xlabel("shape M×N (by N)")
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)          # after drawing: the top is this panel's own points, bars and peak
            ax.legend(fontsize=8, loc="best")
        axes[0][0].set_ylabel("GB/s (median of worker medians)")
        fig.suptitle(f"lnbench perf — {device}, {dtype}, {mode} mode\nbars: worker min–max"
                     + ("" if peak else "; no measured peak (run `lnbench peak`)"), fontsize=10)
        figures.append((f"{dtype}-{mode}", fig))
    return figures
