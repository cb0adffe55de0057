"""Recording a result as one run of the store, in one transaction (a recording stopped midway leaves the store as
it was), idempotently (the same result twice is one run with the same points: every insert skips what is there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lnbench.results import KINDS, Cells, IdentifiedRun, missing, rows_frame
from lnbench.store import schema as S
from lnbench.store.db import Store, StoreError
from lnbench.store.identity import Identity, identity, series_key
from lnbench.store.points import RECORDED, Point, points_of

_CHUNK = 500


@dataclass(frozen=True)
class Recorded:
    """What one recording did: the run's id, whether the run was new, and the points it added."""

    run_id: int
    new_run: bool
    new_points: int
    points: int


def insert_ignore(conn: Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]], key: Sequence[str]) -> int:
    """Insert `rows`, skipping those whose `key` columns are already there; the number inserted."""
    if not rows:
        return 0
    dialect = conn.dialect.name
    if dialect in ("sqlite", "postgresql"):
        module = __import__(f"sqlalchemy.dialects.{dialect}", fromlist=["insert"])
        # RETURNING counts the rows inserted (an executemany's rowcount is not reliable on every driver)
        stmt = module.insert(table).on_conflict_do_nothing(index_elements=list(key)).returning(table.c[key[0]])
        return sum(len(conn.execute(stmt, list(rows[start:start + _CHUNK])).all())
                   for start in range(0, len(rows), _CHUNK))
    inserted = 0                                    # another backend: ask first (in the same transaction)
    for row in rows:
        where = sa.and_(*(table.c[k] == row[k] for k in key))
        if conn.execute(sa.select(sa.literal(1)).select_from(table).where(where)).first() is None:
            conn.execute(table.insert(), row)
            inserted += 1
    return inserted


def estimate_cells(run: IdentifiedRun) -> dict[str, Any]:
    """The run's up-front estimate and actual seconds (lnbench.run.upfront), None where it has none."""
    cells: dict[str, Any] = {"estimate_range": None if missing(run.value("estimate_range"))
                             else str(run.value("estimate_range"))}
    for name in ("estimate_s", "actual_s"):
        value: Any = run.value(name)
        try:
            cells[name] = None if missing(value) else float(value)
        except (TypeError, ValueError):
            cells[name] = None
    return cells


def _run_row(ident: Identity, complete: bool, estimate: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {**(estimate or {}), "run_key": ident.run_key, "kind": ident.kind, "schema_version": ident.schema_version,
            "commit": ident.commit, "dirty": ident.dirty, "branch": ident.branch, "timestamp": ident.timestamp,
            "machine": ident.machine, "device": ident.device, "protocol": ident.protocol,
            "protocol_hash": ident.protocol_hash, "lnbench_version": ident.lnbench_version,
            "command_line": ident.command_line, "complete": complete,
            "parts": json.dumps([ident.shard] if ident.shard else []), "load_flag": ident.load_flag}


def _run_id(conn: Connection, ident: Identity, complete: bool,
            estimate: Mapping[str, Any] | None = None) -> tuple[int, bool]:
    """The run's id (inserted when new); a shard part joins its run: parts, earliest time, completeness."""
    new = insert_ignore(conn, S.runs, [_run_row(ident, complete, estimate)], ["run_key"]) > 0
    row = conn.execute(sa.select(S.runs.c.id, S.runs.c.parts, S.runs.c.timestamp, S.runs.c.complete,
                                 S.runs.c.load_flag).where(S.runs.c.run_key == ident.run_key)).one()
    if not new and ident.shard:
        parts = json.loads(row.parts)
        if ident.shard not in parts:
            conn.execute(S.runs.update().where(S.runs.c.id == row.id).values(
                parts=json.dumps(sorted(parts + [ident.shard])), timestamp=min(row.timestamp, ident.timestamp),
                complete=bool(row.complete and complete),
                load_flag="; ".join(filter(None, (row.load_flag, ident.load_flag)))))
    return row.id, new


def _series_ids(conn: Connection, kind: str, ident: Identity, cases: list[tuple[tuple[str, ...], str]]
                ) -> dict[tuple[str, ...], int]:
    keyed = {case: series_key(kind, case, ident.machine, ident.protocol_hash) for case, _ in cases}
    rows = [{"series_key": keyed[case], "kind": kind, "backend": case[0], "op": case[1], "dtype": case[2],
             "shape": case[3], "mode": case[4], "case_name": case[5], "machine": ident.machine,
             "protocol_hash": ident.protocol_hash, "unit": unit} for case, unit in cases]
    insert_ignore(conn, S.series, rows, ["series_key"])
    ids: dict[str, int] = {}
    keys = list(keyed.values())
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start:start + _CHUNK]
        ids.update(conn.execute(sa.select(S.series.c.series_key, S.series.c.id)
                                .where(S.series.c.series_key.in_(chunk))).all())
    return {case: ids[key] for case, key in keyed.items()}


def _with_row_protocol(run: IdentifiedRun, rows: pd.DataFrame) -> IdentifiedRun:
    """`run` with the protocol settings a CSV holds only as row columns (abi-compare's `pair`, `runs`), so a
    run's CSV and JSON are one run."""
    fill = {}
    for key in run.PROTOCOL_NAMES:
        if not run.has(key) and key in rows.columns and rows[key].notna().any():
            value = rows[key].dropna().iloc[0]
            fill[key] = value.item() if hasattr(value, "item") else value
    return run.with_(**fill) if fill else run


def identity_and_points(kind: str, version: str, run: IdentifiedRun, rows: pd.DataFrame) -> tuple[Identity, list[Point]]:
    """What recording a result writes, without writing it: its run's identity and its points (StoreError for a
    kind a store does not record)."""
    if kind not in KINDS:
        raise StoreError(f"cannot record a result of unknown kind {kind!r}")
    if kind not in RECORDED:
        raise StoreError(f"a result of lnbench {kind} is not recorded in a store (it records {', '.join(RECORDED)})")
    return identity(kind, version, _with_row_protocol(run, rows)), list(points_of(kind, rows))


def record(store: Store, kind: str, version: str, run: IdentifiedRun, rows: pd.DataFrame) -> Recorded:
    """Record one result (its kind, schema version, run record and rows) as one run, in one transaction."""
    ident, points = identity_and_points(kind, version, run, rows)
    complete = not run.incomplete
    with store.transaction() as conn:
        run_id, new = _run_id(conn, ident, complete, estimate_cells(run))
        ids = _series_ids(conn, kind, ident, [(p.case, p.unit) for p in points])
        added = insert_ignore(conn, S.points, [
            {"run_id": run_id, "series_id": ids[p.case], "value": p.value, "value2": p.value2, "values": p.values,
             "status": p.status, "detail": p.detail[:2000]} for p in points], ["run_id", "series_id"])
    return Recorded(run_id, new, added, len(points))


def record_result(store: Store, result: Any) -> Recorded:
    """Record a loaded result file (lnbench.results.ResultFile)."""
    return record(store, result.kind, result.version, result.run, result.rows)


def record_rows(store: Store, rows: Iterable[Cells], run: IdentifiedRun) -> Recorded:
    """Record a command's rows and run record as it writes them (cli_common.emit_outputs)."""
    from lnbench.results import kind_of_metadata

    kind = kind_of_metadata(run)
    return record(store, kind.name, kind.version, run, rows_frame(list(rows), kind=kind))
