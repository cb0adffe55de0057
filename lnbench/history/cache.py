"""Change points per series, searched once: answers are kept in the store's change_cache by a key of the series,
the runs its values came from and the method's settings (recorded points never change, so a key's answer never
does); the series not yet searched are searched in worker processes when there are many."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from typing import Sequence

import sqlalchemy as sa

from lnbench.history.changes import P_VALUE, PERMUTATIONS, ChangePoint, change_points
from lnbench.store import schema as S
from lnbench.store.db import Store
from lnbench.store.record import insert_ignore

#: the method's identity in the key (a change to the method or its settings searches again)
METHOD = f"e-divisive/p={P_VALUE}/permutations={PERMUTATIONS}/v1"
#: fewer series than this are searched in this process
PARALLEL_FROM = 16


def cache_key(series_id: int, run_ids: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps([METHOD, int(series_id), [int(r) for r in run_ids]]).encode()).hexdigest()


def _search(values: list[float]) -> list[list[float]]:
    return [[cp.index, cp.size_pct, cp.p] for cp in change_points(values)]


def found_changes(store: Store, wanted: dict[str, list[float]]) -> dict[str, list[ChangePoint]]:
    """The change points of each series in `wanted` (cache key -> its values)."""
    keys = list(wanted)
    known: dict[str, str] = {}
    with store.engine.connect() as conn:
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            known.update((k, v) for k, v in conn.execute(
                sa.select(S.change_cache.c.key, S.change_cache.c.result).where(S.change_cache.c.key.in_(chunk))))
    missing = [k for k in keys if k not in known]
    if missing:
        workers = min(len(os.sched_getaffinity(0)), len(missing) // PARALLEL_FROM + 1)
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                results = pool.map(_search, [wanted[k] for k in missing], chunksize=8)
        else:
            results = [_search(wanted[k]) for k in missing]
        fresh = {k: json.dumps(r) for k, r in zip(missing, results)}
        with store.transaction() as conn:
            insert_ignore(conn, S.change_cache, [{"key": k, "result": v} for k, v in fresh.items()], ["key"])
        known.update(fresh)
    return {k: [ChangePoint(int(i), float(s), float(p)) for i, s, p in json.loads(known[k])] for k in keys}
