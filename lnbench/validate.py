"""One validation layer for every command's input: numbers (finite, within the sane ranges of `LIMITS`), list
options (never empty), eps, seeds, arches, kernel widths and strategies, output paths, the environment (terminal
width, toolkit folder), and whether a shape's tensors fit in the device's memory (estimated before anything is
allocated). Each check raises LnbenchUsageError with a one-line message (exit 2)."""
from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import click

from lnbench.constants import ARCHES, STRATEGIES
from lnbench.errors import LnbenchUsageError

#: seeds go to torch.manual_seed / numpy default_rng, with small offsets added per case
SEED_MAX = 2**63 - 1


def split_list(values: Iterable[str] | str | None, what: str = "list item") -> list[str]:
    """Flatten repeatable and comma-separated option values: ("a,b", "c") -> [a, b, c].

    No values (an option not given, an empty config list) give []; a value that is blank (`--dtype ''`) or a
    blank item inside one (`64x256,`, `a,,b`) is a usage error.
    """
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        text = str(value)
        if not text.strip():
            raise LnbenchUsageError(f"empty {what} list {text!r}: give at least one {what}")
        items = [item.strip() for item in text.split(",")]
        if any(not item for item in items):
            raise LnbenchUsageError(f"empty item in list {text!r}: remove the extra comma")
        out.extend(items)
    return out


def listed(values: Iterable[str] | str | None, what: str, default: Iterable[str] | str | None = None) -> list[str]:
    """Items of a list option, else of `default` (the config's list); an empty result is a usage error."""
    items = split_list(values, what) or split_list(default, what)
    if not items:
        raise LnbenchUsageError(f"empty {what} list: give at least one {what}")
    return items


