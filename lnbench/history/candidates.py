"""`history --with FILE`: result files judged as the newest runs of their series without being recorded, so a pull
request's own runs are checked against the store's history of main (no baseline file from main needed).

Each file's points go to the series recording it would add them to (the same case, machine and protocol: the
series key lnbench.store.record computes), after that series' stored runs, with negative run ids (-1 for the
first file, ...). A case the store has no series of becomes a series of its own (few points: no change point).
The case and machine filters apply to them as to the stored points; the run filters (--branch, --since,
--exclude-loaded, --last) choose the stored runs only."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
import sqlalchemy as sa

from lnbench.history.query import Filters
from lnbench.results import load_result
from lnbench.store import schema as S
from lnbench.store.db import Store
from lnbench.store.identity import series_key
from lnbench.store.points import RECORDED
from lnbench.store.record import identity_and_points

#: the column that marks a point of a --with file (the stored points have it False)
CANDIDATE = "candidate"
_COLUMNS = ("run_id", "commit", "dirty", "branch", "timestamp", "load_flag", "series_id", "kind", "backend", "op",
            "dtype", "shape", "mode", "case_name", "machine", "unit", "value", "value2", "status", "detail", "values")


def _stored_ids(store: Store, keys: list[str]) -> dict[str, int]:
    with store.engine.connect() as conn:
        return dict(conn.execute(sa.select(S.series.c.series_key, S.series.c.id)
                                 .where(S.series.c.series_key.in_(keys))).all())


def candidate_points(store: Store, paths: Sequence[Path], f: Filters) -> pd.DataFrame:
    """The points of the result files `paths` as rows of lnbench.history.query.load_points (and CANDIDATE)."""
    records: list[tuple] = []
    new_ids: dict[str, int] = {}
    for number, path in enumerate(paths, 1):
        result = load_result(path, RECORDED, what="a result a store records (verify, perf, abi-compare, ...)")
        ident, points = identity_and_points(result.kind, result.version, result.run, result.rows)
        keys = [series_key(result.kind, p.case, ident.machine, ident.protocol_hash) for p in points]
        stored = _stored_ids(store, keys)
        for key, p in zip(keys, points):
            series = stored.get(key) or new_ids.setdefault(key, -1 - len(new_ids))
            records.append((-number, ident.commit, ident.dirty, ident.branch, ident.timestamp, ident.load_flag,
                            series, result.kind, *p.case, ident.machine, p.unit, p.value, p.value2, p.status,
                            p.detail, p.values))
    frame = pd.DataFrame(records, columns=list(_COLUMNS))
    for name in ("kind", "backend", "op", "dtype", "shape", "mode"):
        if getattr(f, name):
            frame = frame[frame[name] == getattr(f, name)]
    if f.machine:
        frame = frame[frame["machine"].str.contains(f.machine, regex=False)]
    return frame.assign(**{CANDIDATE: True})


def with_candidates(points: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """The stored points and the candidates' in one frame, each series' candidates after its stored runs."""
    both = pd.concat([points.assign(**{CANDIDATE: False}), candidates], ignore_index=True) if len(points) \
        else candidates
    return both.sort_values(["series_id", CANDIDATE], kind="stable").reset_index(drop=True)    # each in its order
