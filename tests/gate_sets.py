"""Synthetic histories for the regression gate (issue 53), shaped like the GPU stores of tests/data/gate_*:
SERIES series x RUNS runs, every run its own commit (a nightly job), from fixed seeds.

- device-bound series (half): a run's value 1% noise, its 3 workers ±0.5% around it;
- host-bound series (half): each run's 3 workers spread like the H100's liger bwd hot (one run: 125, 179,
  223 us): a run shift of 5% shared by its workers, each worker 15-20% on its own; the run's value is their
  median, about ±20-30% run to run.

Series come in peer pairs (torch and liger of one case on one machine, measured in the same runs). In the
stepped set, the first backend of every device-bound pair is 3%, 5% or 10% slower (a third each) from a known
run (STEP_RUNS) on, and so is the first of a third of the host-bound pairs by 10%; the peer stays. `points(...)` gives the frame
lnbench.history.query.load_points gives, so lnbench.history.summary and .gate run on it as on a store.

    python tests/gate_sets.py          # the measurements docs/measurements.md quotes (false alarms, steps found)
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

SERIES = 400
RUNS = 30
MACHINE = "NVIDIA H100 (synthetic) | 0 | Synthetic CPU"
STEPS = (3.0, 5.0, 10.0)
#: the first slower run of a stepped series, by its index among the stepped series
STEP_RUNS = (18, 20, 22, 24)


@dataclass(frozen=True)
class Planted:
    series_id: int
    bound: str                 # device or host
    step_pct: float
    at_run: int                # index of the first slower run

    @property
    def commits(self) -> tuple[str, str]:
        return commit(self.at_run - 1), commit(self.at_run)


def commit(i: int) -> str:
    return f"c{i:03d}"


def _series(n: int) -> list[tuple[int, str, str, str]]:
    """(series id, bound, backend, case shape) for n series in peer pairs."""
    out = []
    for pair in range(n // 2):
        bound = "device" if pair < n // 4 else "host"
        for b, backend in enumerate(("torch", "liger")):
            out.append((2 * pair + b + 1, bound, backend, f"{64 * (pair + 1)}x4096"))
    return out


def points(stepped: bool, seed: int = 53, series: int = SERIES, runs: int = RUNS) -> tuple[pd.DataFrame,
                                                                                       list[Planted]]:
    """The frame of every point, and the steps planted (none unless `stepped`)."""
    rng = np.random.default_rng(seed)
    records, planted = [], []
    stepped_pairs = 0
    for sid, bound, backend, shape in _series(series):
        base = float(rng.uniform(20, 400))
        if bound == "device":
            run_log = rng.normal(0, 0.01, runs)
            workers = np.exp(run_log[:, None] + rng.uniform(-0.005, 0.005, (runs, 3)))
        else:
            own = rng.uniform(0.15, 0.20)
            workers = np.exp(rng.normal(0, 0.05, runs)[:, None] + rng.normal(0, own, (runs, 3)))
        workers = base * workers
        pair = (sid - 1) // 2
        if stepped and backend == "torch" and (bound == "device" or pair % 3 == 0):
            size = STEPS[stepped_pairs % 3] if bound == "device" else 10.0
            at = STEP_RUNS[stepped_pairs % len(STEP_RUNS)]
            workers[at:] *= 1 + size / 100
            planted.append(Planted(sid, bound, size, at))
            stepped_pairs += 1
        for i in range(runs):
            w = sorted(float(v) for v in workers[i])
            records.append((i + 1, commit(i), False, "main", f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00",
                            "", sid, "perf", backend, "bwd", "bf16", shape, "hot", "", MACHINE, "us",
                            float(np.median(w)), None, "ok", "", json.dumps(w)))
    frame = pd.DataFrame(records, columns=["run_id", "commit", "dirty", "branch", "timestamp", "load_flag",
                                           "series_id", "kind", "backend", "op", "dtype", "shape", "mode",
                                           "case_name", "machine", "unit", "value", "value2", "status", "detail",
                                           "values"])
    return frame.sort_values(["series_id", "timestamp", "run_id"], kind="stable").reset_index(drop=True), planted


def measure(pct: float = 5.0) -> dict:
    """What the gate does on both sets: false gate failures and change points on A/A, steps found where planted."""
    from lnbench.history.gate import judge
    from lnbench.history.summary import summarize

    aa_frame, _ = points(stepped=False)
    aa = summarize(aa_frame)
    aa_gate = judge(aa, pct)
    frame, planted = points(stepped=True)
    rows = {s.row.series_id: s for s in summarize(frame)}
    gate = judge(list(rows.values()), pct)
    found: dict[str, list[int]] = {}
    for p in planted:
        changes = rows[p.series_id].changes
        hit = any((c["from_commit"], c["to_commit"]) == p.commits for c in changes)
        found.setdefault(f"{p.bound} {p.step_pct:g}%", [0, 0])
        found[f"{p.bound} {p.step_pct:g}%"][0] += hit
        found[f"{p.bound} {p.step_pct:g}%"][1] += 1
    planted_ids = {p.series_id for p in planted}
    return {
        "aa_series": len(aa), "aa_gate_failures": len(aa_gate.slower),
        "aa_series_with_change_points": sum(bool(s.changes) for s in aa),
        "found_at_commit": found,
        "stepped_gate_failures": sorted(s.row.series_id for s in gate.slower),
        "gate_failures_not_planted": sorted(s.row.series_id for s in gate.slower if s.row.series_id not in planted_ids),
        "change_points_not_planted": [(sid, s.changes) for sid, s in rows.items() if sid not in planted_ids
                                      and s.changes],
        "noise_pct": {bound: [round(float(np.median([s.row.noise_pct for s in aa if s.row.series_id <= SERIES // 2])), 1),
                              round(float(np.median([s.row.noise_pct for s in aa if s.row.series_id > SERIES // 2])), 1)]
                      [bound == "host"] for bound in ("device", "host")},
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=1))
