"""The timing protocol shared by `perf` and `abi-compare`: how many processes, runs, iterations, and how long
to warm up. `perf` extends it with its own modes, ops and cold-mode settings (lnbench.perf.protocol)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, ClassVar, Self, TypeVar

import click

from lnbench.errors import LnbenchUsageError
from lnbench.settings import packaged_table
from lnbench.validate import FLOAT, INT, number as check_number

#: the packaged defaults the fields below take (a protocol built without a config)
_PERF, _ABI = packaged_table("perf"), packaged_table("abi_compare")

P = TypeVar("P", bound="Protocol")


@dataclass(frozen=True)
class Protocol:
    """The timing knobs of a run. Build with `Protocol(...)` or `from_table`, then call `validate()`.

    processes (P) independent workers each run every case: a warm-up of at least `warmup_s` seconds and
    `min_warmup_calls` calls, then `runs` (R) timed runs of I back-to-back calls, I chosen so a run
    lasts about `target_run_s`, clamped to [min_iters, max_iters] (min_iters only while a run stays within
    `max_run_s`). With `kernel_timer` each worker then gives
    every case R more, profiled runs of the same I calls for kernel time (after all its stream-timed runs).
    """

    #: the numeric settings `validate` bounds (lnbench.validate.LIMITS), in the order they are checked
    NUMBERS: ClassVar[tuple[str, ...]] = ("processes", "runs", "warmup_s", "min_warmup_calls", "target_run_s",
                                          "max_run_s", "min_iters", "max_iters", "worker_timeout_s")
    #: settings held as tuples (a config may give one string)
    LISTS: ClassVar[tuple[str, ...]] = ()
    #: the settings `timing.measure` takes, by the same names
    TIMING: ClassVar[tuple[str, ...]] = ("runs", "warmup_s", "min_warmup_calls", "target_run_s", "min_iters",
                                         "max_iters", "max_run_s")

    # The defaults are the packaged config's [perf] values (declared once, in configs/default.toml): what a
    # protocol built without a config (a worker spec's missing key, a test) holds. Commands build theirs from
    # their own table (from_table: [perf], [abi_compare]).
    processes: int = _PERF["processes"]
    runs: int = _PERF["runs"]
    warmup_s: float = _PERF["warmup_s"]
    min_warmup_calls: int = _PERF["min_warmup_calls"]
    target_run_s: float = _PERF["target_run_s"]
    min_iters: int = _PERF["min_iters"]
    max_iters: int = _PERF["max_iters"]
    #: min_iters gives way before a run would last longer than this (slow calls: fewer, never < 1)
    max_run_s: float = _PERF["max_run_s"]
    worker_timeout_s: float = _PERF["worker_timeout_s"]
    #: after the stream-timed runs, R profiled runs per case for kernel time (GPU only; lnbench.measure.kernel_timer);
    #: on unless a table turns it off (the packaged [abi_compare] keeps it on, [perf] turns it off)
    kernel_timer: bool = _ABI["kernel_timer"]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def validate(self) -> Self:
        """Raise LnbenchUsageError (one line, exit 2) on malformed values; return self."""
        labels = {"processes": "processes (-P)", "runs": "runs (-R)"}
        for name in self.NUMBERS:
            check_number(getattr(self, name), name, labels.get(name, name))   # finite, within validate.LIMITS
        if self.min_iters > self.max_iters:
            raise LnbenchUsageError(f"min_iters ({self.min_iters}) is larger than max_iters ({self.max_iters})")
        if not isinstance(self.kernel_timer, bool):
            raise LnbenchUsageError(f"kernel_timer must be true or false, got {self.kernel_timer!r}")
        self.validate_own()
        return self

    def validate_own(self) -> None:
        """A subclass's checks of its own settings, after the shared ones."""

    @classmethod
    def from_table(cls, table: dict[str, Any], **overrides: Any) -> Self:
        """Protocol from a config table, CLI overrides (None = keep) applied, validated."""
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name == "extra":
                continue
            if name in table:
                values[name] = table[name]
        for name, value in overrides.items():
            if value is not None:
                values[name] = value
        for name in cls.LISTS:
            if name in values:
                value = values[name]
                values[name] = tuple([value] if isinstance(value, str) else value)
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise LnbenchUsageError(f"unknown protocol setting(s): {', '.join(sorted(unknown))}")
        return cls(**values).validate()

    def with_(self, **changes: Any) -> Self:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra", None)
        for name in self.LISTS:
            out[name] = list(getattr(self, name))
        return out

    @classmethod
    def from_dict(cls: type[P], values: dict[str, Any]) -> P:
        """The inverse of `to_dict` (a worker's spec): names it does not declare are left out, lists become
        tuples, settings not given keep their defaults. Not validated: the parent did that."""
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__ and k != "extra"}
        for name in cls.LISTS:
            if name in known:
                known[name] = tuple(known[name])
        return cls(**known)

    def timing_kwargs(self) -> dict[str, Any]:
        """The keyword arguments `timing.measure` takes."""
        return {name: getattr(self, name) for name in self.TIMING}


@dataclass(frozen=True)
class TimingOptions:
    """The protocol flags perf and abi-compare share (protocol_options declares them), as given (None: the config's
    value applies); PerfOptions and AbiOptions extend it."""

    processes: int | None = None
    runs: int | None = None
    warmup_s: float | None = None
    min_warmup_calls: int | None = None
    target_run_s: float | None = None
    min_iters: int | None = None
    max_iters: int | None = None
    worker_timeout_s: float | None = None


def protocol_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The protocol flags shared by `perf` and `abi-compare` (None = the config's value)."""
    options = [
        click.option("-P", "--processes", type=INT, help="Independent worker processes (P)."),
        click.option("-R", "--runs", type=INT, help="Timed runs per case in each worker (R)."),
        click.option("--warmup-s", type=FLOAT, help="Minimum warm-up seconds per case in each worker."),
        click.option("--min-warmup-calls", type=INT, help="Minimum warm-up calls per case in each worker."),
        click.option("--target-run-s", type=FLOAT, help="Target seconds per run (sets I)."),
        click.option("--min-iters", type=INT, help="Lower clamp of I (calls per run)."),
        click.option("--max-iters", type=INT, help="Upper clamp of I."),
        click.option("--worker-timeout-s", type=FLOAT, help="Kill a worker that runs longer than this."),
    ]
    for option in reversed(options):
        func = option(func)
    return func
