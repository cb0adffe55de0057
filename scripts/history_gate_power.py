"""How well `history --with` finds a pull request's slowdown, and how often it cries wolf: series of 1% Gaussian
noise (fixed seeds) of N stored runs, with K judged runs appended (5% slower, or unchanged); counts how often the
newest change point e-divisive finds falls on a judged run (what --fail-on-regression with --with reads).
    python scripts/history_gate_power.py [SEEDS]
"""
from __future__ import annotations

import sys

import numpy as np

from lnbench.history.changes import change_points


def hits(stored: int, judged: int, factor: float, seeds: int) -> int:
    found = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed if factor != 1.0 else 500 + seed)
        values = 100 * (1 + rng.normal(0, 0.01, stored + judged))
        values[stored:] *= factor
        cps = change_points(values)
        found += bool(cps) and cps[-1].index >= stored
    return found


if __name__ == "__main__":
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print("| stored runs | judged runs | 5% slower: found | unchanged: false alarms |\n|---:|---:|---:|---:|")
    for stored in (30, 60, 200):
        for judged in (1, 2, 3):
            print(f"| {stored} | {judged} | {hits(stored, judged, 1.05, seeds)}/{seeds} | "
                  f"{hits(stored, judged, 1.0, seeds)}/{seeds} |")
