"""Per case: ratio new/base of the headline medians, its bootstrap interval, Mann–Whitney p, and a verdict.

The statistics are abi-compare's (lnbench.abi.stats): BASE plays the Tensor side and NEW the Pointer side, so
its speed-up is base/new and our time ratio is its inverse. The two-level bootstrap resamples workers (the
same worker indices in both files: perf rotates the backend order by worker index, so worker w of BASE and of
NEW ran in the same position) and runs inside each worker. Verdict: SAME when the interval contains 1 or the
change is smaller than the threshold, else SLOWER (ratio > 1) or FASTER; TOO_FEW when the runs are too few
for any difference to be significant (then the narrow interval of a handful of runs means nothing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lnbench import config as cfg
from lnbench import validate
from lnbench.abi import stats
from lnbench.compare.cases import KEY_FIELDS, CaseKey, TimedCase

FASTER, SLOWER, SAME = "FASTER", "SLOWER", "SAME"
ONLY_BASE, ONLY_NEW, NOT_COMPARED = "only in base", "only in new", "not compared"
TOO_FEW = stats.TOO_FEW
TABLE = "compare"


@dataclass(frozen=True)
class Settings:
    """[compare] in the config; the threshold may come from --threshold."""

    threshold_pct: float = 3.0
    bootstrap: int = 4000
    confidence: float = 0.95
    stats_seed: int = 0

    @classmethod
    def from_config(cls, config: dict[str, Any], threshold_pct: float | None = None) -> "Settings":
        table = cfg.section(config, TABLE)
        threshold = threshold_pct if threshold_pct is not None else cfg.require(
            table, "threshold_pct", (int, float), TABLE)
        label = "--threshold" if threshold_pct is not None else f"config [{TABLE}] threshold_pct"
        return cls(float(validate.number(threshold, "threshold_pct", label)),
                   validate.number(cfg.require(table, "bootstrap", int, TABLE), "bootstrap",
                                   f"config [{TABLE}] bootstrap"),
                   float(validate.number(cfg.require(table, "confidence", (int, float), TABLE), "confidence",
                                         f"config [{TABLE}] confidence")),
                   validate.seed(cfg.require(table, "stats_seed", int, TABLE), f"config [{TABLE}] stats_seed"))


def _identity(key: CaseKey) -> dict[str, Any]:
    return dict(zip(KEY_FIELDS, key))


def listed_row(key: CaseKey, verdict: str, base: TimedCase | None, new: TimedCase | None, detail: str) -> dict[str, Any]:
    """A case that is not compared: only in one file, or not timed in one of them."""
    return {**_identity(key), "base_us": base.headline_us if base else math.nan,
            "new_us": new.headline_us if new else math.nan, "ratio": math.nan, "ci_low": math.nan,
            "ci_high": math.nan, "change_pct": math.nan, "mw_p": math.nan, "verdict": verdict, "workers": "",
            "detail": detail}


def compare_case(base: TimedCase, new: TimedCase, settings: Settings) -> dict[str, Any]:
    """The comparison row of a case timed in both files."""
    if not (base.timed and new.timed):
        why = "; ".join(f"{side}: {case.status}" for side, case in (("base", base), ("new", new)) if not case.timed)
        return listed_row(base.key, NOT_COMPARED, base, new, why)
    common = sorted(set(base.runs) & set(new.runs))
    if not common:
        return listed_row(base.key, NOT_COMPARED, base, new, "no worker index timed in both files")
    est = stats.compare([base.runs[w] for w in common], [new.runs[w] for w in common],
                        n_boot=settings.bootstrap, confidence=settings.confidence, seed=settings.stats_seed)
    ratio = new.headline_us / base.headline_us
    low, high = 1.0 / est.ci_high, 1.0 / est.ci_low
    change = (ratio - 1.0) * 100.0
    direction = stats.classify(est.ci_low, est.ci_high)    # abi-compare's words, NEW as the Pointer side
    # the Mann–Whitney p's samples: the runs of the paired workers, pooled
    n_base, n_new = (sum(len(case.runs[w]) for w in common) for case in (base, new))
    floor = stats.smallest_p(n_base, n_new)
    notes = []
    if stats.too_few(n_base, n_new, settings.confidence):
        verdict = TOO_FEW
        notes.append(f"{n_base} vs {n_new} runs: p ≥ {floor:.2g}, so no difference is significant "
                     f"at {settings.confidence:.0%}")
    elif direction == stats.SAME or abs(change) < settings.threshold_pct or (direction == stats.SLOWER) != (ratio > 1):
        verdict = SAME      # (the last test: a headline and an interval that disagree on the direction)
    else:
        verdict = SLOWER if direction == stats.SLOWER else FASTER
    if len(common) < max(len(base.runs), len(new.runs)):
        notes.append(f"paired on worker(s) {','.join(map(str, common))} "
                     f"(base has {len(base.runs)}, new {len(new.runs)})")
    return {**_identity(base.key), "base_us": base.headline_us, "new_us": new.headline_us, "ratio": ratio,
            "ci_low": low, "ci_high": high, "change_pct": change, "mw_p": est.p_value, "verdict": verdict,
            "workers": f"{len(common)}", "detail": "; ".join(notes)}


def compare_all(base_cases: dict[CaseKey, TimedCase], new_cases: dict[CaseKey, TimedCase],
                settings: Settings) -> list[dict[str, Any]]:
    """One row per case of either file: base order first, then the cases only NEW has."""
    rows = []
    for key, base in base_cases.items():
        new = new_cases.get(key)
        rows.append(compare_case(base, new, settings) if new is not None
                    else listed_row(key, ONLY_BASE, base, None, base.status if not base.timed else ""))
    for key, new in new_cases.items():
        if key not in base_cases:
            rows.append(listed_row(key, ONLY_NEW, None, new, new.status if not new.timed else ""))
    return rows


def gate_hits(rows: list[dict[str, Any]], pct: float) -> list[dict[str, Any]]:
    """The `--fail-if-slower PCT` rule (abi-compare's `stats.significantly_slower`): verdict SLOWER and the
    new median more than PCT % above the base's."""
    return [row for row in rows if row["verdict"] == SLOWER and row["change_pct"] > pct]
