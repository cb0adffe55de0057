"""The options of `lnbench perf` as one typed record (its click options, built once by keyword from perf_command's
typed parameters); both of its plans read it: the timed one (perf.plan) and the modelled one (perf.modelled,
`--device emu`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lnbench.cli_common import SharedOptions
from lnbench.measure.protocol import TimingOptions


@dataclass(frozen=True)
class PerfOptions(SharedOptions, TimingOptions):
    """`lnbench perf`'s options as given (None or empty: left out, the config's value applies): the shared ones
    (cli_common.SharedOptions, measure.protocol.TimingOptions) and perf's own; --if-loaded, --quiet and
    --flydsl-table are the run's, not the plan's."""

    backends: tuple[str, ...] = ()
    baseline: str | None = None
    ops: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    cold_factor: float | None = None
    llc_mib: float | None = None
    headline: str = "stream"
    kernel_timer: bool | None = None
    eps: float | None = None
    alone_below_mib: float | None = None
    peak_file: Path | None = None
