import pandas as pd
from click.testing import CliRunner

from lnbench.cli import main


def test_inspect_compiles_both_abis_and_writes_csv(tmp_path):
    out = tmp_path / "i.csv"
    result = CliRunner().invoke(main, ["inspect", "--arch", "gfx950", "--dtype", "bf16", "--shapes", "1x4096",
                                       "--op", "fwd,bwd", "--csv", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    # fwd: one kernel per ABI; bwd (deterministic): main + partial-reduce per ABI
    assert len(frame) == 6 and set(frame["status"]) == {"ok"}
    fwd = frame[frame["op"] == "fwd"].set_index("abi")
    assert fwd.loc["pointer", "kernarg_bytes"] == 6 * 8 + 4      # six pointers + M
    assert fwd.loc["pointer", "kernarg_bytes"] < fwd.loc["tensor", "kernarg_bytes"]
    assert fwd.loc["pointer", "launcher_slots"] < fwd.loc["tensor", "launcher_slots"]
    assert (frame["scratch_bytes"] == 0).all() and bool(fwd["loads_128bit"].all())


def test_inspect_bad_arch_is_usage_error():
    result = CliRunner().invoke(main, ["inspect", "--arch", "gfx1100"])
    assert result.exit_code == 2 and "unknown arch" in result.output and "Traceback" not in result.output
