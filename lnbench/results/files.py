"""Reading result files: one file's kind, schema version, run record and rows (compare, plot, merge read
through here)."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, TypeVar

import pandas as pd

from lnbench.errors import LnbenchUsageError
from lnbench.results.kinds import COMPARE, KINDS, PERF, ABI, VERIFY, typed
from lnbench.results.codec import json_from_cell
from lnbench.results.records import JSON, STR, SchemaError, missing
from lnbench.results.runs import SCHEMA_KEY, IdentifiedRun

R = TypeVar("R", bound=IdentifiedRun)


@dataclass(frozen=True)
class ResultFile:
    """One result file: its kind and schema version (0: written before schemas), run record and rows."""

    path: Path
    kind: str
    run: IdentifiedRun
    rows: pd.DataFrame
    #: the JSON payload's other top-level entries (perf: protocol, peak, workers; abi-compare: workers, ...)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the whole JSON payload as parsed, for tools that rewrite a result (compare.planted); None for a CSV
    payload: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    version: str = "0"
    #: metadata cells this lnbench does not declare (a file of an older or newer version), kept as read
    undeclared: dict[str, Any] = field(default_factory=dict)

    @property
    def incomplete(self) -> str:
        """Why the run that wrote this file did not finish, or "" (RunRecord.incomplete)."""
        return self.run.incomplete

    def run_as(self, record: type[R]) -> R:
        """The run record as its kind's class (`result.run_as(PerfRun).peak_gbps`), for a reader that loaded
        only that kind; a SchemaError otherwise."""
        if not isinstance(self.run, record):
            raise SchemaError(f"{self.path}: a {self.kind} result has no {record.__name__}")
        return self.run


def _infer_kind(columns: set[str], metadata: dict[str, Any]) -> str | None:
    """The kind of a file written before schemas, from its columns (as lnbench read them then)."""
    if metadata.get("command") == COMPARE.name and COMPARE.signature <= columns:
        return COMPARE.name
    for kind in (PERF, ABI, VERIFY):
        if kind.signature <= columns and (kind is not ABI or "pair" in columns or "pair" in metadata):
            return kind.name
    return None


def _declared(path: Path, schema: Any) -> tuple[str, str]:
    """(kind, version) of a `schema` entry; a usage error for one this lnbench cannot read."""
    text = str(schema)
    name, _, version = text.rpartition("/")
    major = version.split(".")[0]
    if name not in KINDS or not major.isdigit():
        raise LnbenchUsageError(f"{path}: unknown result schema {text!r} (this lnbench reads "
                                f"{', '.join(k.schema for k in KINDS.values())})")
    if int(major) > KINDS[name].major:
        raise LnbenchUsageError(f"{path} has schema {text}, newer than this lnbench reads ({KINDS[name].schema}): "
                                f"upgrade lnbench")
    return name, version


def _read_text(path: Path) -> str:
    if not path.exists():
        raise LnbenchUsageError(f"{path}: no such file")
    if path.is_dir():
        raise LnbenchUsageError(f"{path} is a directory, not a result file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LnbenchUsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        raise LnbenchUsageError(f"{path} is empty")
    return text


def _classify(path: Path, frame: pd.DataFrame, metadata: dict[str, Any]) -> tuple[str, str]:
    if SCHEMA_KEY in metadata and not missing(metadata[SCHEMA_KEY]):
        return _declared(path, metadata[SCHEMA_KEY])
    kind = _infer_kind(set(frame.columns), metadata)
    if kind is None:
        raise LnbenchUsageError(f"{path} is not a result of lnbench perf, abi-compare, verify or compare")
    return kind, "0"


def _result(path: Path, kind: str, version: str, metadata: dict[str, Any], frame: pd.DataFrame,
            extra: dict[str, Any] | None = None, payload: dict[str, Any] | None = None) -> "ResultFile":
    run, undeclared = KINDS[kind].run_record.read(metadata)
    return ResultFile(path, kind, run, frame, extra or {}, payload, version, undeclared)


def _from_json(path: Path, text: str) -> ResultFile:
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise LnbenchUsageError(f"{path} is not valid JSON (truncated?): {exc}") from None
    rows_key = "data" if isinstance(payload, dict) and "schema" in payload else "rows"   # new: Table Schema
    if not isinstance(payload, dict) or not isinstance(payload.get(rows_key), list) \
            or not isinstance(payload.get("metadata"), dict):
        raise LnbenchUsageError(f"{path} is not an lnbench result (no metadata and rows)")
    rows = payload[rows_key]
    if not rows:
        raise LnbenchUsageError(f"{path} holds no result rows")
    if not all(isinstance(r, dict) for r in rows):
        raise LnbenchUsageError(f"{path} is not an lnbench result (rows are not records)")
    metadata = payload["metadata"]
    if SCHEMA_KEY in metadata:                  # refuse a newer file before parsing its rows
        _declared(path, metadata[SCHEMA_KEY])
    frame = _table_frame(path, text) if rows_key == "data" else pd.DataFrame(rows)
    kind, version = _classify(path, frame, metadata)
    extra = {k: v for k, v in payload.items() if k not in ("rows", "data", "schema", "metadata")}
    return _result(path, kind, version, metadata, frame, extra, payload)


def _table_frame(path: Path, text: str) -> pd.DataFrame:
    """The rows of a Table Schema result, each column of its declared type (worker indices stay integers)."""
    try:
        return pd.read_json(io.StringIO(text), orient="table", precise_float=True)
    except (ValueError, KeyError, TypeError) as exc:
        raise LnbenchUsageError(f"{path}: malformed rows: {str(exc).splitlines()[0] if str(exc) else exc}") from None


def rows_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The row records of a parsed result JSON, new (Table Schema "data") or old ("rows")."""
    return payload["data"] if "schema" in payload else payload["rows"]


