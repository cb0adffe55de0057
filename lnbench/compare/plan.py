"""The plan of one `lnbench compare`: options and config checked once, both results loaded and matched."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench.version import __version__
from lnbench import validate
from lnbench.compare.cases import timed_cases
from lnbench.compare.match import mismatches, require_overlap, same_command
from lnbench.results import ABI_KIND as ABI, PERF_KIND as PERF, load_result
from lnbench.compare.verdict import Settings
from lnbench.errors import LnbenchUsageError
from lnbench.machine.checkout import git_commit, timestamp
from lnbench.machine.checkout import command_line
from lnbench.cli_common import SharedOptions, reserve_flydsl_file
from lnbench.results.flydsl_table import check_label
from lnbench.scaffold.setup import Outputs, begin
from lnbench.results import COMPARE, CompareRun


@dataclass
class ComparePlan:
    """Everything `compare` needs after its checks: the loaded results, their cases, the settings, outputs."""
    base: Any
    new: Any
    base_cases: Any
    new_cases: Any
    settings: Settings
    fail_pct: float | None
    problems: list[str]
    outputs: Outputs
    flydsl_file: Path | None = None     # --flydsl-table FILE (None: the log only, or not asked)


@dataclass(frozen=True)
class CompareOptions(SharedOptions):
    """`lnbench compare`'s options as given (None: the config's value applies): the shared ones
    (cli_common.SharedOptions: --config, --force, the outputs) and its own; --quiet is the run's."""

    base: Path | None = None
    new: Path | None = None
    threshold_pct: float | None = None
    fail_pct: float | None = None
    flydsl_table: Path | None = None    # --flydsl-table [FILE]: cli_common.FLYDSL_LOG_ONLY for the bare flag
    flydsl_label: str = "main"

def check_flags(threshold_pct: float | None, fail_pct: float | None, flydsl_label: str = "main") -> None:
    """--threshold and --fail-if-slower as numbers in range, --flydsl-label a label FlyDSL's parser reads (a usage
    error naming the flag)."""
    check_label(flydsl_label)
    if threshold_pct is not None:
        validate.number(threshold_pct, "threshold_pct", "--threshold")
    if fail_pct is not None:
        validate.number(fail_pct, "fail_if_slower", "--fail-if-slower")


def build_plan(o: CompareOptions) -> ComparePlan:
    """Load and match BASE and NEW (exit 2 when they are not comparable), reserve outputs. The flags are checked
    once, by the command, before it chooses the modelled or the timed path (check_flags)."""
    base, new, threshold_pct, fail_pct = o.base, o.new, o.threshold_pct, o.fail_pct
    if base is None or new is None:
        raise LnbenchUsageError("compare needs two result files: lnbench compare BASE NEW")
    setup = begin("compare", o.config_path)
    settings = Settings.from_config(setup.config, threshold_pct)
    what = "the JSON of lnbench perf or abi-compare"
    base_result = load_result(base, (PERF, ABI), what=what)
    new_result = load_result(new, (PERF, ABI), what=what)
    same_command(base_result, new_result)
    base_cases, new_cases = timed_cases(base_result), timed_cases(new_result)
    problems = mismatches(base_result, new_result, base_cases, new_cases)
    problems += [f"{result.path} holds an incomplete run ({result.incomplete}): only its finished cases"
                 for result in (base_result, new_result) if result.incomplete]
    if problems and not o.force:
        raise LnbenchUsageError(f"BASE and NEW are not comparable: {'; '.join(problems)} (--force compares anyway)")
    require_overlap(base_cases, new_cases, base_result, new_result)
    if o.flydsl_table is not None and base_result.kind != PERF:
        raise LnbenchUsageError(f"--flydsl-table compares perf results; {base} and {new} are {base_result.kind} results")
    inputs = {"BASE": base, "NEW": new}
    outputs = setup.reserve_outputs(o.csv_path, o.json_path, o.md_path, inputs, config_last=True)
    flydsl_file = reserve_flydsl_file(o.flydsl_table, {"--csv": o.csv_path, "--json": o.json_path, "--md": o.md_path},
                                      {**inputs, **setup.inputs})
    return ComparePlan(base_result, new_result, base_cases, new_cases, settings, fail_pct, problems, outputs,
                       flydsl_file)


def context(plan: ComparePlan) -> CompareRun:
    """The comparison's run record (CSV columns, JSON metadata, Markdown header): both runs' identities and the
    statistics' settings."""
    base, new, settings = plan.base, plan.new, plan.settings
    run = COMPARE.run(command="compare", source_command=base.kind, command_line=command_line(),
                      lnbench_version=__version__, git_commit=git_commit(), timestamp=timestamp(),
                      base=str(base.path), new=str(new.path))
    b, n = base.run, new.run
    run.set(base_device=b.device_name or b.device or None, base_commit=b.commit,
            base_timestamp=b.timestamp or "", base_lnbench_version=b.lnbench_version or "",
            new_device=n.device_name or n.device or None, new_commit=n.commit,
            new_timestamp=n.timestamp or "", new_lnbench_version=n.lnbench_version or "")
    run.set(threshold_pct=settings.threshold_pct, confidence=settings.confidence,
            run_noise_pct=settings.run_noise_pct, peer_controls=settings.peer_controls,
            interval="paired t over worker medians + run noise floor (Welch-Satterthwaite)"
                        + (", the floor raised to the peers' session shift" if settings.peer_controls else ""),
            fail_if_slower_pct=plan.fail_pct,
            forced="; ".join(plan.problems))
    return run
