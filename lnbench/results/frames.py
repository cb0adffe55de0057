"""Records as frames: the one path from row and run records to a pandas frame, a CSV and a Table Schema JSON."""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pandas as pd

from lnbench.results.codec import csv_cell, csv_run_cell
from lnbench.results.kinds import Kind, kind_of_metadata, ordered_columns, typed
from lnbench.results.records import Cells, missing, plain
from lnbench.results.runs import SCHEMA_KEY


def rows_frame(rows: Sequence[Cells], metadata: Cells | None = None,
               kind: Kind | None = None) -> pd.DataFrame:
    """Long-format frame: one row per record, the run record's cells repeated as columns (a column the rows
    have keeps the rows' values). With the rows' `kind` (the run record's `schema` names it when not given),
    the declared columns in declared order and types; a row with an undeclared column or without a required
    one is a SchemaError."""
    run = plain(metadata or {})
    if kind is None and SCHEMA_KEY in run:
        kind = kind_of_metadata(run)
    cells = [plain(r) for r in rows]
    if kind is not None:
        kind.check_rows(cells)
    frame = pd.DataFrame(cells)
    if kind is not None:
        frame = typed(frame[ordered_columns(kind, frame.columns)], kind)
    for column in frame.columns[frame.dtypes.map(lambda d: d.kind == "f")]:
        present = [r[column] for r in cells if r.get(column) is not None and r[column] == r[column]]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            frame[column] = frame[column].astype("Int64")    # integers with gaps stay integers (not 6.0)
    for key, value in run.items():
        if key not in frame.columns:
            frame[key] = csv_run_cell(value)
    return frame


def csv_frame(rows: Sequence[Cells], metadata: Cells | None = None) -> pd.DataFrame:
    """Rows (+ run cells) as the frame a CSV is written from: one type per column, lists joined."""
    return rows_frame([{k: csv_cell(v) for k, v in plain(row).items()} for row in rows], metadata)


def json_table(rows: Sequence[Cells], kind: Kind | None = None) -> dict[str, Any]:
    """Rows as pandas' Table Schema ({"schema": ..., "data": [...]}, the form `pd.read_json(path,
    orient="table")` reads back with each column's type); list values stay JSON arrays. Every number keeps all
    its digits (pandas' own writer keeps 15 decimal places: 4.5588826891318e-07 would come back as 4.55888269e-07)."""
    frame = rows_frame(rows, kind=kind)
    data = [{column: _json_value(value) for column, value in record.items()}
            for record in frame.astype(object).to_dict("records")]
    return {"schema": pd.io.json.build_table_schema(frame, index=False), "data": data}


def _json_value(value: Any) -> Any:
    """A frame cell as JSON takes it: missing as None, numpy scalars as Python's."""
    if missing(value):
        return None
    return value.item() if isinstance(value, np.generic) else value
