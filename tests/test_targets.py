"""The Instinct targets of [targets.*]: packaged published figures, a user's additions and overrides, and the
one-line refusals of a bad figure, an unknown key or an unknown target."""
import subprocess
import sys

import pytest

from lnbench import settings as cfg
from lnbench.errors import LnbenchUsageError
from lnbench.modelled.targets import all_targets, targets_for


def test_packaged_targets_are_the_four_instinct_gpus_by_arch():
    config = cfg.load_config()
    assert [t.name for t in targets_for(config, "gfx942")] == ["MI300X", "MI325X"]
    assert [t.name for t in targets_for(config, "gfx950")] == ["MI350X", "MI355X"]
    mi300x = all_targets(config)["MI300X"]
    assert (mi300x.cus, mi300x.clock_mhz, mi300x.hbm_gbps, mi300x.lds_kib) == (304, 2100.0, 5300.0, 64.0)
    assert all_targets(config)["MI325X"].llc_gbps is None          # not published: left out, not guessed
    assert all_targets(config)["MI355X"].launch_us is None


def test_a_user_overrides_a_figure_and_adds_a_target(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("[targets.MI300X]\nhbm_gbps = 4300\n\n[targets.MI325X]\nllc_gbps = 17200.0\n\n"
                    "[targets.lab]\narch = 'gfx950'\ncus = 8\nclock_mhz = 1000\nhbm_gbps = 100\nlds_kib = 64\n"
                    "simds = 4\nwave_slots = 8\nvgprs = 512\nsgprs = 800\nissue_salu = 1\n")
    known = all_targets(cfg.load_config(path))
    assert known["MI300X"].hbm_gbps == 4300.0 and known["MI300X"].cus == 304
    assert known["MI325X"].llc_gbps == 17200.0
    assert known["lab"].issue == {"salu": 1.0}
    assert [t.name for t in targets_for(cfg.load_config(path), "gfx950")] == ["MI350X", "MI355X", "lab"]


@pytest.mark.parametrize("text, message", [
    ("[targets.MI300X]\nhbm_gbps = 0\n", r"\[targets.MI300X\] hbm_gbps must be a positive number, got 0"),
    ("[targets.MI300X]\ncus = -4\n", r"cus must be a positive integer, got -4"),
    ("[targets.MI300X]\ncus = 30.5\n", r"cus must be a positive integer"),
    ("[targets.MI300X]\nclock_mhz = 'fast'\n", r"clock_mhz must be a positive number, got 'fast'"),
    ("[targets.MI300X]\nhbm_gbs = 5\n", r"unknown key 'hbm_gbs'"),
    ("[targets.new]\narch = 'gfx942'\ncus = 4\n", r"\[targets.new\] lacks required figure\(s\): clock_mhz"),
    ("[targets.new]\narch = 'gfx90a'\n", r"arch must be one of gfx942, gfx950"),
])
def test_a_bad_target_table_is_refused_naming_it(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(LnbenchUsageError, match=message):
        cfg.load_config(path)


def test_unknown_or_foreign_target_names_are_usage_errors():
    config = cfg.load_config()
    with pytest.raises(LnbenchUsageError, match="unknown target 'MI250X'"):
        targets_for(config, "gfx942", ["MI250X"])
    with pytest.raises(LnbenchUsageError, match="target MI355X is gfx950"):
        targets_for(config, "gfx942", ["MI355X"])


def test_a_bad_figure_stops_the_cli_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[targets.MI355X]\nhbm_gbps = -1\n")
    done = subprocess.run([sys.executable, "-m", "lnbench.cli", "config", "show", "--config", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "hbm_gbps must be a positive number" in done.stderr and "Traceback" not in done.stderr
