"""Change points per series, searched once: answers are kept in the store's change_cache by a key of the series,
the runs its values came from and the method's settings (recorded points never change, so a key's answer never
does). The series not yet searched are searched here, one after another: a search takes milliseconds (a series
without a change stops its permutation test early, lnbench.history.changes), less than worker processes cost to
start on a busy machine (200 series of 200 runs: 0.6 s in one process, 1.1 s with two workers on 2 shared cores)."""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import sqlalchemy as sa

from lnbench.history.changes import P_VALUE, PERMUTATIONS, ChangePoint, change_points
from lnbench.store import schema as S
from lnbench.store.db import Store
from lnbench.store.record import insert_ignore

#: the method's identity in the key (a change to the method or its settings searches again)
METHOD = f"e-divisive/p={P_VALUE}/permutations={PERMUTATIONS}/v2"


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
        fresh = {k: json.dumps(_search(wanted[k])) for k in missing}
        with store.transaction() as conn:
            insert_ignore(conn, S.change_cache, [{"key": k, "result": v} for k, v in fresh.items()], ["key"])
        known.update(fresh)
    return {k: [ChangePoint(int(i), float(s), float(p)) for i, s, p in json.loads(known[k])] for k in keys}
