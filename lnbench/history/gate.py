"""`history --fail-on-regression PCT`: the series whose newest change point is a slowdown the gate fails on, and
for every other valued series why it passes (the same words in the table, the CSV/JSON and the summary line).

A series is judged in its own unit's direction: a time going up is slower, a throughput (TB/s, GB/s, TFLOPS) or
a speed-up going down is; a series of another unit is listed as not gated, never skipped silently. A change fails
the gate when it is the series' newest change point, caused by the code (not a shift its peers made too, nor one
between runs of one commit: lnbench.history.steps), slower, at least PCT %, and at least the size the series'
noise lets the test find with the runs on each side of that change (the detectable size). A series too noisy for
PCT says what it detects with 2 new runs (history --with's design), and is not gated below the detectable size."""
from __future__ import annotations

from dataclasses import dataclass, field

from lnbench.results.rows import HistoryRow

from lnbench.history.changes import MIN_VALUES
from lnbench.history.summary import CHECK_KINDS, EXACT_KINDS, FASTER_UP_UNITS, TIME_UNITS, Series


def direction(unit: str, size_pct: float) -> str:
    """slower or faster for a time or a throughput; changed for other units (a ratio, a count)."""
    if unit in TIME_UNITS:
        return "slower" if size_pct > 0 else "faster"
    if unit in FASTER_UP_UNITS:
        return "faster" if size_pct > 0 else "slower"
    return "changed"


def gated_unit(unit: str) -> bool:
    return unit in TIME_UNITS or unit in FASTER_UP_UNITS


@dataclass
class Gate:
    """The gate's verdict over the series of one history."""

    pct: float
    slower: list[Series] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)          # series id -> why it passes (or FAILS)

    @property
    def exit_text(self) -> str:
        if self.slower:
            return f"gate: {len(self.slower)} slowdown(s) of at least {self.pct:g}% (exit 1)"
        return f"gate: no slowdown of at least {self.pct:g}% (exit 0)"

    def counts(self) -> dict[str, int]:
        """How many series fall under each kind of note (the summary line's tail)."""
        out: dict[str, int] = {}
        for note in self.notes.values():
            kind = next((words for start, words in _KINDS if note.startswith(start)), "passing")
            out[kind] = out.get(kind, 0) + 1
        return out


#: the kinds of notes the summary line counts: (a note's start, the words)
_KINDS = (("FAILS", "failing"), ("not gated", "not gated (unit)"), ("too noisy", "too noisy for the threshold"),
          ("too few runs", "nothing to judge yet"), ("one commit", "nothing to judge yet"),
          ("no measured", "nothing to judge yet"))


def _note(row: HistoryRow, pct: float) -> str:
    """Why a valued series passes before its change points are read ('' when it is judged)."""
    unit = str(row.unit)
    if not gated_unit(unit):
        return f"not gated: unit {row.unit!r} has no slower direction"
    exact = row.kind in EXACT_KINDS
    if not exact and row.noise_pct is None:
        return "no measured values (none above 0)"
    if (row.runs or 0) < (2 if exact else MIN_VALUES):
        return f"too few runs ({row.runs}; {2 if exact else MIN_VALUES} needed)"
    if (row.commits or 0) < 2:
        return "one commit: no code change to judge"
    detectable = row.detectable_pct
    if not exact and (detectable is None or detectable > pct):
        shown = "—" if detectable is None else f"{detectable:.0f}%"
        return f"too noisy for {pct:g}% (noise ±{row.noise_pct:.1f}%: detects ≥ {shown})"
    return ""


def judge(series: list[Series], pct: float, candidates_only: bool = False) -> Gate:
    """The gate over the `series` (lnbench.history.summary; `candidates_only`: only a change point at a run of a
    `history --with` file counts, whose run ids are negative)."""
    gate = Gate(pct)
    for one in series:
        row = one.row
        if row.kind in CHECK_KINDS or row.latest is None:
            continue
        note = _note(row, pct)
        newest = one.changes[-1] if one.changes else None
        unit = str(row.unit)
        if newest and (not candidates_only or newest["run"] < 0) and gated_unit(unit):
            size = abs(newest["size_pct"])
            if direction(unit, newest["size_pct"]) != "slower":
                note = note or "newest change is faster"
            elif newest.get("cause") == "machine":
                note = "newest change is the machine's (its peers moved too)"
            elif size < pct:
                note = note or f"newest slowdown under {pct:g}%"
            elif size < (newest.get("detectable_pct") or 0.0):
                note = f"slowdown under what its noise lets the test find there ({newest['detectable_pct']:.0f}%)"
            else:
                gate.slower.append(one)
                note = f"FAILS: {newest['size_pct']:+.1f}% at {newest['from_commit']}..{newest['to_commit']}"
        gate.notes[int(row.series_id or 0)] = note or "no slowdown"
    return gate
