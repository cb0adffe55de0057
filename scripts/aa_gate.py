"""A/A false-flag rate: compare consecutive identical perf runs and count SLOWER / FASTER verdicts.

    python scripts/aa_gate.py FOLDER [--out FILE.json]

FOLDER holds run-*.json files written by the same `lnbench perf ... --json` command run one after another
(scripts/device_aa_gate.sh makes them on a GPU). Every consecutive pair (run 1 → 2, 2 → 3, ...) is compared
case by case with `lnbench compare`'s statistics and settings (the packaged config); since nothing changed
between the runs, every SLOWER or FASTER is a false flag. Prints the rate per shape × mode and overall, the
machine load each run recorded, and writes the per-comparison rows to --out. Exit 0 when the overall rate is
at most --max-rate (default 5 %), 1 above it, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lnbench import config as cfg
from lnbench.compare.cases import timed_cases
from lnbench.results import PERF_KIND as PERF, load_result
from lnbench.compare.verdict import Settings, compare_all
from lnbench.errors import LnbenchUsageError
from lnbench.verdicts import Verdict


def tally(files: list[Path], settings: Settings) -> tuple[list[dict], list[dict]]:
    """(one row per case comparison of consecutive files, one row of recorded load per file)."""
    results = [load_result(path, (PERF,)) for path in files]
    cases = [timed_cases(result) for result in results]
    rows = []
    for pair, (base, new) in enumerate(zip(cases, cases[1:]), 1):
        for row in compare_all(base, new, settings):
            rows.append({"pair": pair, "base": files[pair - 1].name, "new": files[pair].name, **row,
                         "false_flag": Verdict(row["verdict"]).changed})
    load = [{"file": path.name, **{k: result.metadata.get(k) for k in
                                   ("load_before", "load_after", "cpus_available", "other_timing_runs", "load_flag")}}
            for path, result in zip(files, results)]
    return rows, load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, help="write the comparisons and the rates here (JSON)")
    parser.add_argument("--max-rate", type=float, default=5.0, help="exit 1 above this false-flag rate, in %%")
    args = parser.parse_args(argv)
    files = sorted(args.folder.glob("run-*.json"))
    if len(files) < 2:
        print(f"aa_gate: {args.folder} holds {len(files)} run-*.json file(s); need 2 or more", file=sys.stderr)
        return 2
    try:
        rows, load = tally(files, Settings.from_config(cfg.load_config()))
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
    print(f"{len(files)} runs, {len(files) - 1} consecutive pairs, {total} case comparisons")
    for group, (hits, count) in sorted(groups.items()):
        print(f"  {group:24} {hits:3d} / {count:3d} flagged")
    print(f"A/A false-flag rate: {flagged} / {total} = {rate:.1f}% (limit {args.max_rate:g}%)")
    for entry in load:
        print("  load", json.dumps(entry))
    if args.out:
        args.out.write_text(json.dumps({"files": [p.name for p in files], "flagged": flagged, "compared": total,
                                        "rate_pct": rate, "groups": groups, "load": load, "rows": rows},
                                       indent=1, default=str) + "\n")
    return 0 if total and rate <= args.max_rate else 1


if __name__ == "__main__":
    sys.exit(main())
