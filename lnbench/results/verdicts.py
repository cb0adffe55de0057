"""The verdict words of `compare` and `abi-compare`, what each means, how it renders, and the one gate rule.

Both commands judge a NEW side against a BASE side (compare: two result files; abi-compare: the Pointer ABI
against the Tensor ABI) and say it in these words; each keeps its own statistics for the interval (compare: a
paired t interval over worker medians; abi-compare: a paired two-level bootstrap), and both turn an interval of
the NEW/BASE time ratio into a word by `judge`, and a word into a `--fail-if-slower` decision by `fails_gate`.
compare's modelled files (perf --device emu) have words of their own: CHANGED between two of them, and, forced
against a measured file, no verdict of speed but `floor_verdict` (a floor above the measurement is a bug in the
floors).

abi-compare results written before schema 1.1 spell the first three in lowercase (`same`, `slower`,
`faster`); `parse` reads them as these words.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    """A comparison's verdict. Members are `str`s: a row holds one and writes it as its text."""

    SLOWER = "SLOWER"
    FASTER = "FASTER"
    SAME = "SAME"
    TOO_FEW = "too few runs"
    ONLY_BASE = "only in base"
    ONLY_NEW = "only in new"
    NOT_COMPARED = "not compared"
    CHANGED = "CHANGED"
    FLOOR_ABOVE = "FLOOR ABOVE MEASURED"
    FLOOR_BELOW = "floor ≤ measured"

    @property
    def meaning(self) -> str:
        return _MEANING[self]

    @property
    def style(self) -> str:
        """The rich style of the word in a terminal table."""
        return _STYLE[self]

    @property
    def markdown(self) -> str:
        """The word in a Markdown summary (an icon on the two that mean a change)."""
        return {Verdict.SLOWER: "🔴 SLOWER", Verdict.FASTER: "🟢 FASTER"}.get(self, self.value)

    @property
    def judged(self) -> bool:
        """A case both sides timed and the statistics looked at (SLOWER, FASTER, SAME or TOO_FEW)."""
        return self in (Verdict.SLOWER, Verdict.FASTER, Verdict.SAME, Verdict.TOO_FEW)

    @property
    def changed(self) -> bool:
        return self in (Verdict.SLOWER, Verdict.FASTER)


_MEANING = {
    Verdict.SLOWER: "NEW takes longer: the interval of the NEW/BASE time ratio lies above 1 (and, in compare, "
                    "the change is at least --threshold)",
    Verdict.FASTER: "NEW takes less time: the interval lies below 1 (and, in compare, the change is at least "
                    "--threshold)",
    Verdict.SAME: "no difference told apart from the noise: the interval contains 1 (or, in compare, the change "
                  "is below --threshold)",
    Verdict.TOO_FEW: "too few runs (abi-compare) or paired workers (compare) for any difference to be significant",
    Verdict.ONLY_BASE: "the case is only in BASE (compare)",
    Verdict.ONLY_NEW: "the case is only in NEW (compare)",
    Verdict.NOT_COMPARED: "the case is in both files but not timed in one of them (compare; the detail says why)",
    Verdict.CHANGED: "modelled profiles (compare of two perf --device emu files): the profile moved, its bound did not",
    Verdict.FLOOR_ABOVE: "a modelled file against a measured one (compare --force): the modelled floor lies above the "
                         "measured median, which no floor may: a bug in the floors",
    Verdict.FLOOR_BELOW: "a modelled file against a measured one (compare --force): the modelled floor is at or below "
                         "the measured median, as a floor must be (no verdict of speed)",
}
_STYLE = {Verdict.SLOWER: "bold red", Verdict.FASTER: "green", Verdict.SAME: "dim", Verdict.TOO_FEW: "yellow",
          Verdict.ONLY_BASE: "yellow", Verdict.ONLY_NEW: "yellow", Verdict.NOT_COMPARED: "yellow",
          Verdict.CHANGED: "yellow", Verdict.FLOOR_ABOVE: "bold red", Verdict.FLOOR_BELOW: "dim"}

_WORDS = {v.value for v in Verdict}
#: abi-compare's words before schema 1.1
_LEGACY = {"slower": Verdict.SLOWER.value, "faster": Verdict.FASTER.value, "same": Verdict.SAME.value}


def parse(value: Any) -> Verdict | Any:
    """The Verdict a cell holds, its lowercase spelling of before abi-compare schema 1.1 included; any other
    value (a status, NaN) unchanged."""
    if isinstance(value, str):
        value = _LEGACY.get(value, value)
        if value in _WORDS:
            return Verdict(value)
    return value


def judge(low: float, high: float, change_pct: float = 0.0, threshold_pct: float = 0.0) -> Verdict:
    """The verdict of an interval [low, high] of the NEW/BASE time ratio: SAME when it contains 1 or the change
    is below `threshold_pct` (a practical-significance band; abi-compare has none), else SLOWER above 1 and
    FASTER below."""
    if low <= 1.0 <= high or abs(change_pct) < threshold_pct:
        return Verdict.SAME
    return Verdict.SLOWER if low > 1.0 else Verdict.FASTER


def floor_verdict(floor_us: float, measured_us: float) -> Verdict:
    """The word for a modelled floor beside a measured time of the same case (compare --force of a modelled file
    against a measured one): FLOOR_ABOVE when the floor exceeds the measurement, else FLOOR_BELOW."""
    return Verdict.FLOOR_ABOVE if floor_us > measured_us else Verdict.FLOOR_BELOW


def fails_gate(verdict: Any, slowdown_pct: float | None, pct: float) -> bool:
    """The `--fail-if-slower PCT` rule of compare and abi-compare: the verdict is SLOWER (the statistics tell
    the slowdown from the noise) and NEW's time is more than PCT % above BASE's. TOO_FEW never fails it."""
    return parse(verdict) is Verdict.SLOWER and slowdown_pct is not None and slowdown_pct > pct
