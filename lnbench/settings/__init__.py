"""Configuration: the packaged defaults (lnbench/configs/default.toml), a user file merged over them, CLI
overrides, and parsing of shapes and dtypes."""
from __future__ import annotations

import copy
import functools
import importlib.resources
import math
import os
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from lnbench import constants, validate
from lnbench.settings.backend_table import check_source_table
from lnbench.constants import ABI_METRICS, DTYPE_ALIASES, DTYPE_CHOICES, KERNEL_OPS, LOAD_POLICIES, OPS, PERF_MODES, STRATEGIES
from lnbench.errors import LnbenchUsageError
from lnbench.modelled.targets import all_targets
from lnbench.validate import listed, split_list  # noqa: F401 - re-exported: one list rule everywhere

if TYPE_CHECKING:
    import torch

#: MxN with ASCII digits only (int() would also read other scripts' digits, e.g. '٤x٨' as 4x8)
_SHAPE = re.compile(r"[ \t]*([0-9]+)[ \t]*[xX][ \t]*([0-9]+)[ \t]*")
#: largest M or N (far beyond any memory; a bound keeps absurd digit strings out of int())
MAX_DIM = 2 ** 40

#: the defaults, shipped inside the package; a --config file or $LNBENCH_CONFIG is merged over them
DEFAULT_CONFIG = importlib.resources.files("lnbench") / "configs" / "default.toml"
#: keys a config may set that the defaults leave out: table -> {key: type}
OPTIONAL_KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {"abi_compare": {"check_elements": int}}
#: tables whose keys are names the user chooses (each value a list of MxN strings)
FREE_TABLES = ("shape_sets",)
#: (table, key) -> the names its items may take, and whether the command reads them in any case (FWD as fwd)
NAMED_LISTS: dict[tuple[str, str], tuple[tuple[str, ...], bool]] = {
    ("perf", "ops"): (OPS, False), ("perf", "modes"): (PERF_MODES, False),
    ("abi_compare", "ops"): (KERNEL_OPS, True), ("abi_compare", "metrics"): (ABI_METRICS, True)}
#: (table, key) -> the values a single name may take
NAMED_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("perf", "if_loaded"): LOAD_POLICIES, ("abi_compare", "dgamma_strategy"): STRATEGIES}


def dtype_name(dtype: torch.dtype) -> str:
    """torch dtype -> canonical short name (f32, f16, bf16)."""
    for name, value in constants.DTYPES.items():
        if value == dtype:
            return name
    raise LnbenchUsageError(f"unsupported dtype {dtype}; lnbench handles {', '.join(DTYPE_CHOICES)}")


def parse_dtypes(values: Iterable[str] | str | None, default: Iterable[str] | None = None) -> list[str]:
    """Dtype names (repeatable / comma lists, aliases allowed; else `default`, the config's list) -> canonical
    names, order kept, no repeats. An empty list is a usage error."""
    out: list[str] = []
    for item in listed(values, "dtype", default):
        canonical = DTYPE_ALIASES.get(item.lower())
        if canonical is None:
            raise LnbenchUsageError(f"unknown dtype {item!r}; choose from {', '.join(DTYPE_CHOICES)}")
        if canonical not in out:
            out.append(canonical)
    return out


def parse_shape(text: str) -> tuple[int, int]:
    """'4096x4096' -> (4096, 4096); M and N must be integers in 1..2**40 written in ASCII digits."""
    match = _SHAPE.fullmatch(text)
    if not match:
        raise LnbenchUsageError(f"malformed shape {text!r}: expected MxN with positive integers, e.g. 4096x4096")
    digits = [group.lstrip("0") or "0" for group in match.groups()]
    if any(len(d) > len(str(MAX_DIM)) or int(d) > MAX_DIM for d in digits):    # never int() of a huge string
        raise LnbenchUsageError(f"malformed shape {text!r}: M and N must be at most 2**40")
    m, n = (int(d) for d in digits)
    if m < 1 or n < 1:
        raise LnbenchUsageError(f"malformed shape {text!r}: M and N must be at least 1")
    return m, n


