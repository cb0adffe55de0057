"""The one codec of list cells: a list column (LIST: `run_us`, `kernel_run_us`) is a JSON array in a JSON file
and its numbers joined by `;` in a CSV cell; a JSON value (a run record's JSON field: a dict or a list) is JSON
text in a CSV cell and the value itself in a JSON file."""
from __future__ import annotations

import json
import math
from typing import Any

#: how a list value is written in a CSV cell (JSON keeps it an array): `7995.94;7336.85;5892.47`
CSV_LIST_SEPARATOR = ";"


def csv_cell(value: Any) -> Any:
    """A row value as one CSV cell: lists and tuples joined by CSV_LIST_SEPARATOR, dicts as JSON text."""
    if isinstance(value, (list, tuple)):
        return CSV_LIST_SEPARATOR.join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    return value


def csv_run_cell(value: Any) -> Any:
    """A run record's cell as the CSV column it is repeated in: a nested value (a JSON field such as
    `modelled_targets` or `targets`) as JSON text, anything else as it is (json_from_cell reads it back)."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return value


def json_from_cell(value: Any) -> Any:
    """A JSON field's CSV cell back as the value a JSON file holds (csv_run_cell's inverse); text that is not
    a JSON array or object as it is (files of older lnbench versions)."""
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def list_from_cell(value: Any) -> Any:
    """A list column's CSV cell back as the list a JSON holds (csv_cell's inverse): `1.5;2` -> [1.5, 2.0], a
    lone number -> [it]; a list or a missing value as it is, text that is not numbers as it is."""
    if isinstance(value, str):
        try:
            return [float(v) for v in value.split(CSV_LIST_SEPARATOR)]
        except ValueError:
            return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return [float(value)]
    return value


def numbers_of(value: Any) -> list[float]:
    """A list cell as numbers, whatever wrote it: a list, `;`-joined text (a CSV), or JSON array text (files
    of older lnbench versions). A ValueError or TypeError for anything else."""
    if isinstance(value, str):
        value = json.loads(value) if value.lstrip().startswith("[") else value.split(CSV_LIST_SEPARATOR)
    return [float(v) for v in value]
