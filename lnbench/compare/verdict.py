"""Per case: ratio new/base of the headline medians, a t interval over paired worker medians, its p, and a verdict.

BASE and NEW are two separate invocations. Inside one worker process the runs are correlated (one process,
one memory layout, one minute of machine load), so they are summarised by their median and the *worker* is
the unit: worker w of NEW is paired with worker w of BASE (perf rotates the backend order by worker index, so
they ran in the same position) and lnbench.measure.stats.worker_ratio_interval gives the interval of the ratio
of their medians: the paired t interval widened by the run noise floor ([compare] run_noise_pct), the session
shift two invocations differ by that no worker of one invocation shows. The floor a case is judged with is the
larger of that config value and the session shift its **peers** show: the cases of other backends at the same
shape, mode and dtype in the same two files (a peer's code did not change with this backend's, so what moved all
of them together is the session; `peer_shift_pct`, [compare] peer_controls). Verdict (lnbench.results.verdicts, the words abi-compare uses too): SAME when the interval
contains 1 or the change is smaller than the threshold, else SLOWER (ratio > 1) or FASTER; TOO_FEW with fewer
than 2 paired workers (no spread between processes to judge by). docs/measurements.md has the A/A false-flag
rates this gives (and the run-bootstrap it replaced).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import AbstractSet, Any

import numpy as np

from lnbench import settings as cfg
from lnbench import validate
from lnbench.results import verdicts
from lnbench.measure import stats
from lnbench.compare.cases import KEY_FIELDS, CaseKey, TimedCase
from lnbench.results import CompareRow
from lnbench.results.verdicts import Verdict

TABLE = "compare"


@dataclass(frozen=True)
class Settings:
    """[compare] in the config; the threshold may come from --threshold."""

    threshold_pct: float = 3.0
    confidence: float = 0.95
    run_noise_pct: float = 0.0      # the run noise floor (stats.worker_ratio_interval); the config's default: 1.0
    peer_controls: bool = False     # widen by the session shift other backends' cases show (the config's: true)

    @classmethod
    def from_config(cls, config: dict[str, Any], threshold_pct: float | None = None) -> "Settings":
        table = cfg.section(config, TABLE)
        threshold = cfg.option_or_config(threshold_pct, table, "threshold_pct", "--threshold", (int, float), TABLE,
                                         lambda value, label: validate.number(value, "threshold_pct", label))

        def number(key: str) -> float:
            return float(validate.number(cfg.require(table, key, (int, float), TABLE), key, f"config [{TABLE}] {key}"))
        peers = cfg.require(table, "peer_controls", bool, TABLE)
        return cls(float(threshold), number("confidence"), number("run_noise_pct"), peers)


def case_row(key: CaseKey, **cells: Any) -> CompareRow:
    """A compare row of the case `key` (backend, op, dtype, shape, mode) with `cells`."""
    names: dict[str, Any] = dict(zip(KEY_FIELDS, key))
    return CompareRow(**names, **cells)


def listed_row(key: CaseKey, verdict: Verdict, base: TimedCase | None, new: TimedCase | None,
               detail: str) -> CompareRow:
    """A case that is not compared: only in one file, or not timed in one of them."""
    return case_row(key, base_us=base.headline_us if base else math.nan,
                    new_us=new.headline_us if new else math.nan, ratio=math.nan, ci_low=math.nan,
                    ci_high=math.nan, change_pct=math.nan, p=math.nan, verdict=verdict, workers=0, detail=detail)


def paired_log_change(base: TimedCase, new: TimedCase) -> tuple[float, float] | None:
    """(log of the headline ratio, var(d_w) / n of its paired worker log ratios) of a case timed in both files
    with 2 or more paired workers, else None: one A/A-style observation of the session shift (run_noise_estimate)."""
    common = sorted(set(base.runs) & set(new.runs)) if base.timed and new.timed else []
    if stats.too_few_workers(len(common)):
        return None
    d = np.log(stats.worker_medians([new.runs[w] for w in common])) - \
        np.log(stats.worker_medians([base.runs[w] for w in common]))
    return math.log(new.headline_us / base.headline_us), float(d.var(ddof=1)) / len(d)


def peer_shifts(base_cases: dict[CaseKey, TimedCase], new_cases: dict[CaseKey, TimedCase]) -> dict[CaseKey, float]:
    """Per case, the session shift (%) its peers show: the run noise estimate (stats.run_noise_estimate) over the
    cases of other backends at the same op-independent regime (shape, mode, dtype) timed in both files. A case
    without such peers is left out (its floor is the config's alone)."""
    changes = {key: pc for key in base_cases.keys() & new_cases.keys()
               if (pc := paired_log_change(base_cases[key], new_cases[key])) is not None}
    field = {name: i for i, name in enumerate(KEY_FIELDS)}

    def regime(key: CaseKey) -> tuple:
        return key[field["shape"]], key[field["mode"]], key[field["dtype"]]

    out = {}
    for key in changes:
        peers = [changes[k] for k in changes if regime(k) == regime(key) and k[field["backend"]] != key[field["backend"]]]
        if peers:
            out[key] = stats.run_noise_estimate([c for c, _ in peers], [v for _, v in peers])
    return out


def _noise_judged(base: TimedCase, new: TimedCase, common: list[int], floor: float) -> str:
    """What a flagged case was judged against: the spread of its paired workers' ratios and the run noise floor."""
    d = np.log(stats.worker_medians([new.runs[w] for w in common])) - \
        np.log(stats.worker_medians([base.runs[w] for w in common]))
    spread = (math.exp(2 * float(d.std(ddof=1))) - 1) * 100
    return f"judged against the workers' paired spread ±{spread:.1f}% and a {floor:.1f}% run noise floor"


def compare_case(base: TimedCase, new: TimedCase, settings: Settings, peer_shift_pct: float = math.nan) -> CompareRow:
    """The comparison row of a case timed in both files; `peer_shift_pct`: the session shift its peers show
    (peer_shifts; NaN: none), the floor when it is above the config's."""
    if not (base.timed and new.timed):
        why = "; ".join(f"{side}: {case.status}" for side, case in (("base", base), ("new", new)) if not case.timed)
        return listed_row(base.key, Verdict.NOT_COMPARED, base, new, why)
    common = sorted(set(base.runs) & set(new.runs))
    if not common:
        return listed_row(base.key, Verdict.NOT_COMPARED, base, new, "no worker index timed in both files")
    ratio = new.headline_us / base.headline_us
    change = (ratio - 1.0) * 100.0
    notes = []
    if stats.too_few_workers(len(common)):
        verdict, low, high, p = Verdict.TOO_FEW, math.nan, math.nan, math.nan
        notes.append(f"{len(common)} paired worker: no spread between worker processes to judge a difference by "
                     f"(time with -P 2 or more)")
    else:
        floor = settings.run_noise_pct
        if settings.peer_controls and peer_shift_pct > floor:
            floor = peer_shift_pct
            notes.append(f"run noise floor {floor:.1f}%: the session shift the other backends' cases of this shape "
                         f"and mode show")
        est = stats.worker_ratio_interval([base.runs[w] for w in common], [new.runs[w] for w in common],
                                          settings.confidence, center=ratio, run_noise_pct=floor)
        low, high, p = est.low, est.high, est.p_value
        verdict = verdicts.judge(low, high, change, settings.threshold_pct)
        if verdict in (Verdict.SLOWER, Verdict.FASTER):
            notes.append(_noise_judged(base, new, common, floor))
    if len(common) < max(len(base.runs), len(new.runs)):
        notes.append(f"paired on worker(s) {','.join(map(str, common))} "
                     f"(base has {len(base.runs)}, new {len(new.runs)})")
    return case_row(base.key, base_us=base.headline_us, new_us=new.headline_us, ratio=ratio, ci_low=low,
                    ci_high=high, change_pct=change, p=p, verdict=verdict, workers=len(common),
                    detail="; ".join(notes), peer_shift_pct=peer_shift_pct)


def compare_all(base_cases: dict[CaseKey, TimedCase], new_cases: dict[CaseKey, TimedCase],
                settings: Settings) -> list[CompareRow]:
    """One row per case of either file: base order first, then the cases only NEW has."""
    rows = []
    shifts = peer_shifts(base_cases, new_cases) if settings.peer_controls else {}
    for key, base in base_cases.items():
        new = new_cases.get(key)
        rows.append(compare_case(base, new, settings, shifts.get(key, math.nan)) if new is not None
                    else listed_row(key, Verdict.ONLY_BASE, base, None, base.status if not base.timed else ""))
    for key, new in new_cases.items():
        if key not in base_cases:
            rows.append(listed_row(key, Verdict.ONLY_NEW, None, new, new.status if not new.timed else ""))
    return rows


def lost_cases(base_cases: dict[CaseKey, TimedCase], new_cases: dict[CaseKey, TimedCase]) -> set[CaseKey]:
    """Cases timed in BASE that NEW holds but did not time (an error, a timeout, a lost worker): a case that now
    fails is a worse regression than a slow one. A case NEW does not hold at all is a smaller run, not a loss."""
    return {key for key, base in base_cases.items()
            if base.timed and key in new_cases and not new_cases[key].timed}


def gate_hits(rows: list[CompareRow], pct: float, lost: AbstractSet[CaseKey] = frozenset()) -> list[CompareRow]:
    """The cases `--fail-if-slower PCT` fails on: those the gate rule shared with abi-compare
    (verdicts.fails_gate: SLOWER and the new median more than PCT % above the base's) fails, and every lost
    case (lost_cases)."""
    return [row for row in rows if verdicts.fails_gate(row.verdict, row.change_pct, pct)
            or tuple(row.value(f) for f in KEY_FIELDS) in lost]
