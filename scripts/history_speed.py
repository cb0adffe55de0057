"""Issue 32 item 7: is `lnbench history` over 10^5 runs x 200 cases within 2 s? Builds such a store and times it.

    python scripts/history_speed.py build STORE.sqlite [--runs 100000] [--cases 200]
    python scripts/history_speed.py time STORE.sqlite [--repeat 3]

`build` writes an SQLite store (the schema by lnbench's migrations, the rows by one bulk insert: recording 10^5
runs one by one would take hours): perf series of 1% Gaussian noise (fixed seed), every 10th with a +5% step 60
runs before the newest, so the search meets series with and without change points. `time` prints, with the load
average: opening the store, the query of the newest 200 runs, the first change-point search of every series
(change_cache emptied) and a cached one, in this process; then the whole `lnbench history -q --json` as a
command (imports included), first and cached, wall and CPU seconds (the command's own and its children's).
"""
from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MACHINE = "NVIDIA H200 (synthetic) | driver 0 | Synthetic CPU"
STEP_BEFORE_NEWEST = 60


def _cases(count: int) -> list[tuple[str, str, str, str]]:
    shapes = [f"{m}x{n}" for m in (32, 1024, 4096, 8192, 16384) for n in (256, 1024, 4096, 8192, 16384)]
    cases = [(b, o, s, mode) for b in ("flydsl", "torch") for o in ("fwd", "bwd") for mode in ("hot", "cold")
             for s in shapes]
    while len(cases) < count:
        cases += [(f"{b}-{len(cases)}", o, s, m) for b, o, s, m in cases[:count - len(cases)]]
    return cases[:count]


def build(path: Path, runs: int, cases: int) -> None:
    from lnbench.store.db import open_store

    if path.exists():
        sys.exit(f"{path} exists: remove it first")
    open_store(f"sqlite:///{path}").close()            # the schema, by the migrations
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("DROP INDEX ix_points_series_run")   # rebuilt once at the end (faster than per row)
    start = time.perf_counter()
    series = _cases(cases)
    conn.executemany(
        'INSERT INTO series (id, series_key, kind, backend, op, dtype, shape, mode, case_name, machine, '
        'protocol_hash, unit) VALUES (?, ?, "perf", ?, ?, "bf16", ?, ?, "", ?, "p0", "us")',
        [(i + 1, f"series-{i}", b, o, s, m, MACHINE) for i, (b, o, s, m) in enumerate(series)])
    conn.executemany(
        'INSERT INTO runs (id, run_key, kind, schema_version, "commit", dirty, branch, timestamp, machine, device, '
        'protocol, protocol_hash, lnbench_version, command_line, complete, parts, load_flag) VALUES '
        '(?, ?, "perf", "1.1", ?, 0, "main", ?, ?, "H200", "{}", "p0", "0.0", "lnbench perf", 1, "[]", "")',
        [(r + 1, f"run-{r}", f"{r:08x}", f"2020-01-01T00:00:00+{r:06d}", MACHINE) for r in range(runs)])
    rng = np.random.default_rng(32)
    base = rng.uniform(10, 1000, cases)
    stepped = np.arange(cases) % 10 == 0
    chunk = 1000
    for first in range(0, runs, chunk):
        ids = np.arange(first, min(first + chunk, runs))
        values = base * (1 + rng.normal(0, 0.01, (len(ids), cases)))
        values[np.ix_(ids >= runs - STEP_BEFORE_NEWEST, stepped)] *= 1.05
        conn.executemany('INSERT INTO points (run_id, series_id, value, value2, "values", status, detail) '
                         'VALUES (?, ?, ?, NULL, NULL, "ok", "")',
                         ((int(r) + 1, s + 1, float(values[i, s])) for i, r in enumerate(ids) for s in range(cases)))
        conn.commit()
    conn.execute("CREATE INDEX ix_points_series_run ON points (series_id, run_id)")
    conn.commit()
    conn.close()
    print(f"{path}: {runs} runs x {cases} cases ({runs * cases} points, {path.stat().st_size / 2**30:.2f} GiB) "
          f"in {time.perf_counter() - start:.0f} s")


def _timed(func):  # noqa: ANN001, ANN202
    start = time.perf_counter()
    out = func()
    return time.perf_counter() - start, out


def _command(url: str) -> tuple[float, float]:
    """Wall and CPU seconds of one `lnbench history -q --json` (the command and its worker processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from lnbench.cli import main; main()", "history", "-q", "--store", url, "--json",
                        str(Path(tmp) / "h.json")], check=True, stdout=subprocess.DEVNULL, cwd=tmp)   # lnbench from PYTHONPATH
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _clear_cache(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM change_cache")


def time_store(path: Path, repeat: int) -> None:
    from lnbench.history.cache import found_changes
    from lnbench.history.query import Filters, load_points
    from lnbench.history.summary import summarize
    from lnbench.store.db import open_store

    url = f"sqlite:///{path}"
    rows: list[tuple[str, list[float]]] = []
    opened, query, first, cached, cmd_first, cmd_cached = ([] for _ in range(6))
    for _ in range(repeat):
        _clear_cache(path)
        seconds, store = _timed(lambda: open_store(url))
        opened.append(seconds)
        seconds, points = _timed(lambda: load_points(store, Filters()))
        query.append(seconds)
        seconds, summary = _timed(lambda: summarize(points, lambda wanted: found_changes(store, wanted)))
        first.append(seconds)
        cached.append(_timed(lambda: summarize(points, lambda wanted: found_changes(store, wanted)))[0])
        store.close()
        _clear_cache(path)
        cmd_first.append(_command(url))
        cmd_cached.append(_command(url))
    with_changes = sum(bool(r["changes"]) for r in summary)
    rows += [("open + migrate", opened), ("query of the newest 200 runs", query),
             (f"change points, first search ({len(summary)} series, {with_changes} with change points)", first),
             ("change points, cached", cached)]
    print(f"load average before/after: {LOAD_BEFORE} / {os.getloadavg()}; {len(os.sched_getaffinity(0))} cores; "
          f"{repeat} repeats, median (min-max) s")
    for name, values in rows:
        print(f"| {name} | {np.median(values):.2f} ({min(values):.2f}-{max(values):.2f}) |")
    for name, pairs in (("whole `lnbench history -q --json`, first search", cmd_first),
                        ("whole `lnbench history -q --json`, cached", cmd_cached)):
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        print(f"| {name} | {np.median(walls):.2f} wall ({min(walls):.2f}-{max(walls):.2f}), "
              f"{np.median(cpus):.2f} CPU |")


LOAD_BEFORE = os.getloadavg()

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("build", "time"))
    parser.add_argument("store", type=Path)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.what == "build":
        build(args.store, args.runs, args.cases)
    else:
        time_store(args.store, args.repeat)
