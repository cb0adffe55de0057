"""FlyDSL's CI dashboard history (`history.json` of FlyDSL's `.github/dashboard/ingest`, schema 1: records of
op, shape, dtype, metric (TB/s or TFLOPS), value, status, FlyDSL's own comparison (vs_main, vs_tag, its regression
flag), extra, source, and the run's ts, commit, pr, run_id, runner, arch) imported into the store, so a FlyDSL
team's existing history shows in `lnbench history` and `lnbench report`, FlyDSL's flags beside lnbench's verdicts.

Each (run_id, runner) is one run of kind `flydsl`: machine the runner and its arch, device the arch, commit, time,
branch `pr-N` for a pull request's run and `main` for a push (a record without a PR). Each record is a point of
the series (op, dtype, shape, metric); every field of the record that no run or series column holds (vs_main,
vs_tag, regression, extra, source, pr, and any field a later FlyDSL adds) is kept in the point's `detail` as a
JSON object, which `flag_text` and `flag_fields` read. Importing the same file again adds nothing."""
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
#: record fields held by the series and point columns, and by the run's columns; every other field goes to detail
_POINT_FIELDS = ("op", "shape", "dtype", "metric", "value", "status")
_RUN_FIELDS = ("ts", "commit", "run_id", "runner", "arch")
#: the branch of a run without a pull request: FlyDSL's CI records a push to main so
MAIN_BRANCH = "main"


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
                "dirty": False, "branch": branch_of(first),
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
                 "status": str(r.get("status") or "ok"), "detail": detail_of(r)} for k, r in points],
                ["run_id", "series_id"])
    return new_runs, new_points


def branch_of(record: dict[str, Any]) -> str:
    """The branch of a record's run: `pr-N` for a pull request's run, else `main` (FlyDSL's CI pushes to main)."""
    return f"pr-{record['pr']}" if record.get("pr") else MAIN_BRANCH


def detail_of(record: dict[str, Any]) -> str:
    """A point's detail: the record's fields that no series, point or run column holds, as a JSON object ("" when
    there are none)."""
    kept = {k: v for k, v in record.items() if k not in _POINT_FIELDS and k not in _RUN_FIELDS}
    return json.dumps(kept, sort_keys=True) if kept else ""


def _fields(detail: str) -> dict[str, Any]:
    """A point's detail as FlyDSL's fields ({} when it is empty, not JSON, or not an object)."""
    try:
        parsed = json.loads(detail) if detail else {}
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _delta_pct(comparison: Any) -> float | None:
    """The delta_pct of FlyDSL's vs_main / vs_tag object (None when there is none or it is not a number)."""
    value = comparison.get("delta_pct") if isinstance(comparison, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def flag_fields(detail: str) -> dict[str, Any]:
    """FlyDSL's own flags of one point, for JSON output: its regression flag and its change vs main and vs the tag,
    in % (None where the detail does not hold them: a point of lnbench's own, or of an older import)."""
    fields = _fields(detail)
    regression = fields.get("regression")
    return {"flydsl_regression": regression if isinstance(regression, bool) else None,
            "flydsl_vs_main_pct": _delta_pct(fields.get("vs_main")),
            "flydsl_vs_tag_pct": _delta_pct(fields.get("vs_tag"))}


def flag_text(detail: str) -> str:
    """FlyDSL's own flags of one point in a few words: "FlyDSL: regression -7.8% vs main", "FlyDSL: +1.2% vs main,
    -2.5% vs v0.2.0"; "" when the detail holds none."""
    fields, flags = _fields(detail), flag_fields(detail)
    parts = []
    main, tag = flags["flydsl_vs_main_pct"], flags["flydsl_vs_tag_pct"]
    if main is not None:
        label = str((fields.get("vs_main") or {}).get("label") or MAIN_BRANCH)
        parts.append(f"{'regression ' if flags['flydsl_regression'] else ''}{main:+.1f}% vs {label}")
    elif flags["flydsl_regression"]:
        parts.append("regression")
    if tag is not None:
        parts.append(f"{tag:+.1f}% vs {(fields.get('vs_tag') or {}).get('tag') or 'tag'}")
    return f"FlyDSL: {', '.join(parts)}" if parts else ""
