"""verify edges. A pass bar of zero (a config with k = atol = fp32_ulps = 0): every error fails, and the table
and the plot say so (err/allowed = inf, 0 where the error is 0) instead of leaving the cells blank. The null
device, which executes nothing, is refused."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from cli_helpers import error_line
from lnbench.results import VerifyRow, load_result
from lnbench.plot.verify import verify_figures
from lnbench.verify.command import verify_command
from lnbench.verify.tables import bar_used

STRICT = """[verify.tolerance]
k = 0.0
fp32_ulps = 0.0
[verify.tolerance.atol.bf16]
y = 0.0
mean = 0.0
rstd = 0.0
dx = 0.0
dweight = 0.0
dbias = 0.0
"""


def test_bar_used_with_a_zero_bar():
    assert bar_used(VerifyRow(max_abs_err=0.5, allowed=0.0)) == math.inf
    assert bar_used(VerifyRow(max_abs_err=0.0, allowed=0.0)) == 0.0
    assert bar_used(VerifyRow(max_abs_err=0.5, allowed=2.0)) == 0.25
    assert bar_used(VerifyRow(max_abs_err=None, allowed=0.0)) is None
    assert bar_used(VerifyRow(allowed=0.0)) is None
    assert bar_used(VerifyRow(max_abs_err=float("nan"), allowed=1.0)) is None


def test_a_strict_verify_fails_shows_inf_and_plots(tmp_path: Path):
    config = tmp_path / "strict.toml"
    config.write_text(STRICT)
    out = tmp_path / "s.json"
    result = CliRunner().invoke(verify_command, ["--device", "cpu", "--backend", "torch", "--dtype", "bf16",
                                                 "--shapes", "2x8", "--config", str(config), "--json", str(out),
                                                 "--csv", str(tmp_path / "s.csv")])
    assert result.exit_code == 1, result.output
    assert "inf" in result.output
    rows = json.loads(out.read_text())["data"]
    assert rows and all(r["status"] == "FAIL" for r in rows if r["max_abs_err"] and r["max_abs_err"] > 0)
    figures = verify_figures(load_result(out))
    assert len(figures) == 1
    texts = [t.get_text() for t in figures[0][1].axes[0].texts]
    assert "inf" in texts and all(t == "inf" or float(t) == 0.0 for t in texts)
    assert np.isfinite(figures[0][1].axes[0].images[0].norm.vmax)


def test_verify_refuses_the_null_device_in_one_line():
    error_line(CliRunner().invoke(verify_command, ["--device", "null", "--shapes", "2x8"]),
               "null device null:gfx942 executes nothing")


def test_names_are_case_insensitive_and_cpu_takes_no_index():
    from lnbench import validate
    from lnbench.run.device import parse_device
    from lnbench.errors import LnbenchUsageError

    assert validate.arches("GFX942,gfx950") == ["gfx942", "gfx950"]
    assert parse_device("EMU").name == parse_device("emu").name
    assert parse_device(" Emu:GFX950 ").name == "emu:gfx950"
    assert parse_device("CPU").name == "cpu" and parse_device("cpu:0").name in ("cpu", "cpu:0")
    import pytest
    with pytest.raises(LnbenchUsageError, match="the CPU is one device"):
        parse_device("cpu:3")
