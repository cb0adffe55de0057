"""abi-compare --device emu[:ARCH]: each ABI's host cost measured on the null device beside its kernels' modelled
device floor on every target of ARCH, and which limits a hot call; every modelled column says so."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from cli_helpers import ABI_TIMING as FAST
from lnbench.abi.command import abi_compare_command
from lnbench.run.device import emulator_status


@pytest.mark.skipif(not emulator_status()[0], reason="the emulated device cannot run here")
def test_host_cost_beside_the_modelled_device_floor_per_target(tmp_path):
    js = tmp_path / "a.json"
    result = CliRunner().invoke(abi_compare_command, [
        "--device", "emu", "--runtime-only", "-P", "1", "--shapes", "8x256", "--op", "fwd", "--metric", "direct",
        *FAST, "--no-csv", "--json", str(js)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "runtime: 1 measured" in result.output          # the modelled rows are not measurements
    payload = json.loads(js.read_text())
    frame = pd.DataFrame(payload["data"])
    modelled = frame[frame["part"] == "modelled"]
    assert list(modelled["target"]) == ["MI300X", "MI325X"] and modelled["modelled"].all()
    assert (modelled["tensor_bound_us"] > 0).all() and (modelled["pointer_bound_us"] > 0).all()
    assert set(modelled["tensor_limit"]) | set(modelled["pointer_limit"]) <= {"host", "device"}
    assert modelled["scope"].str.contains("measured on the null device").all()
    runtime = frame[frame["part"] == "runtime"]
    assert (modelled["tensor_us"].to_numpy() == runtime["tensor_us"].iloc[0]).all()
    assert payload["metadata"]["device"] == "null:gfx942"
    assert payload["metadata"]["modelled_targets"] == ["MI300X", "MI325X"]


def test_an_unknown_target_figure_stops_abi_compare_on_the_emulated_device(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[targets.MI300X]\nsgprs = 0\n")
    result = CliRunner().invoke(abi_compare_command, ["--device", "emu", "--runtime-only", "--config", str(bad),
                                                      "--no-csv"])
    assert result.exit_code == 2 and "sgprs must be a positive integer" in result.output
