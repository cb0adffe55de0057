"""verify results: max|err| / allowed per case (rows) and tensor (columns), one picture per (backend, dtype).

1.0 is the bar (≥ 1 fails): cells run green → yellow towards it and red past it, each with its value written
in, so a reader sees at a glance how close to the bar every tensor sits. Grey: not executed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lnbench.results import ResultFile, require_columns
from lnbench.plot.figures import new_figure

TENSORS = ("y", "mean", "rstd", "dx", "dweight", "dbias")


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def verify_figures(result: ResultFile) -> list[tuple[str, Any]]:
    """(name, Figure) per (backend, dtype), named `<backend>-<dtype>`; [] when no row has a value."""
    from matplotlib.colors import TwoSlopeNorm

    require_columns(result, ["backend", "case", "dtype", "shape", "tensor", "max_abs_err", "allowed"])
    frame = result.rows.copy()
    for column in ("max_abs_err", "allowed"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["share"] = frame.max_abs_err / frame.allowed.where(frame.allowed > 0)
    zero_bar = frame.allowed == 0          # a config with k = atol = fp32_ulps = 0: any error fails, infinitely
    frame.loc[zero_bar, "share"] = frame.max_abs_err[zero_bar].map(lambda e: e if e != e else (np.inf if e > 0 else 0.0))
    device = result.run.device_name or result.run.device or ""
    figures = []
    for (backend, dtype), group in frame.groupby(["backend", "dtype"], sort=False):
        if group.share.notna().sum() == 0:
            continue
        group = group.assign(row=group.case.astype(str) + " " + group["shape"].astype(str))
        table = group.pivot_table(index="row", columns="tensor", values="share", aggfunc="max", sort=False)
        table = table.reindex(columns=[t for t in TENSORS if t in table.columns]
                              + [t for t in table.columns if t not in TENSORS])
        values = table.to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        top = max(2.0, float(finite.max()) if finite.size else 2.0)
        shown = np.where(np.isposinf(values), top, values)      # an infinite share is drawn at the top colour
        fig, ax = new_figure(2.6 + 0.9 * table.shape[1], 1.4 + 0.26 * table.shape[0])
        image = ax.imshow(np.ma.masked_invalid(shown), cmap=_cmap(), norm=TwoSlopeNorm(1.0, 0.0, top), aspect="auto")
        for (i, j), value in np.ndenumerate(values):
            if not np.isnan(value):
                ax.text(j, i, "inf" if np.isinf(value) else f"{value:.2g}", ha="center", va="center", fontsize=7,
                        color="white" if value >= 1 else "black")
        ax.set_xticks(range(table.shape[1]), list(table.columns))
        ax.set_yticks(range(table.shape[0]), list(table.index), fontsize=7)
        fig.colorbar(image, ax=ax, label="max|err| / allowed (≥ 1 fails)")
        ax.set_title(f"lnbench verify — {backend}, {dtype}, {device}", fontsize=9)
        figures.append((f"{_slug(str(backend))}-{dtype}", fig))
    return figures


def _cmap():
    """Green (far under the bar) → yellow → orange at the bar (the norm puts 1.0 at 0.5) → dark red past it;
    grey for not executed."""
    from matplotlib.colors import LinearSegmentedColormap

    cmap = LinearSegmentedColormap.from_list(
        "lnbench_margin", [(0.0, "#1a9850"), (0.4, "#fee08b"), (0.5, "#f46d43"), (1.0, "#67001f")])
    return cmap.with_extremes(bad="#d9d9d9")