def parse_shapes(values: Iterable[str] | str | None) -> list[tuple[int, int]]:
    """A list of MxN shapes (comma-separated and/or repeated); a repeated shape is kept once (a case is keyed
    by its shape). An empty list is a usage error."""
    items = split_list(values, "shape")
    if values is not None and not items:
        raise LnbenchUsageError("empty shape list: expected MxN, e.g. 4096x4096,3x257")
    return list(dict.fromkeys(parse_shape(item) for item in items))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _check_finite(value: Any, table: str, key: str) -> None:
    """TOML has inf and nan; no lnbench setting means them (atol = inf would pass every check)."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, float) and not math.isfinite(item):
            raise LnbenchUsageError(f"config {table} {key!r} must be a finite number, got {value!r}")


def merge_config(defaults: dict[str, Any], user: dict[str, Any], where: str = "") -> dict[str, Any]:
    """`user` deep-merged over `defaults` (tables merge key by key, other values replace). A key the defaults
    do not have is an error naming it and its table; so is a value of another kind than the default's (a list
    where a number is expected, or a number where a list is expected), and a number that is inf or nan."""
    out = copy.deepcopy(defaults)
    for key, value in user.items():
        table = f"[{where}]" if where else "(top level)"
        name = f"{where}.{key}" if where else key
        _check_finite(value, table, key)
        if where == "targets" or where.startswith("targets."):   # checked whole by modelled.targets
            out[key] = merge_config(defaults[key], value, name) if isinstance(defaults.get(key), dict) \
                and isinstance(value, dict) else value
            continue
        if key not in defaults:
            optional = OPTIONAL_KEYS.get(where, {})
            if where.rsplit(".", 1)[-1] in FREE_TABLES:
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise LnbenchUsageError(f"config {table} {key!r} must be a list of MxN strings, got {value!r}")
            elif where == "backends":             # [backends.NAME]: a kernel source a team names
                check_source_table(key, value)
            elif key in optional:
                if isinstance(value, bool) or not isinstance(value, optional[key]):
                    raise LnbenchUsageError(f"config {table} {key!r} must be {_kind(0)}, got {value!r}")
            else:
                known = sorted(set(defaults) | set(optional))
                raise LnbenchUsageError(f"config {table}: unknown key {key!r}; known keys: {', '.join(known)}")
            out[key] = value
            continue
        default = defaults[key]
        if isinstance(default, dict):
            if not isinstance(value, dict):
                raise LnbenchUsageError(f"config [{name}] must be a table, got {value!r}")
            out[key] = merge_config(default, value, name)
            continue
        if _kind(value) != _kind(default):
            raise LnbenchUsageError(f"config {table} {key!r} must be {_kind(default)}, got {value!r}")
        out[key] = value
    return out


def check_eps_values(eps_values: list[float]) -> None:
    """`[verify] eps` needs at least one value, all different (a repeat would give an eps2 case testing nothing)."""
    if not eps_values:
        raise LnbenchUsageError("config [verify] eps must be a non-empty list of positive numbers")
    repeated = sorted({e for e in eps_values if eps_values.count(e) > 1})
    if repeated:
        raise LnbenchUsageError(f"config [verify] eps repeats {', '.join(f'{e:g}' for e in repeated)}: "
                                f"each further eps gets its own eps2 case, so the values must differ")


def _names(values: list[str], allowed: tuple[str, ...], any_case: bool, what: str) -> None:
    items = validate.listed(values, what)
    for item in items:
        if (item.lower() if any_case else item) not in allowed:
            raise LnbenchUsageError(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")


def _keyed(table: str, key: str, check: Callable[[], Any]) -> None:
    """Run `check`; its usage error is said again with the table and key it is about in front."""
    try:
        check()
    except LnbenchUsageError as exc:
        text = str(exc)
        raise LnbenchUsageError(text if text.startswith(f"config [{table}]") else f"config [{table}] {key}: {text}") \
            from None


def check_values(config: dict[str, Any]) -> None:
    """The config's names and shapes, checked as the commands read them (dtypes, every shape set, the chosen set,
    [verify] eps, ops, modes, metrics, policies), so `config show` refuses what a command would refuse. The
    numbers are validate.config_numbers'. Which backends exist depends on the run (--kernel-src, plugins): the
    commands check those."""
    for table in ("verify", "perf", "abi_compare"):
        tab = config.get(table) or {}
        if "dtypes" in tab:
            _keyed(table, "dtypes", lambda: parse_dtypes(tab["dtypes"]))
        for name, values in (tab.get("shape_sets") or {}).items():
            _keyed(f"{table}.shape_sets", _key_name(name), lambda: parse_shapes(values))
        if "shape_set" in tab and "shape_sets" in tab:
            _keyed(table, "shape_set", lambda: shape_set(config, table))
    _keyed("abi_compare", "shapes", lambda: parse_shapes(config["abi_compare"]["shapes"]))
    _keyed("verify", "eps", lambda: check_eps_values(list(config["verify"]["eps"])))
    for (table, key), (allowed, any_case) in NAMED_LISTS.items():
        _keyed(table, key, lambda: _names(config[table][key], allowed, any_case, key.removesuffix("s")))
    for (table, key), allowed in NAMED_VALUES.items():
        value = config[table][key]
        if value not in allowed:
            raise LnbenchUsageError(f"config [{table}] {key} must be one of {', '.join(allowed)}, got {value!r}")


def _key_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else repr(name)


def default_config() -> dict[str, Any]:
    """The packaged defaults."""
    return tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))


def config_file(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The user file load_config(path) reads: `path`, else $LNBENCH_CONFIG, else None (the defaults only)."""
    named = path or os.environ.get("LNBENCH_CONFIG")
    return Path(named) if named else None


