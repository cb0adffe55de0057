"""Configuration: TOML files under configs/, CLI overrides, and parsing of shapes and dtypes."""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Iterable

import torch

from lnbench.errors import LnbenchUsageError

#: canonical dtype name -> torch dtype
DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
_DTYPE_ALIASES = {
    "f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}
_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")

#: the repository's configs/ folder (an editable install or a checkout); LNBENCH_CONFIG overrides the file
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "default.toml"
RESULTS_DIR = Path(os.environ.get("LNBENCH_RESULTS_DIR", Path.cwd() / "results"))


def dtype_name(dtype: torch.dtype) -> str:
    """torch dtype -> canonical short name (f32, f16, bf16)."""
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    raise LnbenchUsageError(f"unsupported dtype {dtype}; lnbench handles {', '.join(DTYPES)}")


def split_list(values: Iterable[str] | str | None) -> list[str]:
    """Flatten repeatable and comma-separated option values: ("a,b", "c") -> [a, b, c]."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [item.strip() for value in values for item in str(value).split(",") if item.strip()]


def parse_dtypes(values: Iterable[str] | str | None) -> list[str]:
    """Dtype names (repeatable / comma lists, aliases allowed) -> canonical names, order kept, no repeats."""
    out: list[str] = []
    for item in split_list(values):
        canonical = _DTYPE_ALIASES.get(item.lower())
        if canonical is None:
            raise LnbenchUsageError(f"unknown dtype {item!r}; choose from {', '.join(DTYPES)}")
        if canonical not in out:
            out.append(canonical)
    return out


def parse_shape(text: str) -> tuple[int, int]:
    """'4096x4096' -> (4096, 4096); M and N must be positive integers."""
    match = _SHAPE.match(text)
    if not match:
        raise LnbenchUsageError(f"malformed shape {text!r}: expected MxN with positive integers, e.g. 4096x4096")
    m, n = int(match.group(1)), int(match.group(2))
    if m < 1 or n < 1:
        raise LnbenchUsageError(f"malformed shape {text!r}: M and N must be at least 1")
    return m, n


def parse_shapes(values: Iterable[str] | str | None) -> list[tuple[int, int]]:
    """A list of MxN shapes (comma-separated and/or repeated)."""
    items = split_list(values)
    if values is not None and not items:
        raise LnbenchUsageError("empty shape list: expected MxN, e.g. 4096x4096,3x257")
    return [parse_shape(item) for item in items]


def load_config(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Read the TOML config (`path`, else $LNBENCH_CONFIG, else configs/default.toml).

    A named file that is missing, unreadable or malformed is a usage error.
    """
    chosen = Path(path or os.environ.get("LNBENCH_CONFIG") or DEFAULT_CONFIG)
    try:
        with open(chosen, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise LnbenchUsageError(f"config file not found: {chosen}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LnbenchUsageError(f"cannot read config {chosen}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LnbenchUsageError(f"malformed config {chosen}: {exc}") from None


def section(config: dict[str, Any], name: str) -> dict[str, Any]:
    """A required top-level table of the config, as a dict."""
    value = config.get(name)
    if not isinstance(value, dict):
        raise LnbenchUsageError(f"config has no [{name}] table")
    return value


def require(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """A required key of a config table with a type check (bool is not accepted as a number)."""
    if key not in table:
        raise LnbenchUsageError(f"config [{where}] is missing {key!r}")
    value = table[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise LnbenchUsageError(f"config [{where}] {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise LnbenchUsageError(f"config [{where}] {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def shape_set(config: dict[str, Any], table: str, name: str | None = None) -> list[tuple[int, int]]:
    """The named shape set of a command's table (its `shape_set` key when name is None)."""
    tab = section(config, table)
    sets = require(tab, "shape_sets", dict, table)
    chosen = name or require(tab, "shape_set", str, table)
    if chosen not in sets:
        raise LnbenchUsageError(f"config [{table}] has no shape set {chosen!r}; known: {', '.join(sets)}")
    return parse_shapes(sets[chosen])

