"""Ratios with their intervals, one line per case: `compare` output (new/base time) and abi-compare's
runtime speed-ups (Tensor time / Pointer time)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lnbench.results import AbiRun, CompareRun, ResultFile, require_columns
from lnbench.plot.figures import VERDICT_COLOURS, new_figure
from lnbench.results.verdicts import parse


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _points(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """The rows with a finite `value`, its interval numeric; a case without an interval that holds the value (a
    `too few runs` case has none) is drawn as the point alone."""
    frame = frame.copy()
    for column in (value, "ci_low", "ci_high"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame = frame[np.isfinite(frame[value])]
    held = (np.isfinite(frame.ci_low) & np.isfinite(frame.ci_high) & (frame.ci_low <= frame[value])
            & (frame[value] <= frame.ci_high))
    return frame.assign(ci_low=frame.ci_low.where(held, frame[value]), ci_high=frame.ci_high.where(held, frame[value]))


#: an interval end further from the points than this many times their spread is clipped at the axis edge
REACH = 2.0


def x_range(points: list[float], marks: list[float], low: list[float], high: list[float]) -> tuple[float, float]:
    """The x axis: every point and mark (1, the SAME band, the gate) with room around them; an interval end within
    REACH × their spread widens it, one further out is clipped there. A huge interval (one case's to 1.75e7) would
    otherwise squeeze every other point onto one spot."""
    core_lo, core_hi = min(points + marks), max(points + marks)
    spread = max(core_hi - core_lo, 0.05 * abs(core_hi), 1e-9)
    reach_lo, reach_hi = core_lo - REACH * spread, core_hi + REACH * spread
    lo = min([core_lo] + [end for end in low if end >= reach_lo])
    hi = max([core_hi] + [end for end in high if end <= reach_hi])
    pad = 0.05 * (hi - lo) or 0.05 * spread
    return lo - pad, hi + pad


def _mark_clipped(ax: Any, frame: pd.DataFrame, left: float, right: float) -> None:
    """An arrow head at the edge where an interval runs past it, its true end written beside it, and one legend
    entry saying so."""
    arrows = [(left, row.y, "<", row.low, "left") for row in frame.itertuples() if row.low < left]
    arrows += [(right, row.y, ">", row.high, "right") for row in frame.itertuples() if row.high > right]
    for i, (x, y, marker, end, side) in enumerate(arrows):
        ax.plot([x], [y], marker=marker, color="black", markersize=7, linestyle="none", clip_on=False,
                label="interval clipped (its end written)" if i == 0 else None)
        ax.annotate(f"{end:.3g}", (x, y), xytext=(-9 if side == "right" else 9, 4), textcoords="offset points",
                    ha=side, fontsize=7)


def _ratio_figure(labels: list[str], ratio: pd.Series, low: pd.Series, high: pd.Series, verdicts: list[str],
                  xlabel: str, title: str, band_pct: float | None, fail_pct: float | None) -> Any:
    fig, ax = new_figure(8.5, 1.3 + 0.28 * len(labels))
    y = list(range(len(labels)))[::-1]                                   # first case on top
    frame = pd.DataFrame({"ratio": list(ratio), "low": list(low), "high": list(high), "y": y,
                          "verdict": [str(parse(v)) for v in verdicts]})     # abi-compare 1.0's lowercase words too
    marks = [1.0] + ([1 - band_pct / 100, 1 + band_pct / 100] if band_pct else []) \
        + ([1 + fail_pct / 100] if fail_pct is not None else [])
    left, right = x_range(list(frame.ratio), marks, list(frame.low), list(frame.high))
    for verdict, group in frame.groupby("verdict", sort=False):
        shown_low, shown_high = group.low.clip(lower=left), group.high.clip(upper=right)
        ax.errorbar(group.ratio, group.y, xerr=[group.ratio - shown_low, shown_high - group.ratio], fmt="o",
                    markersize=4, capsize=3, color=VERDICT_COLOURS.get(str(verdict), "#1f77b4"), label=str(verdict))
    _mark_clipped(ax, frame, left, right)
    ax.axvline(1.0, color="black", linewidth=1)
    if band_pct:
        ax.axvspan(1 - band_pct / 100, 1 + band_pct / 100, color="grey", alpha=0.15,
                   label=f"|change| < {band_pct:g}%: SAME")
    if fail_pct is not None:
        ax.axvline(1 + fail_pct / 100, color=VERDICT_COLOURS["SLOWER"], linestyle=":",
                   label=f"--fail-if-slower {fail_pct:g}")
    ax.set_xlim(left, right)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(title, fontsize=9)
    return fig


def compare_figures(result: ResultFile) -> list[tuple[str, Any]]:
    """("ratios", Figure): new/base time ratio per compared case with its interval, coloured by verdict."""
    require_columns(result, ["backend", "op", "dtype", "shape", "mode", "ratio", "ci_low", "ci_high", "verdict"])
    frame = _points(result.rows, "ratio")
    if frame.empty:
        return []
    labels = [" ".join(str(r[c]) for c in ("backend", "op", "dtype", "shape", "mode")) for _, r in frame.iterrows()]
    run = result.run_as(CompareRun)
    conf = _number(run.confidence)
    title = (f"lnbench compare: new/base time (> 1: NEW slower), "
             f"{'%.0f%% ' % (conf * 100) if conf else ''}interval\n"
             f"base {run.base or '?'} ({run.base_device or '?'}) → new {run.new or '?'}")
    return [("ratios", _ratio_figure(labels, frame.ratio, frame.ci_low, frame.ci_high, list(frame.verdict.astype(str)),
                                     "new / base (time ratio)", title, _number(run.threshold_pct),
                                     _number(run.fail_if_slower_pct)))]


def abi_figures(result: ResultFile) -> list[tuple[str, Any]]:
    """("speedups", Figure): abi-compare runtime speed-ups (Tensor time / Pointer time) with their intervals."""
    frame = result.rows
    if "speedup" not in frame.columns:
        return []
    require_columns(result, ["op", "dtype", "shape", "metric", "speedup", "ci_low", "ci_high", "verdict"])
    frame = _points(frame[frame.get("status") == "ok"] if "status" in frame.columns else frame, "speedup")
    if frame.empty:
        return []
    labels = [f"{r['op']} {r['dtype']} {r['shape']} {r['metric']}" for _, r in frame.iterrows()]
    pair = result.run_as(AbiRun).pair or ""
    title = f"lnbench abi-compare {pair}: Tensor time / Pointer time (> 1: Pointer faster), paired bootstrap interval"
    return [("speedups", _ratio_figure(labels, frame.speedup, frame.ci_low, frame.ci_high,
                                       list(frame.verdict.astype(str)), "speed-up Pointer vs Tensor", title, None, None))]