@functools.cache
def _packaged() -> dict[str, Any]:
    return tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))


def packaged_table(name: str) -> dict[str, Any]:
    """A table of the packaged defaults as shipped (no user file): where code needs a default the config
    declares (a protocol built without a config), so it is declared once, in configs/default.toml."""
    return copy.deepcopy(_packaged()[name])


def load_config(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The packaged defaults, with `path` (else $LNBENCH_CONFIG, if set) merged over them.

    A named file that is missing, unreadable or malformed, or that sets an unknown key or a value of the wrong
    kind, is a usage error.
    """
    defaults = default_config()
    chosen = config_file(path)
    if chosen is None:
        return defaults
    named = f"{chosen}" if path else f"{chosen} (from $LNBENCH_CONFIG)"     # an exported variable is easy to forget
    try:
        with open(chosen, "rb") as handle:
            user = tomllib.load(handle)
    except FileNotFoundError:
        raise LnbenchUsageError(f"config file not found: {named}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LnbenchUsageError(f"cannot read config {named}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LnbenchUsageError(f"malformed config {named}: {exc}") from None
    try:
        merged = merge_config(defaults, user)
        validate.config_numbers(merged)
        check_values(merged)
        all_targets(merged)                    # an unknown key or a bad figure in [targets.*]: refused here, once
    except LnbenchUsageError as exc:             # every message names the file it is about
        raise LnbenchUsageError(f"{named}: {exc}") from None
    return merged


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



def option_or_config(value: Any, table: dict[str, Any], key: str, label: str, kind: type | tuple[type, ...],
                     where: str, check: Callable[[Any, str], Any] | None = None) -> Any:
    """A command-line option's value when given, else the config table's `key` (type-checked); `check(value,
    source)` then validates it, its message naming the option (`label`) or the config key it came from."""
    if value is None:
        value, label = require(table, key, kind, where), f"config [{where}] {key}"
    return check(value, label) if check is not None else value

def chosen_shapes(config: dict[str, Any], table: str, shapes: Any, name: str | None) -> list[tuple[int, int]]:
    """--shapes, or else the shape set --shape-set names (or the table's default set); both at once is an error."""
    if shapes and name is not None:
        raise LnbenchUsageError("--shapes and --shape-set both given: choose one")
    return parse_shapes(shapes) if shapes else shape_set(config, table, name)


def shape_set(config: dict[str, Any], table: str, name: str | None = None) -> list[tuple[int, int]]:
    """The named shape set of a command's table (its `shape_set` key when name is None)."""
    tab = section(config, table)
    sets = require(tab, "shape_sets", dict, table)
    chosen = name if name is not None else require(tab, "shape_set", str, table)
    if chosen not in sets:
        raise LnbenchUsageError(f"config [{table}] has no shape set {chosen!r}; known: {', '.join(sets)}")
    return parse_shapes(sets[chosen])

