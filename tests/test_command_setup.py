"""The command scaffold (issue 39 item 2): each run command's options record holds exactly the click options its
plan takes, and scaffold.setup's steps keep their messages, order and inputs."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from lnbench.abi.command import abi_compare_command
from lnbench.abi.plan import AbiOptions
from lnbench.cli_common import SharedOptions
from lnbench.compare.command import compare_command
from lnbench.compare.plan import CompareOptions
from lnbench.errors import LnbenchUsageError
from lnbench.inspect.command import InspectOptions, inspect_command
from lnbench.measure.protocol import TimingOptions
from lnbench.perf.command import peak_command, perf_command
from lnbench.perf.peak_run import PeakOptions
from lnbench.perf.options import PerfOptions
from lnbench.scaffold.setup import Setup, begin, element_bytes
from lnbench.verify.command import verify_command
from lnbench.verify.plan import VerifyOptions

#: record, its click command, and the options the run (not the plan) takes
RECORDS = [(PerfOptions, perf_command, {"if_loaded", "quiet", "flydsl_table"}),
           (AbiOptions, abi_compare_command, {"details", "quiet"}),
           (VerifyOptions, verify_command, {"details", "quiet"}),
           (InspectOptions, inspect_command, {"quiet"}), (CompareOptions, compare_command, {"quiet"}),
           (PeakOptions, peak_command, set())]


def _names(record) -> set[str]:
    return {f.name for f in dataclasses.fields(record)}


@pytest.mark.parametrize("record, command, run_only", RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_options_record_is_its_commands_options(record, command, run_only) -> None:
    """A click option added to a command without a field (or a field left behind) fails here, not at run time.
    The record's full field set (its own and those it inherits) is the command's plan options plus the shared
    (SharedOptions) options this command does not offer, which it leaves at their defaults; a record that extends
    TimingOptions takes every protocol flag."""
    given = {p.name for p in command.params if p.expose_value} - run_only
    fields = _names(record)
    assert given <= fields, f"click options without a field: {sorted(given - fields)}"
    inherited = set().union(*(_names(base) for base in record.__mro__[1:] if dataclasses.is_dataclass(base)))
    unfilled = fields - given - _names(SharedOptions)
    assert not unfilled, f"fields no option fills: {sorted(unfilled)}"
    assert fields - inherited, "a command's record declares at least one option of its own"
    if issubclass(record, TimingOptions):
        assert _names(TimingOptions) <= given, f"protocol flags missing: {sorted(_names(TimingOptions) - given)}"


@pytest.mark.parametrize("record, command, run_only", RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_records_defaults_are_clicks(record, command, run_only) -> None:
    """The record of a bare command line (as click's keywords build it) is the record's defaults; it is frozen."""
    with command.make_context(command.name, []) as ctx:
        built = record(**{k: v for k, v in ctx.params.items() if k not in run_only})
    assert built == record()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.config_path = Path("x")                                       # type: ignore[misc]


def test_begin_loads_the_config_and_its_section(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("LNBENCH_CONFIG", raising=False)
    setup = begin("perf", None, "perf")
    assert setup.table is setup.config["perf"] and setup.inputs == {"LNBENCH_CONFIG": None}
    assert begin("inspect", None, config_is_input=False).inputs == {}
    with pytest.raises(LnbenchUsageError, match="config file not found: .*missing.toml"):
        begin("perf", tmp_path / "missing.toml", "perf")


def test_a_bad_kernel_src_is_refused_before_any_source_is_registered(tmp_path) -> None:
    with pytest.raises(LnbenchUsageError, match=r"--kernel-src .*nowhere: not a folder"):
        Setup("perf").use_kernel_src(tmp_path / "nowhere")


def test_no_output_overwrites_an_input_config_first_or_last(tmp_path, monkeypatch) -> None:
    """The config (and the command's own inputs) are refused as outputs; compare names BASE before the config."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.toml"
    config.write_text("", encoding="utf-8")
    setup = begin("perf", config, "perf")
    with pytest.raises(LnbenchUsageError, match="--csv"):
        setup.reserve_outputs(config, None)
    both = Setup("compare", config, inputs={"--config": config})
    with pytest.raises(LnbenchUsageError) as first:
        both.reserve_outputs(config, None, inputs={"BASE": config})
    with pytest.raises(LnbenchUsageError) as last:
        both.reserve_outputs(config, None, inputs={"BASE": config}, config_last=True)
    assert "--config" in str(first.value) and "BASE" in str(last.value)


def test_element_bytes_takes_the_widest_dtype() -> None:
    assert element_bytes(8, ["bf16", "f32"]) == 32 and element_bytes(8, ["f16"]) == 16


def test_the_scaffold_imports_no_torch() -> None:
    """compare and merge load a config and reserve outputs through scaffold.setup: that alone imports no torch."""
    import subprocess

    code = "import sys, lnbench.scaffold.setup; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
