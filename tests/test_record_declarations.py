"""The declared row and run records (lnbench.results.rows, .runs) against tests/data/record_columns.json: every
record's columns in order (name, type, meaning, required), its docstring and, for a run record, its protocol
names and agreement fields. A declaration change fails here until the fixture is regenerated on purpose:

    python tests/test_record_declarations.py --write
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lnbench.results import rows, runs
from lnbench.results.records import Record

FIXTURE = Path(__file__).resolve().parent / "data" / "record_columns.json"
ROWS = ("VerifyRow", "SelftestRow", "PerfRow", "AbiRow", "InspectRow", "ProfileRow", "CompareRow", "HistoryRow")
RUNS = ("VerifyRun", "SelftestRun", "PerfRun", "AbiRun", "InspectRun", "CompareRun", "ProfileRun", "HistoryRun")


def _record_class(name: str) -> type[Record]:
    return getattr(rows if name in ROWS else runs, name)


def declaration(cls: type[Record]) -> dict[str, Any]:
    """What the fixture holds of one record class."""
    out: dict[str, Any] = {
        "doc": cls.__doc__,
        "columns": [[c.name, c.type, c.meaning, c.required] for c in cls.COLUMNS],
    }
    if issubclass(cls, runs.RunRecord):
        out["protocol"] = dict(cls.PROTOCOL_NAMES)
        out["agree"] = list(cls.AGREE)
    return out


def declarations() -> dict[str, Any]:
    return {name: declaration(_record_class(name)) for name in (*ROWS, *RUNS)}


def write() -> None:
    FIXTURE.write_text(json.dumps(declarations(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.mark.parametrize("name", [*ROWS, *RUNS])
def test_a_records_declaration_is_the_fixtures(name: str) -> None:
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))[name]
    assert declaration(_record_class(name)) == expected


def test_the_fixture_names_every_record() -> None:
    assert set(json.loads(FIXTURE.read_text(encoding="utf-8"))) == {*ROWS, *RUNS}


@pytest.mark.parametrize("name", [*ROWS, *RUNS])
def test_a_records_fields_are_its_columns(name: str) -> None:
    cls = _record_class(name)
    fields = dataclasses.fields(cls)
    assert tuple(f.metadata["col"] for f in fields) == cls.COLUMNS
    assert cls._NAMES == frozenset(c.name for c in cls.COLUMNS)
    assert all(f.default is not dataclasses.MISSING and repr(f.default) == "UNSET" for f in fields)


def test_every_instruction_class_has_its_columns() -> None:
    """The exec_CLASS (and floor) columns are written out per class: a new instruction class needs them."""
    from lnbench.constants import INSTRUCTION_CLASSES
    for c in INSTRUCTION_CLASSES:
        assert rows.InspectRow.declares(f"exec_{c}") and rows.ProfileRow.declares(f"exec_{c}")
        assert rows.AbiRow.declares(f"exec_{c}_tensor") and rows.AbiRow.declares(f"exec_{c}_pointer")
    assert all(rows.ProfileRow.declares(name) for name in rows.FLOOR_COLUMNS)


def test_a_field_without_a_column_type_is_refused() -> None:
    from lnbench.results.records import SchemaError, col, record

    with pytest.raises(SchemaError, match="Bad.when"):
        @record
        class Bad(Record):
            when: dict[str, int] | None = col("not a column type")


def test_a_columns_type_is_its_annotations() -> None:
    types = {c.name: c.type for c in rows.PerfRow.COLUMNS}
    assert (types["backend"], types["M"], types["median_us"], types["above_peak"], types["run_us"]) == \
        ("str", "int", "float", "bool", "list")
    assert {c.name: c.type for c in runs.PerfRun.COLUMNS}["clocks_before"] == "json"


def test_the_type_checker_sees_every_lazy_export_from_its_home() -> None:
    """lnbench.results' `if TYPE_CHECKING:` imports name each lazily exported name from the module it loads from."""
    import ast
    import lnbench.results as package

    seen: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(package.__file__).read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                seen.update({alias.name: stmt.module.rsplit(".", 1)[1] for alias in stmt.names})
    assert seen == package._HOME


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: python {sys.argv[0]} --write   (regenerates {FIXTURE.name} from the live records)")
    write()
    print(f"wrote {FIXTURE}")
