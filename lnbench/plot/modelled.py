"""Modelled results (`lnbench perf --device emu`, the `profile` kind): a roofline per target and bound_us
against N per target, both labelled modelled.

    roofline-<target>   VALU lane-operations per distinct byte (x) against lane-operations per second at the
                        launch's bound (y), under the target's roofs: HBM bandwidth × x and the VALU peak
                        (cus × simds × simd_lanes × clock); cold mode, one point per launch
    bound-<target>      bound_us summed over a case's launches against N, one panel per op, a line per backend;
                        the marker says which floor bounds the case's largest launch
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lnbench.plot.figures import new_figure
from lnbench.plot.styles import backend_order, backend_styles
from lnbench.results import ResultFile, require_columns

_MARKERS = {"memory": "o", "issue_valu": "^", "lds": "s"}


def _rows(result: ResultFile) -> pd.DataFrame:
    require_columns(result, ["backend", "op", "dtype", "shape", "launch", "target", "mode", "bound_us", "bound_by",
                             "intensity", "exec_valu", "status"])
    frame = result.rows[(result.rows.status == "ok") & (result.rows["mode"] == "cold")].copy()
    for column in ("bound_us", "intensity", "exec_valu", "N"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame[frame.bound_us > 0]


def profile_figures(result: ResultFile) -> list[tuple[str, Any]]:
    """(name, Figure) per target: its roofline and its bound_us against N; [] when no launch has a bound."""
    frame = _rows(result)
    targets = result.run.value("targets") or {}
    styles = backend_styles(frame.backend)
    out = []
    for target, group in frame.groupby("target", sort=False):
        figures = targets.get(target, {})
        out.append((f"roofline-{target}", _roofline(group, target, figures, styles)))
        out.append((f"bound-{target}", _bounds(group, target, styles)))
    return out


def _roofline(group: pd.DataFrame, target: str, figures: dict[str, Any], styles: dict[str, Any]) -> Any:
    fig, ax = new_figure(6.4, 4.6)
    rate = group.exec_valu * 64 / (group.bound_us * 1e-6)
    for backend in backend_order(group.backend):
        rows = group.backend == backend
        ax.scatter(group.intensity[rows], rate[rows], label=backend, color=styles[backend].get("color"), s=18)
    x = np.logspace(np.log10(max(group.intensity.min() / 4, 1e-3)), np.log10(group.intensity.max() * 4 + 1e-3), 50)
    if figures.get("hbm_gbps"):
        memory_roof = figures["hbm_gbps"] * 1e9 * x
        if figures.get("simd_lanes"):
            peak = figures["cus"] * figures["simds"] * figures["simd_lanes"] * figures["clock_mhz"] * 1e6
            ax.axhline(peak, color="black", linewidth=1, linestyle="--", label=f"VALU peak {peak:.3g} lane-op/s")
            memory_roof = np.minimum(memory_roof, peak)
        ax.plot(x, memory_roof, color="black", linewidth=1, label=f"HBM {figures['hbm_gbps']:g} GB/s × intensity")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("VALU lane-operations per distinct byte")
    ax.set_ylabel("VALU lane-operations / s at bound_us")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.suptitle(f"MODELLED roofline — {target}, cold (lower bounds from the emulated profile, not timings)",
                 fontsize=9)
    return fig


def _bounds(group: pd.DataFrame, target: str, styles: dict[str, Any]) -> Any:
    cases = (group.sort_values("bound_us").groupby(["backend", "op", "dtype", "shape"], sort=False)
             .agg(bound_us=("bound_us", "sum"), bound_by=("bound_by", "last"), N=("N", "first")).reset_index())
    ops = list(dict.fromkeys(cases.op))
    fig, axes = new_figure(1.2 + 4.2 * len(ops), 4.2, ncols=len(ops), squeeze=False)
    for ax, op in zip(axes[0], ops):
        sub = cases[cases.op == op]
        for backend in backend_order(sub.backend):
            rows = sub[sub.backend == backend].sort_values("N")
            style = styles[backend]
            ax.plot(rows.N, rows.bound_us, label=backend, color=style.get("color"), linewidth=1)
            for by, marker in _MARKERS.items():
                hit = rows[rows.bound_by == by]
                ax.scatter(hit.N, hit.bound_us, marker=marker, color=style.get("color"), s=24)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("N (hidden size)")
        ax.grid(True, alpha=0.3, which="both")
    axes[0][0].set_ylabel("modelled bound_us (sum over launches)")
    axes[0][0].legend(fontsize=8, title="markers: ○ memory △ VALU □ LDS", title_fontsize=7)
    fig.suptitle(f"MODELLED lower bounds — {target}, cold (not timings)", fontsize=10)
    return fig
