"""Issue 32 item 6: are change points honest about noise? Records a folder of repeated identical perf runs
(run-*.json, e.g. from scripts/device_aa_history.sh) into a fresh store and counts the change points `lnbench
history` finds per series (every one is false: nothing changed), then records a copy of the same runs with every
aggregate median 5% slower from run STEP on (default: two thirds in) into another store and reports where each
series' change point was found.
    python scripts/aa_history.py FOLDER [STEP]
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from lnbench.history.changes import change_points
from lnbench.history.query import Filters, load_points
from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record


def series_values(url: str) -> dict[str, list[float]]:
    store = open_store(url)
    points = load_points(store, Filters(kind="perf", last=10_000))
    store.close()
    return {" ".join(map(str, key)): group["value"].astype(float).tolist()
            for key, group in points.groupby(["backend", "op", "shape", "mode"])}


def main(folder: Path, step: int | None) -> None:
    files = sorted(folder.glob("run-*.json"))
    step = step if step is not None else 2 * len(files) // 3
    tmp = Path(tempfile.mkdtemp())
    aa, planted = open_store(f"sqlite:///{tmp / 'aa.sqlite'}"), open_store(f"sqlite:///{tmp / 'planted.sqlite'}")
    for i, path in enumerate(files):
        result = load_result(path)
        run = result.run.with_(timestamp=f"{result.run.timestamp}#{i:03d}")     # keep the files' order
        record(aa, result.kind, result.version, run, result.rows)
        rows = result.rows.copy()
        if i >= step:
            agg = rows["row_kind"] == "aggregate"
            rows.loc[agg, "median_us"] = rows.loc[agg, "median_us"] * 1.05
        record(planted, result.kind, result.version, run, rows)
    aa.close(), planted.close()
    print(f"{len(files)} runs of {folder}; planted +5% from run {step + 1} (index {step})")
    out = {"runs": len(files), "step_index": step, "series": []}
    planted_values = series_values(f"sqlite:///{tmp / 'planted.sqlite'}")
    for name, values in series_values(f"sqlite:///{tmp / 'aa.sqlite'}").items():
        spread = (max(values) - min(values)) / sorted(values)[len(values) // 2] * 100
        false = change_points(values)
        found = change_points(planted_values[name])
        out["series"].append({"series": name, "spread_pct": round(spread, 2), "false": [c.__dict__ for c in false],
                              "planted_found": [c.__dict__ for c in found]})
        print(f"{name:40s} spread {spread:5.2f}%  A/A change points: {len(false)} "
              f"{[(c.index, round(c.size_pct, 2)) for c in false]}  planted step found at: "
              f"{[(c.index, round(c.size_pct, 2), round(c.p, 4)) for c in found]}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
