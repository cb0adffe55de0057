"""Change points per series, searched once: answers are kept in the store's change_cache by a key of the search
(its values, where a change may be, and the method's settings: the same search always has the same answer, and
recorded points never change). The searches not yet made are made here, one after another: a search takes
milliseconds (a series without a change stops its permutation test early, lnbench.history.changes), less than
worker processes cost to start on a busy machine (200 series of 200 runs: 0.6 s in one process, 1.1 s with two
workers on 2 shared cores)."""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import sqlalchemy as sa

from lnbench.history.changes import P_VALUE, PERMUTATIONS, ChangePoint, Search
from lnbench.store import schema as S
from lnbench.store.db import Store
from lnbench.store.record import insert_ignore

#: the method's identity in the key (a change to the method or its settings searches again)
METHOD = f"e-divisive/p={P_VALUE}/permutations={PERMUTATIONS}/allowed-places/v3"


def cache_key(search: Search) -> str:
    return hashlib.sha256(json.dumps([METHOD, search.values, search.allowed]).encode()).hexdigest()


def searched_here(searches: Sequence[Search]) -> dict[Search, list[ChangePoint]]:
    """Every search made in this process, no cache (history --with: runs that are not in the store)."""
    return {s: s.run() for s in set(searches)}


def found_changes(store: Store, searches: Sequence[Search]) -> dict[Search, list[ChangePoint]]:
    """The change points of each search, from the store's cache or searched now (and kept)."""
    keys = {cache_key(s): s for s in searches}
    known: dict[str, str] = {}
    with store.engine.connect() as conn:
        wanted = list(keys)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            known.update((k, v) for k, v in conn.execute(
                sa.select(S.change_cache.c.key, S.change_cache.c.result).where(S.change_cache.c.key.in_(chunk))))
    missing = [k for k in keys if k not in known]
    if missing:
        fresh = {k: json.dumps([[cp.index, cp.size_pct, cp.p] for cp in keys[k].run()]) for k in missing}
        with store.transaction() as conn:
            insert_ignore(conn, S.change_cache, [{"key": k, "result": v} for k, v in fresh.items()], ["key"])
        known.update(fresh)
    return {s: [ChangePoint(int(i), float(size), float(p)) for i, size, p in json.loads(known[k])]
            for k, s in keys.items()}
