"""FlyDSL's CI dashboard history (`history.json` of FlyDSL's `.github/dashboard/ingest`, schema 1: records of
op, shape, dtype, metric (TB/s or TFLOPS), value, status, ts, commit, run_id, runner, arch) imported into the
store, so a FlyDSL team's existing history shows in `lnbench history` and `lnbench report`.

Each (run_id, runner) is one run of kind `flydsl` (machine: the runner and its arch); each record a point of the
series (op, dtype, shape, metric). Importing the same file again adds nothing."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lnbench.errors import LnbenchUsageError
from lnbench.store import schema as S
from lnbench.store.db import Store
from lnbench.store.identity import _digest, series_key

KIND = "flydsl"
_NEEDED = ("op", "shape", "dtype", "metric", "run_id", "runner")


def is_flydsl_history(path: Path) -> bool:
    """Does `path` look like FlyDSL's dashboard history.json (a JSON object with a `records` list)?"""
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        with open(path, encoding="utf-8") as handle:
            head = handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("{") and '"records"' in head and '"metadata"' not in head


def load_history(path: Path) -> list[dict[str, Any]]:
    """The records of a FlyDSL history.json (a usage error naming the file when it is not one, or is cut short)."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LnbenchUsageError(f"{path} is not a readable FlyDSL history.json (truncated?): {exc}") from None
    records = payload.get("records") if isinstance(payload, dict) else None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise LnbenchUsageError(f"{path} is not a FlyDSL dashboard history.json (no list of records)")
    for i, record in enumerate(records):
        missing = [k for k in _NEEDED if record.get(k) in (None, "")]
        if missing:
            raise LnbenchUsageError(f"{path}: record {i} lacks {', '.join(missing)}")
    return records


def import_history(store: Store, records: list[dict[str, Any]]) -> tuple[int, int]:
    """Record FlyDSL history records; (new runs, new points). One transaction for the whole file."""
    from lnbench.store.record import insert_ignore

    by_run: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_run[(str(record["run_id"]), str(record["runner"]))].append(record)
    new_runs = new_points = 0
    with store.transaction() as conn:
        for (run_id, runner), recs in by_run.items():
            first = recs[0]
            machine = f"{runner} ({first.get('arch') or 'unknown arch'})"
            key = _digest(KIND, run_id, runner)
            new_runs += insert_ignore(conn, S.runs, [{
                "run_key": key, "kind": KIND, "schema_version": "1", "commit": str(first.get("commit") or ""),
                "dirty": False, "branch": f"pr-{first['pr']}" if first.get("pr") else "",
                "timestamp": str(first.get("ts") or ""), "machine": machine, "device": str(first.get("arch") or ""),
                "protocol": "{}", "protocol_hash": "flydsl-ci", "lnbench_version": "",
                "command_line": f"FlyDSL CI run {run_id} on {runner}", "complete": True, "parts": "[]",
                "load_flag": ""}], ["run_key"])
            run_pk = conn.execute(S.runs.select().with_only_columns(S.runs.c.id)
                                  .where(S.runs.c.run_key == key)).scalar_one()
            series_rows, points = [], []
            for r in recs:
                case = (f"flydsl:{r['op']}", str(r["op"]), str(r["dtype"]), str(r["shape"]), str(r["metric"]), "")
                skey = series_key(KIND, case, machine, "flydsl-ci")
                series_rows.append({"series_key": skey, "kind": KIND, "backend": case[0], "op": case[1],
                                    "dtype": case[2], "shape": case[3], "mode": case[4], "case_name": "",
                                    "machine": machine, "protocol_hash": "flydsl-ci", "unit": str(r["metric"])})
                points.append((skey, r))
            insert_ignore(conn, S.series, series_rows, ["series_key"])
            ids = dict(conn.execute(S.series.select().with_only_columns(S.series.c.series_key, S.series.c.id)
                                    .where(S.series.c.series_key.in_([k for k, _ in points]))).all())
            new_points += insert_ignore(conn, S.points, [
                {"run_id": run_pk, "series_id": ids[k], "value": r.get("value"), "value2": None, "values": None,
                 "status": str(r.get("status") or "ok"), "detail": ""} for k, r in points], ["run_id", "series_id"])
    return new_runs, new_points
