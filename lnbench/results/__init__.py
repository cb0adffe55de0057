"""lnbench's result model: typed records for every result's rows and run, the kinds built from them, one
codec for list cells, the frames files are written from, and the loader.

    records   the Record base: declared fields, unset (None) until a writer sets them; cells() to a dict
    rows      a row record a kind (VerifyRow, PerfRow, AbiRow, InspectRow, CompareRow, SelftestRow, HistoryRow)
    runs      a run record a kind (VerifyRun, PerfRun, ...): identity, protocol, load, shard, devices
    kinds     Kind: name + schema version + row and run records; KINDS
    codec     list cells (`;` in a CSV, arrays in JSON)
    frames    records -> pandas frame, CSV frame, Table Schema JSON
    files     load_result: a file's kind, version, run record and rows
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:     # what a type checker sees; at run time each name is imported on first use (_HOME)
    from lnbench.results.codec import CSV_LIST_SEPARATOR, csv_cell, list_from_cell, numbers_of
    from lnbench.results.files import ResultFile, load_result, require_columns, rows_of
    from lnbench.results.frames import csv_frame, json_table, rows_frame
    from lnbench.results.kinds import (
        ABI, ABI_KIND, COMPARE, COMPARE_KIND, HISTORY, HISTORY_KIND, INSPECT, INSPECT_KIND, KINDS, PERF, PERF_KIND,
        PROFILE, PROFILE_KIND, SELFTEST, SELFTEST_KIND, VERIFY, VERIFY_KIND, Kind, kind_of_metadata, ordered_columns,
        typed)
    from lnbench.results.records import (
        BOOL, FLOAT, INT, JSON, LIST, PANDAS_DTYPES, STR, UNSET, Cells, Col, Record, SchemaError, missing, plain, value_fits)
    from lnbench.results.rows import (
        FLOOR_COLUMNS, AbiRow, CompareRow, HistoryRow, InspectRow, PerfRow, ProfileRow, SelftestRow, VerifyRow)
    from lnbench.results.runs import (
        SCHEMA_KEY, AbiRun, CasesRun, CompareRun, HistoryRun, IdentifiedRun, InspectRun, PerfRun, ProfileRun,
        RunRecord, SelftestRun, VerifyRun)

#: public name -> the module that defines it (imported on first use: a verify worker that needs only the
#: row records does not pay for pandas and the loader)
_HOME: dict[str, str] = {
    **dict.fromkeys("CSV_LIST_SEPARATOR csv_cell list_from_cell numbers_of".split(), "codec"),
    **dict.fromkeys("ResultFile load_result require_columns rows_of".split(), "files"),
    **dict.fromkeys("csv_frame json_table rows_frame".split(), "frames"),
    **dict.fromkeys((
        "ABI ABI_KIND COMPARE COMPARE_KIND HISTORY HISTORY_KIND INSPECT INSPECT_KIND KINDS PERF PERF_KIND PROFILE "
        "PROFILE_KIND SELFTEST SELFTEST_KIND VERIFY VERIFY_KIND Kind kind_of_metadata ordered_columns typed").split(),
        "kinds"),
    **dict.fromkeys(("BOOL FLOAT INT JSON LIST PANDAS_DTYPES STR UNSET Cells Col Record SchemaError missing plain "
                     "value_fits").split(), "records"),
    **dict.fromkeys("AbiRow CompareRow FLOOR_COLUMNS HistoryRow InspectRow PerfRow ProfileRow SelftestRow VerifyRow"
                    .split(), "rows"),
    **dict.fromkeys("SCHEMA_KEY AbiRun CasesRun CompareRun HistoryRun IdentifiedRun InspectRun PerfRun ProfileRun "
                    "RunRecord SelftestRun VerifyRun".split(), "runs"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'lnbench.results' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lnbench.results.{_HOME[name]}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_HOME)
