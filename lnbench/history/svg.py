"""The geometry of the report's trend charts (templates/chart.svg.j2 draws it as inline SVG; no script, no CDN).

A chart a reader can trust: a y axis with round values and the unit, an x axis naming commits and dates, and an
honest scale (at least ±5% around the series' median, so 1% noise looks like 1%, not like the chart's height).
The noise band of each stretch between change points is its median ± 2 robust standard deviations (1.4826 × the
median absolute deviation: about 95% of normal noise); a run's own interval (the spread of its worker medians)
is a whisker. Change points are dashed lines between the last run before and the first run after, labelled with
their size and commit. Every run is a dot whose <title> (the browser's hover text) names the commit, date, value,
interval and machine; runs on a busy machine are hollow."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

WIDTH, HEIGHT = 640, 250
LEFT, RIGHT, TOP, BOTTOM = 66, 18, 34, 44
#: the least the y axis shows on each side of the series' median
MIN_HALF_RANGE = 0.05
#: the noise band: this many robust standard deviations each side of a stretch's median
BAND_SDS = 2.0
_MAD_TO_SD = 1.4826
#: the fewest runs of a stretch that get a noise band
BAND_MIN_RUNS = 3
#: the least room an x tick label takes (px)
X_TICK_ROOM = 100
#: how far apart two change labels must be to share a row (px)
LABEL_ROOM = 120
AXIS_LABELS = {"us": "median time (us)", "modelled us": "modelled floor (us)", "speedup": "speed-up (x)",
               "ratio": "new / base", "modelled ratio": "new / base (modelled)", "abs err": "max abs error"}


@dataclass(frozen=True)
class Run:
    """One run of a series as the chart takes it (oldest first)."""

    commit: str
    timestamp: str
    value: float
    low: float | None = None          # the run's interval (its worker medians' range), when it has one
    high: float | None = None
    busy: str = ""                    # the run's load flag
    status: str = ""


@dataclass(frozen=True)
class Tick:
    pos: float
    label: str
    sub: str = ""
    anchor: str = "middle"            # an x tick's label near the right edge ends at its tick


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    title: str
    busy: bool
    commit: str


@dataclass(frozen=True)
class Band:
    x1: float
    x2: float
    y1: float
    y2: float
    title: str


@dataclass(frozen=True)
class Mark:
    x: float
    label_x: float
    label_y: float
    anchor: str
    label: str
    title: str
    commit: str


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    axis_label: str
    left: float
    top: float
    right: float
    bottom: float
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    line: str
    dots: list[Dot]
    intervals: str                    # an SVG path: a vertical stroke a run with an interval
    bands: list[Band]
    marks: list[Mark]
    width: int = WIDTH
    height: int = HEIGHT


def value_text(value: float) -> str:
    """A value to 4 significant digits."""
    return f"{value:.4g}"


def nice_step(span: float, count: int = 5) -> float:
    """A round step (1, 2, 2.5 or 5 × 10^k) that cuts `span` into about `count` parts."""
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9) + (1 if round(step / 10 ** math.floor(math.log10(step)), 6)
                                                        == 2.5 else 0))


def y_range(values: Sequence[float], extra: Sequence[float]) -> tuple[float, float, float]:
    """The y axis' (low, high, step): every value and `extra` (intervals, bands) inside, at least ±5% around the
    median, ends on round ticks."""
    median = float(np.median(values))
    half = abs(median) * MIN_HALF_RANGE or 1.0
    low = min(*values, *extra, median - half)
    high = max(*values, *extra, median + half)
    step = nice_step(high - low)
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def _x_positions(n: int, left: float, right: float) -> list[float]:
    width = (right - left) / n
    return [left + width * (i + 0.5) for i in range(n)]


def _x_tick_indexes(n: int, room: float) -> list[int]:
    count = max(2, min(n, int(room // X_TICK_ROOM)))
    return sorted({round(k) for k in np.linspace(0, n - 1, count)}) if n > 1 else [0]


def _stretches(n: int, changes: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    bounds = [0, *sorted(c["index"] for c in changes if 0 < c["index"] < n), n]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def noise_bands(values: Sequence[float], changes: Sequence[dict[str, Any]]) -> list[tuple[int, int, float, float]]:
    """Per stretch between change points of at least BAND_MIN_RUNS runs: (first, end, median, half-width)."""
    out = []
    for a, b in _stretches(len(values), changes):
        part = np.asarray(values[a:b], dtype=float)
        if len(part) < BAND_MIN_RUNS:
            continue
        median = float(np.median(part))
        half = BAND_SDS * _MAD_TO_SD * float(np.median(np.abs(part - median)))
        if half > 0:
            out.append((a, b, median, half))
    return out


def _interval_text(run: Run, unit: str) -> str:
    if run.low is None or run.high is None:
        return ""
    return f"workers {value_text(run.low)}–{value_text(run.high)} {unit}"


def _dot_title(run: Run, unit: str, machine: str) -> str:
    when = run.timestamp[:16].replace("T", " ")
    parts = [run.commit, when, f"{value_text(run.value)} {unit}", _interval_text(run, unit),
             "busy machine" if run.busy else "", machine]
    return " · ".join(p for p in parts if p)


def _change_label(change: dict[str, Any]) -> str:
    return f"{change['size_pct']:+.1f}% at {change['to_commit']}"


def _change_title(change: dict[str, Any]) -> str:
    how = "exact" if change.get("exact") else f"p {change['p']:.3f}"
    return f"change point {change['from_commit']}..{change['to_commit']} {change['size_pct']:+.1f}% ({how})"


def _marks(changes: Sequence[dict[str, Any]], xs: list[float], left: float, right: float) -> list[Mark]:
    step = xs[1] - xs[0] if len(xs) > 1 else 0.0
    marks: list[Mark] = []
    last_x = {0: -math.inf, 1: -math.inf}
    for change in sorted(changes, key=lambda c: c["index"]):
        if not 0 < change["index"] < len(xs):
            continue
        x = xs[change["index"]] - step / 2
        row = 0 if x - last_x[0] >= LABEL_ROOM else 1
        last_x[row] = x
        anchor = "end" if x > right - LABEL_ROOM / 2 else "start" if x < left + LABEL_ROOM / 2 else "middle"
        label_x = x - 3 if anchor == "end" else x + 3 if anchor == "start" else x
        marks.append(Mark(round(x, 1), round(label_x, 1), TOP - 20 + 12 * row, anchor, _change_label(change),
                          _change_title(change), str(change["to_commit"])))
    return marks


def chart(runs: Sequence[Run], changes: Sequence[dict[str, Any]], title: str, unit: str, machine: str) -> Chart | None:
    """The chart of `runs` (oldest first; None when there are none); `changes` carry the index of the first run of
    the new regime (`index`), the commits on each side, the size and p (lnbench.history.summary)."""
    if not runs:
        return None
    values = [r.value for r in runs]
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    bands = noise_bands(values, changes)
    extra = [v for r in runs for v in (r.low, r.high) if v is not None]
    extra += [m + s * h for _, _, m, h in bands for s in (-1, 1)]
    low, high, step = y_range(values, extra)

    def y(v: float) -> float:
        return round(bottom - (bottom - top) * (v - low) / (high - low), 1)

    xs = _x_positions(len(runs), left, right)
    half = (xs[1] - xs[0]) / 2 if len(xs) > 1 else (right - left) / 2
    decimals = _decimals(step)
    y_ticks = [Tick(y(v), f"{v:.{decimals}f}") for v in np.arange(low, high + step / 2, step)]
    x_ticks = [Tick(round(xs[i], 1), runs[i].commit, runs[i].timestamp[:10],
                    "end" if xs[i] > WIDTH - X_TICK_ROOM / 2 else "middle")
               for i in _x_tick_indexes(len(runs), right - left)]
    points = [(round(x, 1), r) for x, r in zip(xs, runs)]
    dots = [Dot(px, y(r.value), _dot_title(r, unit, machine), bool(r.busy), r.commit) for px, r in points]
    drawn_bands = [Band(round(xs[a] - half, 1), round(xs[b - 1] + half, 1), y(m + h), y(m - h),
                        f"noise band of {runs[a].commit}..{runs[b - 1].commit}: median {value_text(m)} {unit} "
                        f"± {value_text(h)} ({h / abs(m) * 100:.1f}%)" if m else "noise band")
                   for a, b, m, h in bands]
    intervals = "".join(f"M{px} {y(r.high)}V{y(r.low)}" for px, r in points if r.low is not None and r.high is not None)
    return Chart(title, unit, AXIS_LABELS.get(unit, unit), left, top, right, bottom, y_ticks, x_ticks,
                 " ".join(f"{d.x},{d.y}" for d in dots), dots, intervals, drawn_bands, _marks(changes, xs, left, right))
