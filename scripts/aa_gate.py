"""A/A false-flag rate: compare consecutive identical perf runs and count SLOWER / FASTER verdicts.

    python scripts/aa_gate.py FOLDER [--out FILE.json]

FOLDER holds run-*.json files written by the same `lnbench perf ... --json` command run one after another
(scripts/device_aa_gate.sh makes them on a GPU). Every consecutive pair (run 1 → 2, 2 → 3, ...) is compared
case by case with `lnbench compare`'s statistics and settings (the packaged config); since nothing changed
between the runs, every SLOWER or FASTER is a false flag. Prints the rate per shape × mode and overall, the
machine load each run recorded, the run noise floor the runs show (stats.run_noise_estimate: set it as
`[compare] run_noise_pct` for this machine), and writes the per-comparison rows to --out. `--run-noise PCT`
judges with another floor than the config's (0: the plain paired t interval), `--no-peers` without peer controls
([compare] peer_controls), `--pairs A:B` only the
consecutive pairs A..B (1-based: a held-out part). Exit 0 when the overall rate is at most --max-rate
(default 5 %), 1 above it, 2 on bad input.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path


from lnbench import settings as cfg
from lnbench.compare.cases import timed_cases
from lnbench.measure import stats
from lnbench.results import PERF_KIND as PERF, load_result
from lnbench.compare.verdict import Settings, compare_all, paired_log_change
from lnbench.errors import LnbenchUsageError
from lnbench.results.verdicts import Verdict


def _workers_var(base, new) -> float:
    """var(d_w) / n of one case's paired worker log ratios (NaN with fewer than 2)."""
    change = paired_log_change(base, new)
    return change[1] if change else math.nan


def tally(files: list[Path], settings: Settings, pairs: range | None = None) -> tuple[list[dict], list[dict]]:
    """(one row per case comparison of consecutive files, one row of recorded load per file)."""
    results = [load_result(path, (PERF,)) for path in files]
    cases = [timed_cases(result) for result in results]
    rows = []
    for pair, (base, new) in enumerate(zip(cases, cases[1:]), 1):
        if pairs is not None and pair not in pairs:
            continue
        for row in compare_all(base, new, settings):
            key = tuple(row[k] for k in ("backend", "op", "dtype", "shape", "mode"))
            workers_var = _workers_var(base[key], new[key]) if key in base and key in new else math.nan
            rows.append({"pair": pair, "base": files[pair - 1].name, "new": files[pair].name, **row,
                         "workers_var": workers_var, "false_flag": Verdict(row["verdict"]).changed})
    load = [{"file": path.name, "load_before": result.run.load_before or None, "load_after": result.run.load_after or None,
             "cpus_available": result.run.cpus_available or None,
             "other_timing_runs": result.run.other_timing_runs or None, "load_flag": result.run.load_flag or None}
            for path, result in zip(files, results)]
    return rows, load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, help="write the comparisons and the rates here (JSON)")
    parser.add_argument("--max-rate", type=float, default=5.0, help="exit 1 above this false-flag rate, in %%")
    parser.add_argument("--run-noise", type=float, help="the run noise floor, in %% (default: the config's)")
    parser.add_argument("--no-peers", action="store_true", help="judge without peer controls ([compare] peer_controls)")
    parser.add_argument("--pairs", help="A:B: only consecutive pairs A..B, 1-based (default: all)")
    args = parser.parse_args(argv)
    files = sorted(args.folder.glob("run-*.json"))
    if len(files) < 2:
        print(f"aa_gate: {args.folder} holds {len(files)} run-*.json file(s); need 2 or more", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_config(cfg.load_config())
        if args.run_noise is not None:
            settings = dataclasses.replace(settings, run_noise_pct=args.run_noise)
        if args.no_peers:
            settings = dataclasses.replace(settings, peer_controls=False)
        pairs = None
        if args.pairs:
            first, last = (int(v) for v in args.pairs.split(":"))
            pairs = range(first, last + 1)
        rows, load = tally(files, settings, pairs)
    except LnbenchUsageError as exc:
        print(f"aa_gate: {exc}", file=sys.stderr)
        return 2
    groups: dict[str, list[int]] = {}
    for row in rows:
        if row["verdict"] in (Verdict.SLOWER, Verdict.FASTER, Verdict.SAME):
            counts = groups.setdefault(f"{row['shape']} {row['mode']}", [0, 0])
            counts[0] += row["false_flag"]
            counts[1] += 1
    flagged, total = sum(c[0] for c in groups.values()), sum(c[1] for c in groups.values())
    rate = 100.0 * flagged / total if total else float("nan")
    judged = [r for r in rows if r["verdict"] in (Verdict.SLOWER, Verdict.FASTER, Verdict.SAME)]
    floor = stats.run_noise_estimate([math.log(r["ratio"]) for r in judged], [r["workers_var"] for r in judged])
    print(f"{len(files)} runs, {len({r['pair'] for r in rows})} consecutive pairs, {total} case comparisons; "
          f"run noise floor {settings.run_noise_pct:g}%, threshold {settings.threshold_pct:g}%")
    for group, (hits, count) in sorted(groups.items()):
        mine = [r for r in judged if f"{r['shape']} {r['mode']}" == group]
        group_floor = stats.run_noise_estimate([math.log(r["ratio"]) for r in mine], [r["workers_var"] for r in mine])
        print(f"  {group:24} {hits:3d} / {count:3d} flagged   run noise floor {group_floor:.2f}%")
    print(f"A/A false-flag rate: {flagged} / {total} = {rate:.1f}% (limit {args.max_rate:g}%)")
    print(f"run noise floor these runs show: {floor:.2f}% (stats.run_noise_estimate; [compare] run_noise_pct)")
    for entry in load:
        print("  load", json.dumps(entry))
    if args.out:
        args.out.write_text(json.dumps({"files": [p.name for p in files], "flagged": flagged, "compared": total,
                                        "rate_pct": rate, "run_noise_pct": settings.run_noise_pct,
                                        "run_noise_estimate_pct": floor, "groups": groups, "load": load, "rows": rows},
                                       indent=1, default=str) + "\n")
    return 0 if total and rate <= args.max_rate else 1


if __name__ == "__main__":
    sys.exit(main())
