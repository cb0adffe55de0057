"""Reading lnbench result files: the JSON of perf / abi-compare / verify / compare, and their CSVs.

This is the edge where result files are validated: a file that is missing, empty, truncated, not an lnbench
result, or of a command the caller cannot use is a LnbenchUsageError naming the file (one line, exit 2).
Readers look columns up by name, so columns added by newer lnbench versions are carried along unread.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from lnbench.errors import LnbenchUsageError

PERF, ABI, VERIFY, COMPARE = "perf", "abi-compare", "verify", "compare"
KINDS: tuple[str, ...] = (PERF, ABI, VERIFY, COMPARE)

#: columns that identify each kind of result (all must be present)
_SIGNATURES: dict[str, frozenset[str]] = {
    COMPARE: frozenset({"command", "verdict", "ratio", "ci_low", "ci_high"}),
    PERF: frozenset({"row_kind", "run_us", "median_us", "backend", "mode"}),
    ABI: frozenset({"part"}),                       # + "pair" in the metadata (runtime rows carry it too)
    VERIFY: frozenset({"tensor", "max_abs_err", "allowed", "case"}),
}


@dataclass(frozen=True)
class ResultFile:
    """One result file: which command wrote it, its run metadata and its rows (one frame row per result row)."""

    path: Path
    kind: str
    metadata: dict[str, Any]
    rows: pd.DataFrame
    #: the JSON payload's other top-level entries (perf: protocol, peak, workers; abi-compare: workers, ...)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the whole JSON payload as parsed, for tools that rewrite a result (compare.planted); None for a CSV
    payload: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def incomplete(self) -> str:
        """Why the run that wrote this file did not finish ("interrupted (SIGINT) after 2 of 40 cases"), or ""
        for a complete run (and for files of lnbench versions that did not record it). lnbench.result_sink."""
        if self.metadata.get("complete") in (False, "False", "false"):
            return str(self.metadata.get("stopped") or "stopped before the end")
        return ""


def _kind_of(columns: set[str], metadata: dict[str, Any]) -> str | None:
    if metadata.get("command") == COMPARE and _SIGNATURES[COMPARE] - {"command"} <= columns:
        return COMPARE
    for kind in (PERF, ABI, VERIFY):
        if _SIGNATURES[kind] <= columns and (kind != ABI or "pair" in columns or "pair" in metadata):
            return kind
    return None


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
    frame = _table_frame(path, text) if rows_key == "data" else pd.DataFrame(rows)
    kind = _kind_of(set(frame.columns), metadata)
    if kind is None:
        raise LnbenchUsageError(f"{path} is not a result of lnbench perf, abi-compare, verify or compare")
    extra = {k: v for k, v in payload.items() if k not in ("rows", "data", "schema", "metadata")}
    return ResultFile(path, kind, metadata, frame, extra, payload)


def _table_frame(path: Path, text: str) -> pd.DataFrame:
    """The rows of a Table Schema result, each column of its declared type (worker indices stay integers)."""
    try:
        return pd.read_json(io.StringIO(text), orient="table")
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


def _from_csv(path: Path, text: str) -> ResultFile:
    try:
        _check_complete_csv(path, text)
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, csv.Error, ValueError) as exc:
        raise LnbenchUsageError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise LnbenchUsageError(f"{path} holds no result rows")
    constant = {c: frame[c].iloc[0] for c in frame.columns if frame[c].nunique(dropna=False) == 1}
    metadata = {k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v) for k, v in constant.items()}
    kind = _kind_of(set(frame.columns), metadata)
    if kind is None:
        raise LnbenchUsageError(f"{path} is not a result of lnbench perf, abi-compare, verify or compare")
    return ResultFile(path, kind, metadata, frame)


def load_result(path: Path | str, allowed: Sequence[str] = KINDS, *, what: str = "") -> ResultFile:
    """Read and classify one result file (JSON by content, CSV by suffix); refuse kinds not in `allowed`."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        result = _from_csv(path, text)
    elif text.lstrip().startswith(("{", "[")):
        result = _from_json(path, text)
    else:
        raise LnbenchUsageError(f"{path} is not an lnbench result (expected the JSON or CSV of a run)")
    if result.kind not in allowed:
        use = what or " or ".join(allowed)
        raise LnbenchUsageError(f"{path} is from lnbench {result.kind}; this needs {use}")
    return result


def require_columns(result: ResultFile, columns: Sequence[str]) -> None:
    """Fail (usage error naming the file) when a column a reader needs is missing."""
    missing = [c for c in columns if c not in result.rows.columns]
    if missing:
        raise LnbenchUsageError(f"{result.path} lacks column(s) {', '.join(missing)} of an lnbench {result.kind} result")