def _check_complete_csv(path: Path, text: str) -> None:
    """lnbench writes every record with all its fields and ends the file with a newline: a file cut anywhere
    but at a record boundary fails one of the two."""
    records = list(csv.reader(io.StringIO(text)))
    width = len(records[0])
    short = next((i for i, record in enumerate(records[1:], 2) if record and len(record) != width), None)
    if not text.endswith("\n") or short is not None:
        where = f"record {short} has {len(records[short - 1])} of {width} fields" if short else "no final newline"
        raise LnbenchUsageError(f"{path} looks truncated ({where})")


def _csv_run_cells(frame: pd.DataFrame, kind: str) -> dict[str, Any]:
    """The run record's cells of a CSV: its declared run columns that are not also row columns (those hold
    each row's own value, such as verify's per-case seed), read from the first row."""
    record, rows = KINDS[kind].run_record, KINDS[kind].row
    nested = {c.name for c in record.COLUMNS if c.type == JSON}
    first = frame.iloc[0]
    out = {}
    for name in frame.columns:
        if record.declares(name) and not rows.declares(name):
            value = first[name]
            value = None if pd.isna(value) else value.item() if hasattr(value, "item") else value
            out[name] = json_from_cell(value) if name in nested else value
    return out


#: columns declared text in every kind that has them: a CSV cell such as the commit `063e900` or `1234567` stays
#: text (pandas alone would read it as a number, 063e900 as infinity)
TEXT_COLUMNS = frozenset(
    {c.name for kind in KINDS.values() for record in (kind.row, kind.run_record) for c in record.COLUMNS
     if c.type == STR}
    - {c.name for kind in KINDS.values() for record in (kind.row, kind.run_record) for c in record.COLUMNS
       if c.type != STR})


def _from_csv(path: Path, text: str) -> ResultFile:
    try:
        _check_complete_csv(path, text)
        frame = pd.read_csv(io.StringIO(text), dtype=dict.fromkeys(TEXT_COLUMNS, str))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, csv.Error, ValueError) as exc:
        raise LnbenchUsageError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise LnbenchUsageError(f"{path} holds no result rows")
    schema = frame[SCHEMA_KEY].iloc[0] if SCHEMA_KEY in frame.columns else None
    legacy = {"command": frame["command"].iloc[0]} if "command" in frame.columns else {}
    kind, version = _classify(path, frame, {SCHEMA_KEY: schema, **legacy} if not missing(schema) else legacy)
    return _result(path, kind, version, _csv_run_cells(frame, kind), frame)


def load_result(path: Path | str, kinds: Sequence[str] = tuple(KINDS), *, what: str = "") -> ResultFile:
    """Read one result file (JSON by content, CSV by suffix): its rows (declared columns of their declared
    dtypes), run record, kind and schema version. A usage error (one line, exit 2) for a file that is not a
    result, a kind not in `kinds`, a newer MAJOR schema, or a versioned file lacking a required column."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        result = _from_csv(path, text)
    elif text.lstrip().startswith(("{", "[")):
        result = _from_json(path, text)
    else:
        raise LnbenchUsageError(f"{path} is not an lnbench result (expected the JSON or CSV of a run)")
    if result.kind not in kinds:
        use = what or " or ".join(kinds)
        raise LnbenchUsageError(f"{path} is from lnbench {result.kind}; this needs {use}")
    kind = KINDS[result.kind]
    if result.version != "0":
        missing_cols = [c.name for c in kind.columns if c.required and c.name not in result.rows.columns]
        if missing_cols:
            raise LnbenchUsageError(f"{path} lacks the required column(s) {', '.join(missing_cols)} of {kind.schema}")
    typed(result.rows, kind)
    return result


def require_columns(result: ResultFile, columns: Sequence[str]) -> None:
    """Fail (usage error naming the file) when a column a reader needs is missing."""
    missing_cols = [c for c in columns if c not in result.rows.columns]
    if missing_cols:
        raise LnbenchUsageError(f"{result.path} lacks column(s) {', '.join(missing_cols)} of an lnbench "
                                f"{result.kind} result")
