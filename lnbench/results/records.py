"""Typed records: the base of every result row and run-metadata record (lnbench.results.rows, .runs).

A record is a dataclass whose fields are its declared columns. Each field starts UNSET: a record's cells are
the fields a writer set (None included: an empty cell), in declared order, so a row holds the columns that
apply to it and a file's columns are the union of its rows'. Building a record with a name it does not declare
is a TypeError at the line that builds it, never a column silently written.

A record class is a class statement, decorated `@record`, whose fields are `col(...)` declarations; each column's
type (STR, INT, ...) is its annotation's (`str | None`, `int | None`, `float | None`, `bool | None`,
`list[float] | None`, `Any`), so a type checker sees every field. Code reads a record by field (`row.median_us`);
an unset field reads None, so what a reader gets is the annotation's type, and `row.has("median_us")` tells an
unset field from one set to None. A record is no mapping: `cells()` (and `plain`, which also takes a mapping) is
the one adapter to a plain dict, at the boundary where rows become frames, CSV/JSON files, store points and
display tables. A field is set by attribute (or `set(**cells)`); a name the record does not declare is a
SchemaError.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, Self, Union, TypeVar, dataclass_transform, get_type_hints

import numpy as np

#: column types: what a value is in a row (None / NaN stands for a missing value of any type)
STR, INT, FLOAT, BOOL, LIST, JSON = "str", "int", "float", "bool", "list", "json"
#: the pandas dtype a column of each type has in a frame (load_result, rows_frame)
PANDAS_DTYPES = {STR: "object", INT: "Int64", FLOAT: "float64", BOOL: "boolean", LIST: "object", JSON: "object"}
#: a field's annotation -> its column type (a record declares its columns as annotated fields)
_COLUMN_TYPES: dict[Any, str] = {str | None: STR, int | None: INT, float | None: FLOAT, bool | None: BOOL,
                                 list[float] | None: LIST, Any: JSON}


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


#: the default of every field, standing for "no writer set it": setting it forgets the cell, and an unset field
#: reads None (its class attribute), so a field's annotation (`str | None`) is what a reader gets
UNSET: Final[_Unset] = _Unset()


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


class Record:
    """Base of the record classes (declared with `@record` and `col` fields): declared fields, read by attribute
    (an unset field reads None); `cells()` is the one way to a plain dict (files, frames, display)."""

    COLUMNS: ClassVar[tuple[Col, ...]] = ()
    _NAMES: ClassVar[frozenset[str]] = frozenset()
    __dataclass_fields__: ClassVar[dict[str, Any]]      # set by @record (a record class is a dataclass)

    # -- the cells ----------------------------------------------------------------------------------------
    def cells(self) -> dict[str, Any]:
        """The fields a writer set, in declared order (a plain dict: what files and frames are made of)."""
        have = self.__dict__
        return {c.name: have[c.name] for c in self.COLUMNS if c.name in have}

    def has(self, name: str) -> bool:
        """Did a writer set the field `name` (None included)?"""
        return name in self.__dict__

    def value(self, name: str) -> Any:
        """The field `name` where the name is computed at run time or the kind may not declare it (code that
        handles records of several kinds): None where unset or undeclared."""
        return self.__dict__.get(name) if name in self._NAMES else None

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
        return type(self)(**self.cells())

    def set(self, **cells: Any) -> Self:
        """Set some fields (a SchemaError for an undeclared one); the record itself."""
        for key, value in cells.items():
            setattr(self, key, value)
        return self

    def with_(self, **changes: Any) -> Self:
        """A copy with some fields set (a SchemaError for an undeclared one)."""
        return self.copy().set(**changes)

    def unset(self, name: str) -> None:
        """Forget the field `name` (the record has no such cell again)."""
        setattr(self, name, UNSET)

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in self._NAMES:
            raise SchemaError(f"{type(self).__name__}: undeclared field {key!r}")
        if value is UNSET:
            self.__dict__.pop(key, None)       # reads the class's None again
        else:
            self.__dict__[key] = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.cells().items())})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return type(self) is type(other) and self.cells() == other.cells()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]      # mutable

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self).__module__, type(self).__qualname__, self.cells()))


def _rebuild(module: str, name: str, cells: dict[str, Any]) -> Record:
    import importlib
    return getattr(importlib.import_module(module), name)(**cells)


#: a record, or cells as a plain mapping (a file's row read back, a display dict): what writers and tables take
Cells = Union[Record, Mapping[str, Any]]


def col(meaning: str, *, required: bool = False) -> Any:
    """A record field (the declaration of a column): UNSET until a writer sets it; its type is the field's
    annotation, `required` says every record has it."""
    return field(default=UNSET, metadata={"meaning": meaning, "required": required})


_R = TypeVar("_R", bound=Record)


@dataclass_transform(eq_default=False)      # `col` is no field specifier to a checker: every field has a default
def record(cls: type[_R]) -> type[_R]:
    """Make a Record subclass declared with `col` fields a record: a dataclass (eq and repr are Record's) whose
    COLUMNS are its fields in declared order, each column typed after its annotation. The order reads as the class
    statement does: the columns of its bases in the order the bases are listed (a shared column group is a base),
    then its own; a field it declares again (another meaning) keeps its base's place."""
    cls = dataclass(eq=False, repr=False)(cls)
    made = cls.__dataclass_fields__                      # dataclasses' order: the bases right to left, then its own
    order = list(dict.fromkeys([c.name for base in cls.__bases__ for c in getattr(base, "COLUMNS", ())] + list(made)))
    cls.__dataclass_fields__ = {name: made[name] for name in order}
    hints = get_type_hints(cls)
    columns = []
    for f in dataclasses.fields(cls):
        kind = _COLUMN_TYPES.get(hints[f.name])
        if kind is None or f.default is not UNSET:
            raise SchemaError(f"{cls.__name__}.{f.name}: declare it `NAME: TYPE = col(...)`, TYPE one of "
                              "str | None, int | None, float | None, bool | None, list[float] | None, Any")
        column = Col(f.name, kind, f.metadata["meaning"], f.metadata["required"])
        f.metadata = MappingProxyType({**f.metadata, "col": column})
        columns.append(column)
        setattr(cls, f.name, None)          # an unset field reads None (the instance holds only the set ones)
    cls.COLUMNS = tuple(columns)
    cls._NAMES = frozenset(c.name for c in columns)
    return cls


def plain(record: Cells) -> dict[str, Any]:
    """A record's cells (or a mapping's items) as a plain dict."""
    return record.cells() if isinstance(record, Record) else dict(record)
