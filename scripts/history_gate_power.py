"""How well `history --with` finds a pull request's slowdown, and how often it cries wolf, through the whole gate
(lnbench.history.summary + .gate: change points at commit boundaries, the noise test, Benjamini-Hochberg over the
series): a store of SERIES series of 1% Gaussian noise (fixed seeds; 3 workers ±0.5% around each run's value), N
stored runs each its own commit, then K judged runs of the pull request's commit (negative run ids, as --with
gives them); one series' judged runs are 5% slower. Counts how often `--fail-on-regression 3` fails on that series
(found), and on any other series (false alarms, per series).
    python scripts/history_gate_power.py [SEEDS]
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd

from lnbench.history.gate import judge
from lnbench.history.summary import summarize

SERIES = 16
COLUMNS = ["run_id", "commit", "dirty", "branch", "timestamp", "load_flag", "series_id", "kind", "backend", "op",
           "dtype", "shape", "mode", "case_name", "machine", "unit", "value", "value2", "status", "detail", "values"]


def frame(stored: int, judged: int, factor: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for sid in range(1, SERIES + 1):
        logs = rng.normal(0, 0.01, stored + judged)
        if sid == 1:
            logs[stored:] += np.log(factor)
        for i, v in enumerate(100 * np.exp(logs)):
            run = i + 1 if i < stored else -(i - stored + 1)
            commit = f"c{i:03d}" if i < stored else "pr"
            workers = sorted(v * np.exp(rng.uniform(-0.005, 0.005, 3)))
            rows.append((run, commit, False, "main", f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}", "", sid, "perf",
                         "torch" if sid % 2 else "liger", "fwd", "bf16", f"{64 * ((sid + 1) // 2)}x1024", "hot", "",
                         "M", "us", float(v), None, "ok", "", json.dumps(workers)))
    return pd.DataFrame(rows, columns=COLUMNS)


def counts(stored: int, judged: int, seeds: int) -> tuple[int, int]:
    found = false = 0
    for seed in range(seeds):
        failing = {r["series_id"] for r in judge(summarize(frame(stored, judged, 1.05, seed)), 3.0, True).slower}
        found += 1 in failing
        false += len(failing - {1})
    return found, false


if __name__ == "__main__":
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print(f"| stored runs | judged runs | 5% slower: found | others: false alarms (of {SERIES - 1} x seeds) |\n"
          "|---:|---:|---:|---:|")
    for stored in (30, 60, 200):
        for judged in (1, 2, 3):
            found, false = counts(stored, judged, seeds)
            print(f"| {stored} | {judged} | {found}/{seeds} | {false}/{(SERIES - 1) * seeds} |", flush=True)