def choices(values: Iterable[str] | str | None, allowed: Sequence[str], what: str,
            default: Iterable[str] | None = None) -> list[str]:
    """Items of a list option, each one of `allowed` (order kept, no repeats); `default` (else every allowed
    value) when none given. An empty list is a usage error."""
    items = listed(values, what, allowed if default is None else default)
    if all(a == a.lower() for a in allowed):          # GFX942, Pointer, FWD: as --dtype BF16 already is
        items = [item.lower() for item in items]
    for item in items:
        if item not in allowed:
            raise LnbenchUsageError(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def arches(values: Iterable[str] | str | None, default: Sequence[str] | None = None) -> list[str]:
    """--arch values: gfx942 and/or gfx950 (the same rule for inspect and abi-compare)."""
    return choices(values, ARCHES, "arch", default)


@dataclass(frozen=True)
class Range:
    """The sane range of a number: low..high (an end excluded where marked open), integers only if `integer`."""

    low: float
    high: float
    integer: bool = False
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        if self.integer:
            return f"an integer in {self.low:g}..{self.high:g}"
        low = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        high = f"< {self.high:g}" if self.high_open else f"<= {self.high:g}"
        return f"a finite number {low} and {high}"


#: The sane range of every number a command takes (config key and flag alike). The upper bounds keep a typo
#: from running for days or out of memory: P worker processes <= 64, R runs <= 1000, I calls per run and
#: warm-up calls <= 10**6, warm-up <= 60 s, a run <= 10 s, a worker <= 1 day.
LIMITS: dict[str, Range] = {
    # timing protocol of perf and abi-compare (lnbench.measure.protocol)
    "processes": Range(1, 64, integer=True),
    "runs": Range(1, 1000, integer=True),
    "min_iters": Range(1, 1_000_000, integer=True),
    "max_iters": Range(1, 1_000_000, integer=True),
    "min_warmup_calls": Range(0, 1_000_000, integer=True),
    "warmup_s": Range(0, 60),
    "target_run_s": Range(0, 10),
    "max_run_s": Range(0, 60, low_open=True),
    "worker_timeout_s": Range(0, 86_400, low_open=True),
    "cold_factor": Range(0, 100, low_open=True),
    "cold_mem_fraction": Range(0, 0.9, low_open=True),
    "llc_mib": Range(0, 1 << 20),
    "alone_below_mib": Range(0, 1 << 30),
    "alone_host_fraction": Range(0, 2, low_open=True),
    # statistics of abi-compare and compare, their gates, the planted-slow pair, the emulated checks
    "bootstrap": Range(100, 100_000, integer=True),
    "confidence": Range(0, 1, low_open=True, high_open=True),
    "threshold_pct": Range(0, 1_000_000),
    "run_noise_pct": Range(0, 100),
    "fail_if_slower": Range(0, 1_000_000),
    "planted_delay_us": Range(0, 1_000_000),
    "check_elements": Range(1, 1 << 24, integer=True),
    # LayerNorm and verify's pass rule
    "eps": Range(0, 1000, low_open=True),
    "k": Range(0, 1000),
    "atol": Range(0, 10),
    "fp32_ulps": Range(0, 1_000_000),
    # verify's worker processes (--jobs)
    "jobs": Range(1, 256, integer=True),
    # lnbench peak
    "peak_runs": Range(1, 1000, integer=True),
    "size_mib": Range(0, 1 << 16, low_open=True),
}


def config_numbers(config: Mapping[str, Any], where: str = "") -> None:
    """Every number of a (merged) config within its sane range, whatever command reads the file: a key named in
    LIMITS (each item of a list such as [verify] eps), every atol of [verify.tolerance.atol.*], and seeds."""
    for key, value in config.items():
        name = f"{where}.{key}" if where else key
        if isinstance(value, Mapping):
            config_numbers(value, name)
            continue
        label = f"config [{where}] {key}"
        for item in value if isinstance(value, list) else [value]:
            if where.startswith("verify.tolerance.atol."):
                number(item, "atol", label)
            elif key in LIMITS:
                number(item, key, label)
            elif key in ("seed", "stats_seed"):
                seed(item, label)


def number(value: Any, key: str, label: str | None = None) -> Any:
    """`value` checked against LIMITS[key]: a number (an integer where the range says so; never a bool, a
    string or a list), finite, inside the range. `label` names it in the message (default: the key)."""
    rng = LIMITS[key]
    kinds = (int,) if rng.integer else (int, float)
    ok = (not isinstance(value, bool) and isinstance(value, kinds)
          and (isinstance(value, int) or math.isfinite(value)) and rng.contains(value))
    if not ok:
        raise LnbenchUsageError(f"{label or key} must be {rng.describe()}, got {value!r}")
    return value


def eps(value: Any, where: str = "eps") -> float:
    """A finite positive number (not a bool, not a list) within LIMITS['eps']."""
    return float(number(value, "eps", where))


def derived_seed(base: int, offset: int) -> int:
    """A case's seed from the base seed: base + offset wrapped into 0 .. 2**63-1, so that every seed a result
    records is itself a valid --seed (a base near the top would otherwise give seeds past it)."""
    return (base + offset) % (SEED_MAX + 1)


def seed(value: Any, where: str = "seed") -> int:
    """An integer in 0 .. 2**63-1 (what numpy and torch.manual_seed both accept; case seeds derived from it
    wrap inside that range, see derived_seed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LnbenchUsageError(f"{where} must be an integer, got {value!r}")
    if not 0 <= value <= SEED_MAX:
        raise LnbenchUsageError(f"{where} must be in 0..2**63-1, got {value}")
    return value


def _mem_available_linux() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes(device: Any) -> int | None:
    """Free memory where `device`'s tensors live: torch.cuda.mem_get_info on a GPU, else MemAvailable of the
    host (the cpu, emulated and null devices keep tensors in host memory); None when unknown."""
    torch_device = getattr(device, "torch_device", device)
    if getattr(torch_device, "type", None) == "cuda":
        import torch
        try:
            return int(torch.cuda.mem_get_info(torch_device)[0])
        except Exception:  # noqa: BLE001 - unknown is fine: no check
            return None
    return _mem_available_linux()


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"  # pragma: no cover


def shapes_fit(shapes: Iterable[tuple[int, int]], bytes_per_element: float, device: Any,
               what: str = "this command", fraction: float = 1.0) -> None:
    """Usage error when a shape's tensors (estimated: M·N × bytes_per_element, plus per-row stats) would not
    fit in the device's free memory. Checked before anything is allocated."""
    free = available_bytes(device)
    if free is None:
        return
    free = int(free * fraction)
    for m, n in shapes:
        need = m * n * bytes_per_element + m * 64
        if need > free:
            raise LnbenchUsageError(
                f"shape {m}x{n} does not fit: {what} needs about {_size(need)}, "
                f"{getattr(device, 'name', device)} has {_size(free)} free")


#: $COLUMNS values used as the terminal width; anything else (empty, not ASCII digits, out of range) is ignored
TERMINAL_WIDTH = Range(20, 10_000, integer=True)


def terminal_width(text: str | None) -> int | None:
    """$COLUMNS as a width when it is ASCII digits within TERMINAL_WIDTH, else None (ignored)."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 6:
        return None
    width = int(text)
    return width if TERMINAL_WIDTH.contains(width) else None


def dgamma_strategy(value: Any, where: str) -> str:
    """A dγ/dβ strategy of the FlyDSL backward (deterministic, atomic)."""
    if value not in STRATEGIES:
        raise LnbenchUsageError(f"{where} must be one of {', '.join(STRATEGIES)}, got {value!r}")
    return str(value)


def _char_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


#: what an output option would take as standard output; lnbench writes files only
STDOUT_DASH = "-"


def not_stdout(option: str, path: Path) -> None:
    """`--csv -` would write a file named `-` in the current folder: refuse it, pointing at /dev/stdout."""
    if str(path) == STDOUT_DASH:
        raise LnbenchUsageError(f"{option} -: writing to standard output is not supported; "
                                f"give a file path (e.g. /dev/stdout)")


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same inode when both exist, else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def not_an_input(option: str, path: Path, inputs: Mapping[str, Path | None]) -> None:
    """An output may not overwrite a file the command reads (`inputs`: a name such as BASE or --config -> its
    path). A character device (/dev/null) is never a file to lose."""
    if _char_device(Path(path)):
        return
    for name, source in inputs.items():
        if source is not None and same_file(Path(path), Path(source)):
            raise LnbenchUsageError(f"{option} {path} is an input of this command ({name}); choose another path")


def distinct_outputs(outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | None] | None = None) -> None:
    """No output option (`--csv`, `--json`, `--md`) is `-` or names one of the command's `inputs`, and no two
    name the same file, directly or through a link: one would overwrite the other. A character device
    (/dev/null) may take several."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        not_stdout(option, path)
        not_an_input(option, path, inputs or {})
        key = os.path.realpath(path)
        if key in seen and not _char_device(Path(path)):
            raise LnbenchUsageError(f"{seen[key]} and {option} name the same file {path}: give each its own")
        seen.setdefault(key, option)


class AsciiNumber(click.ParamType):
    """click's INT or FLOAT for a number option, refusing text that is not ASCII: int() and float() also read
    other scripts' digits ('٣' as 3), which no lnbench input accepts. The value is then checked with `number`."""

    def __init__(self, base: click.ParamType) -> None:
        self.base = base
        self.name = base.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a valid {self.name}: ASCII digits only", param, ctx)
        return self.base.convert(value, param, ctx)


#: option types of every integer and real-number flag
INT, FLOAT = AsciiNumber(click.INT), AsciiNumber(click.FLOAT)
