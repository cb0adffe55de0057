"""Typed records: the base of every result row and run-metadata record (lnbench.results.rows, .runs).

A record is a dataclass whose fields are its declared columns. Each field starts UNSET: a record's cells are
the fields a writer set (None included: an empty cell), in declared order, so a row holds the columns that
apply to it and a file's columns are the union of its rows'. Building a record with a name it does not declare
is a TypeError at the line that builds it, never a column silently written.

Records read like mappings (`row["status"]`, `row.get("detail")`, `{**row}`) so tables, CSV and JSON take
them as they are, and a field is set by name or attribute; a name the record does not declare is a
SchemaError.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Self, Sequence, cast

import numpy as np

#: column types: what a value is in a row (None / NaN stands for a missing value of any type)
STR, INT, FLOAT, BOOL, LIST, JSON = "str", "int", "float", "bool", "list", "json"
#: the pandas dtype a column of each type has in a frame (load_result, rows_frame)
PANDAS_DTYPES = {STR: "object", INT: "Int64", FLOAT: "float64", BOOL: "boolean", LIST: "object", JSON: "object"}
_PYTHON_TYPES = {STR: "str | None", INT: "int | None", FLOAT: "float | None", BOOL: "bool | None",
                 LIST: "list[float] | None", JSON: "Any"}


class SchemaError(RuntimeError):
    """Rows or metadata that break their kind's declaration: a programming error in lnbench (a test catches it)."""


class _Unset:
    """The value of a field no writer set: the record has no such cell (not even an empty one)."""

    _instance: "_Unset | None" = None

    def __new__(cls) -> "_Unset":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False              # `run.kernel_sources or {}`

    def __reduce__(self) -> str:
        return "UNSET"            # one instance across pickling (worker processes send records)


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Col:
    """One declared column: its name, type (STR, INT, FLOAT, BOOL, LIST: a list of numbers, joined by `;` in a
    CSV cell; JSON: a nested value, metadata only), what it means, and whether every record has it."""

    name: str
    type: str
    meaning: str
    required: bool = False


def missing(value: Any) -> bool:
    """A missing value of any type (None, NaN, pandas' NA)."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NAType"


def value_fits(value: Any, kind: str) -> bool:
    """Is `value` of column type `kind` (or missing)?"""
    if missing(value) or kind == JSON:
        return True
    if kind == STR:
        return isinstance(value, str)
    if kind == BOOL:
        return isinstance(value, (bool, np.bool_))
    if kind == INT:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind == FLOAT:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind == LIST:
        return isinstance(value, (list, tuple, str))     # a CSV cell holds the list joined by `;`
    return False


class Record(MutableMapping):
    """Base of the generated record classes (see `record_class`): declared fields, read as a mapping of the
    cells a writer set."""

    COLUMNS: ClassVar[tuple[Col, ...]] = ()
    _NAMES: ClassVar[frozenset[str]] = frozenset()
    __dataclass_fields__: ClassVar[dict[str, Any]]      # set by record_class (a record class is a dataclass)

    # -- the cells ----------------------------------------------------------------------------------------
    def cells(self) -> dict[str, Any]:
        """The fields a writer set, in declared order (a plain dict: what files and frames are made of)."""
        return {c.name: v for c in self.COLUMNS if (v := getattr(self, c.name)) is not UNSET}

    @classmethod
    def of(cls, cells: Mapping[str, Any]) -> Self:
        """A record of `cells` (a row read back from a file, a payload from a worker process); a name it does
        not declare is a SchemaError naming it."""
        undeclared = [k for k in cells if k not in cls._NAMES]
        if undeclared:
            raise SchemaError(f"{cls.__name__}: undeclared column(s) {', '.join(map(str, undeclared))}")
        return cls(**cells)

    @classmethod
    def read(cls, cells: Mapping[str, Any]) -> tuple[Self, dict[str, Any]]:
        """A record of the declared cells of a file's mapping, and the cells it does not declare (a file of an
        older or newer lnbench may hold some): reading keeps both, writing refuses the second."""
        known = {k: v for k, v in cells.items() if k in cls._NAMES}
        return cls(**known), {k: v for k, v in cells.items() if k not in cls._NAMES}

    @classmethod
    def declares(cls, name: str) -> bool:
        return name in cls._NAMES

    def copy(self) -> Self:
        return dataclasses.replace(self)

    def with_(self, **changes: Any) -> Self:
        """A copy with some fields set (a SchemaError for an undeclared one)."""
        out = self.copy()
        out.update(changes)
        return out

    # -- the mapping protocol (tables, pandas and older call sites read rows by column name) -----------------
    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, UNSET) if key in self._NAMES else UNSET
        if value is UNSET:
            raise KeyError(key)
        return value

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in self._NAMES:
            raise SchemaError(f"{type(self).__name__}: undeclared field {key!r}")
        object.__setattr__(self, key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._NAMES:
            raise SchemaError(f"{type(self).__name__}: undeclared column {key!r}")
        object.__setattr__(self, key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self._NAMES or getattr(self, key) is UNSET:
            raise KeyError(key)
        object.__setattr__(self, key, UNSET)

    def __iter__(self) -> Iterator[str]:
        return iter(self.cells())

    def __len__(self) -> int:
        return len(self.cells())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.cells().items())})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.cells() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]      # mutable

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self).__module__, type(self).__qualname__, self.cells()))


def _rebuild(module: str, name: str, cells: dict[str, Any]) -> Record:
    import importlib
    return getattr(importlib.import_module(module), name)(**cells)


def record_class(name: str, columns: Sequence[Col], module: str, doc: str,
                 base: type[Record] = Record) -> type[Record]:
    """A Record dataclass (of `base`) of `columns`: one field a column, typed after its column type, default
    UNSET."""
    seen: set[str] = set()
    for col in columns:
        if col.name in seen:
            raise SchemaError(f"{name}: column {col.name} declared twice")
        seen.add(col.name)
    fields = [(c.name, _PYTHON_TYPES[c.type], field(default=UNSET, metadata={"col": c})) for c in columns]
    cls = cast(type[Record], dataclasses.make_dataclass(name, fields, bases=(base,), eq=False, repr=False,
                                                        namespace={"__doc__": doc, "__module__": module}))
    cls.COLUMNS = tuple(columns)
    cls._NAMES = frozenset(c.name for c in columns)
    return cls


def cols(*specs: tuple, required: Iterable[str] = ()) -> tuple[Col, ...]:
    """Columns from (name, type, meaning) specs; `required` names those every record has."""
    need = set(required)
    return tuple(Col(name, kind, meaning, name in need) for name, kind, meaning in specs)


def plain(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's cells (or a mapping's items) as a plain dict."""
    return record.cells() if isinstance(record, Record) else dict(record)
