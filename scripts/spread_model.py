"""A model (not a measurement) of a perf run's wall time on several GPUs, from the rows of a one-GPU run.

    python scripts/spread_model.py ONE_GPU.json [GPUS] [--alone-below-mib 64] [--alone-host-fraction 0.7]
                                   [--untimed-in-lock]

Each worker row gives a case's warm-up plus untimed probe run, and its R timed runs (warmup_s, iters,
median_us); the rest of a worker's stream pass (build, first call, clean-up) is spread evenly over its cases.
The cases are dealt out as `perf --devices` deals them (lnbench.run.gpus.deal by family), each GPU runs its P
workers one after another after one shared start-up, and every case goes through a first-come reader/writer
lock as in lnbench.measure.host_lock: warm-up and probe shared; timed runs shared, or, for a host-bound case
(by size, or host_fraction at or above the bar), exclusive after the 0.05 s re-warm. --untimed-in-lock: the
untimed work too holds the lock shared (what keeping it out of host-bound timing as well would cost). Prints the modelled wall
time for one GPU and for GPUS, and each GPU's lock waits.
"""
from __future__ import annotations

import argparse
import heapq
import json
import sys
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lnbench.run.gpus import deal  # noqa: E402
from lnbench.measure.timing import REWARM_S  # noqa: E402
from lnbench.perf.cases import PerfCase  # noqa: E402
from lnbench.perf.spread import host_bound  # noqa: E402

Step = tuple[str, object]


def case_of(row: dict) -> PerfCase:
    return PerfCase(0, row["backend"], row["op"], row["dtype"], int(row["M"]), int(row["N"]), row["mode"], 1e-5, 0)


def programme(cases: list[tuple], workers: int, free_s: float, startup_s: float, untimed_in_lock: bool = False
              ) -> Iterator[Step]:
    """One GPU's steps: ('wait', seconds), ('take', 'shared' | 'exclusive'), ('give', None)."""
    outside, inside = (0.0, free_s / 2) if untimed_in_lock else (free_s / 2, 0.0)
    yield "wait", startup_s
    for worker in range(workers):
        for per_worker in cases:
            warm_s, runs_s, alone = per_worker[worker]
            yield "wait", outside
            yield "take", "shared"
            yield "wait", inside + warm_s
            if alone:
                yield "give", None
                yield "take", "exclusive"
                yield "wait", REWARM_S + runs_s
            else:
                yield "wait", runs_s
            yield "wait", inside
            yield "give", None
            yield "wait", outside


def simulate(shares: list[list[tuple]], workers: int, free_s: float, startup_s: float,
             untimed_in_lock: bool = False) -> tuple[float, list[float]]:
    """(wall time, each GPU's lock waits) of the GPUs' programmes through one first-come reader/writer lock."""
    progs = [programme(share, workers, free_s, startup_s, untimed_in_lock) for share in shares]
    events = [(0.0, g) for g in range(len(progs))]
    heapq.heapify(events)
    queue: list[tuple[int, str, float]] = []
    holding = {"shared": 0, "exclusive": 0}
    held: list[str] = [""] * len(progs)
    waits = [0.0] * len(progs)
    end = 0.0

    def grant(now: float) -> None:
        while queue:
            gpu, mode, since = queue[0]
            busy = holding["exclusive"] or (mode == "exclusive" and holding["shared"])
            if busy:
                return
            queue.pop(0)
            holding[mode] += 1
            held[gpu] = mode
            waits[gpu] += now - since
            heapq.heappush(events, (now, gpu))

    while events:
        now, gpu = heapq.heappop(events)
        for kind, arg in progs[gpu]:
            if kind == "wait":
                heapq.heappush(events, (now + float(arg), gpu))
                break
            if kind == "take":
                queue.append((gpu, str(arg), now))
                grant(now)
                break
            holding[held[gpu]] -= 1
            held[gpu] = ""
            grant(now)
        else:
            end = max(end, now)
    return end, waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("gpus", type=int, nargs="?", default=2)
    parser.add_argument("--alone-below-mib", type=float, default=64.0)
    parser.add_argument("--alone-host-fraction", type=float, default=0.7)
    parser.add_argument("--untimed-in-lock", action="store_true")
    args = parser.parse_args()
    data = json.loads(args.result.read_text())
    rows = [r for r in data["data"] if r["row_kind"] == "worker" and r["status"] == "ok"]
    workers = max(int(r["worker"]) for r in rows) + 1
    per_case: dict[tuple, dict[int, tuple[float, float, bool]]] = {}
    timed = 0.0
    for row in rows:
        per_call_s = row["iters"] * row["median_us"] * 1e-6
        warm_s, runs_s = row["warmup_s"] + per_call_s, row["runs"] * per_call_s
        alone = host_bound(case_of(row), args.alone_below_mib) or row["host_fraction"] >= args.alone_host_fraction
        per_case.setdefault((row["backend"], row["op"], row["dtype"], row["shape"], row["mode"]), {})[
            int(row["worker"])] = (warm_s, runs_s, alone)
        timed += warm_s + runs_s
    passes = [w for w in data["workers"] if isinstance(w.get("stream_s"), (int, float))]
    free_s = max(0.0, sum(w["stream_s"] for w in passes) - timed) / len(rows)
    startup_s = max(w["startup_s"] for w in passes)
    keys = [k for k, v in per_case.items() if len(v) == workers]
    for count in (1, args.gpus):
        shares = deal(keys, count, lambda key: key[:4])
        wall, waits = simulate([[per_case[k] for k in share] for share in shares], workers, free_s, startup_s,
                               args.untimed_in_lock)
        print(f"{count} GPU(s): {wall:.1f} s modelled; lock waits per GPU {', '.join(f'{w:.1f}' for w in waits)} s")
    print(f"({len(keys)} cases, {workers} workers, start-up {startup_s:.1f} s, {free_s:.3f} s untimed work a case)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
