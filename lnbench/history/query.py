"""The stored points history reads: the last N runs that pass the run filters, and their points of the series
that pass the case filters, ordered by time (two indexed queries: the cost follows N, not the store's size)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa

from lnbench.errors import LnbenchUsageError
from lnbench.store import schema as S
from lnbench.store.db import Store


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    backend: str | None = None
    op: str | None = None
    dtype: str | None = None
    shape: str | None = None
    mode: str | None = None
    machine: str | None = None          # a part of the machine text
    branch: str | None = None
    since: str | None = None            # an ISO date/time, or a commit (its first run on)
    exclude_loaded: bool = False
    last: int = 200


def _since(conn: sa.Connection, since: str) -> str:
    try:
        return _dt.datetime.fromisoformat(since).isoformat()
    except ValueError:
        pass
    first = conn.execute(sa.select(sa.func.min(S.runs.c.timestamp)).where(S.runs.c.commit.like(f"{since}%"))).scalar()
    if first is None:
        raise LnbenchUsageError(f"--since {since}: neither a date (YYYY-MM-DD) nor a commit of a stored run")
    return first


def load_points(store: Store, f: Filters, worker_values: bool = False) -> pd.DataFrame:
    """One row per point: run (id, commit, dirty, branch, timestamp, load_flag), series (id, kind, backend, op,
    dtype, shape, mode, case_name, machine, unit), value, value2, status, detail (`worker_values`: and `values`,
    the JSON list of a perf point's worker medians); oldest first."""
    r, s, p = S.runs, S.series, S.points
    with store.engine.connect() as conn:
        where = []
        if f.kind:
            where.append(r.c.kind == f.kind)
        if f.branch:
            where.append(r.c.branch == f.branch)
        if f.machine:
            where.append(r.c.machine.like(f"%{f.machine}%"))
        if f.exclude_loaded:
            where.append(r.c.load_flag == "")
        if f.since:
            where.append(r.c.timestamp >= _since(conn, f.since))
        run_ids = conn.execute(sa.select(r.c.id).where(*where).order_by(r.c.timestamp.desc(), r.c.id.desc())
                               .limit(f.last)).scalars().all()
        if not run_ids:
            return pd.DataFrame()
        case = [s.c[name] == value for name, value in (("backend", f.backend), ("op", f.op), ("dtype", f.dtype),
                                                       ("shape", f.shape), ("mode", f.mode)) if value]
        query = (sa.select(r.c.id.label("run_id"), r.c.commit, r.c.dirty, r.c.branch, r.c.timestamp, r.c.load_flag,
                           s.c.id.label("series_id"), s.c.kind, s.c.backend, s.c.op, s.c.dtype, s.c.shape, s.c.mode,
                           s.c.case_name, s.c.machine, s.c.unit, p.c.value, p.c.value2, p.c.status, p.c.detail,
                           *([p.c["values"]] if worker_values else []))
                 .select_from(p.join(r, p.c.run_id == r.c.id).join(s, p.c.series_id == s.c.id))
                 .where(p.c.run_id.in_(run_ids), *case))
        frame = pd.DataFrame([tuple(row) for row in conn.execute(query)], columns=list(query.selected_columns.keys()))
    return frame.sort_values(["series_id", "timestamp", "run_id"], kind="stable").reset_index(drop=True)
