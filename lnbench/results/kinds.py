"""The result kinds: each pairs a row record and a run record (lnbench.results.rows, .runs) with a schema
version; its columns, CSV/JSON encoding and loader derive from the records.

Writers (cli_common.emit_outputs, through results.frames) take the kind from the run record's `schema` cell
(`Kind.run` stamps it): the columns come out in declared order with their declared types, and a row with an
undeclared column or without a required one is a programming error (SchemaError), never silently written.
Every CSV carries `schema` as a column (like the other run cells), every JSON in its `metadata`, beside
pandas' Table Schema (`schema` at the top level of the JSON, with `data`): e.g. `verify/1.0`.

Readers (results.files.load_result: compare, plot, merge) refuse, as a usage error (one line, exit 2), a file
of a kind they do not take and a file whose schema has a MAJOR version newer than this lnbench declares. A file
of an lnbench from before schemas (no `schema`) reads as version 0 of the kind its columns show (the
signatures below).

Versioning: a new optional column is a MINOR change (1.0 -> 1.1: older readers carry it unread); renaming or
removing a column, changing its type or meaning, or making it required is a MAJOR one (2.0).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Iterable, Mapping, TypeVar

import pandas as pd

from lnbench.results import rows as R
from lnbench.results import runs as U
from lnbench.results.records import LIST, PANDAS_DTYPES, STR, JSON, Cells, Col, Record, SchemaError, plain, value_fits
from lnbench.results.runs import SCHEMA_KEY, IdentifiedRun


RowT = TypeVar("RowT", bound=Record)
RunT = TypeVar("RunT", bound=IdentifiedRun)


@dataclass(frozen=True)
class Kind(Generic[RowT, RunT]):
    """A result kind: its name, schema version ("MAJOR.MINOR"), row record and run record."""

    name: str
    version: str
    row: type[RowT]
    run_record: type[RunT]
    #: columns that identify a file of this kind written before schemas (version 0)
    signature: frozenset[str] = field(default_factory=frozenset)

    @property
    def columns(self) -> tuple[Col, ...]:
        """The row columns, in file order (the row record's fields)."""
        return self.row.COLUMNS

    @property
    def schema(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Col | None:
        return next((c for c in self.columns if c.name == name), None)

    def run(self, **cells: Any) -> RunT:
        """A run record of this kind, stamped with the kind's schema."""
        return self.run_record(**{SCHEMA_KEY: self.schema, **cells})

    def check_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """SchemaError for the first row with an undeclared column or without a required one."""
        declared, required = set(self.names), {c.name for c in self.columns if c.required}
        for i, row in enumerate(rows):
            extra = [k for k in row if k not in declared]
            missing = [k for k in required if k not in row]
            if extra or missing:
                what = "; ".join(filter(None, [f"undeclared column(s) {', '.join(extra)}" if extra else "",
                                                f"required column(s) {', '.join(sorted(missing))} missing"
                                                if missing else ""]))
                raise SchemaError(f"{self.name} row {i}: {what} (lnbench.results)")

    def check_types(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """SchemaError for the first value that is not of its column's declared type (missing values pass)."""
        for i, row in enumerate(rows):
            for key, value in row.items():
                col = self.column(key)
                if col is not None and not value_fits(value, col.type):
                    raise SchemaError(f"{self.name} row {i}: {key} = {value!r} is not {col.type} (lnbench.results)")


VERIFY = Kind("verify", "1.1", R.VerifyRow, U.VerifyRun, frozenset({"tensor", "max_abs_err", "allowed", "case"}))
SELFTEST = Kind("selftest", "1.1", R.SelftestRow, U.SelftestRun,
                frozenset({"planted_bug", "tensor", "max_abs_err", "allowed"}))
PERF = Kind("perf", "1.0", R.PerfRow, U.PerfRun, frozenset({"row_kind", "run_us", "median_us", "backend", "mode"}))
ABI = Kind("abi-compare", "1.1", R.AbiRow, U.AbiRun, frozenset({"part"}))    # 1.1: compare's verdict words; modelled
INSPECT = Kind("inspect", "1.1", R.InspectRow, U.InspectRun, frozenset({"part", "kernel_name", "kernarg_bytes"}))
# compare 1.1: the modelled columns; 1.2: peer_shift_pct (peer controls)
COMPARE = Kind("compare", "1.2", R.CompareRow, U.CompareRun, frozenset({"verdict", "ratio", "ci_low", "ci_high"}))

PROFILE = Kind("profile", "1.0", R.ProfileRow, U.ProfileRun, frozenset({"modelled", "bound_us", "target"}))
#: lnbench history's series: a summary of the store, read from it (never recorded into one)
HISTORY = Kind("history", "1.0", R.HistoryRow, U.HistoryRun)

KINDS: dict[str, Kind[Any, Any]] = {k.name: k for k in (VERIFY, SELFTEST, PERF, ABI, INSPECT, COMPARE, PROFILE, HISTORY)}
#: the names readers pass to load_result
PERF_KIND, ABI_KIND, VERIFY_KIND, COMPARE_KIND, INSPECT_KIND, SELFTEST_KIND, PROFILE_KIND, HISTORY_KIND = (
    PERF.name, ABI.name, VERIFY.name, COMPARE.name, INSPECT.name, SELFTEST.name, PROFILE.name, HISTORY.name)


def kind_of_metadata(metadata: Cells) -> Kind:
    """The declared kind a run record (or a writer's metadata) names (SchemaError when it names none: every
    result is stamped)."""
    schema = plain(metadata).get(SCHEMA_KEY)
    name = str(schema or "").rsplit("/", 1)[0]
    if name not in KINDS:
        raise SchemaError(f"result metadata names no declared kind (schema = {schema!r})")
    return KINDS[name]


def ordered_columns(kind: Kind, present: Iterable[str]) -> list[str]:
    """The declared columns among `present`, in declared order."""
    have = set(present)
    return [name for name in kind.names if name in have]


def typed(frame: pd.DataFrame, kind: Kind) -> pd.DataFrame:
    """`frame` with each declared column cast to its declared pandas dtype where its values allow (a column that
    does not cast is left as it is: an older file's oddity is the reader's to refuse, not this cast's)."""
    for name in frame.columns:
        col = kind.column(name)
        if col is None or col.type in (STR, LIST, JSON):
            if col is not None:
                frame[name] = frame[name].astype("object")
            continue
        try:
            frame[name] = frame[name].astype(PANDAS_DTYPES[col.type])
        except (TypeError, ValueError):
            pass
    return frame
