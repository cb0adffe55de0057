import pytest
import torch

from lnbench import settings as cfg
from lnbench.errors import LnbenchUsageError
from cli_helpers import invoke


@pytest.mark.parametrize("text", ["4096x", "0x128", "-1x5", "abc", "4096x4096x2", "x5", "3x0", ""])
def test_malformed_shapes_are_usage_errors(text):
    with pytest.raises(LnbenchUsageError):
        cfg.parse_shape(text)


def test_shape_lists_and_dtype_aliases():
    assert cfg.parse_shapes(["4096x4096,3x257", "1X1"]) == [(4096, 4096), (3, 257), (1, 1)]
    assert cfg.parse_dtypes(["bf16,fp32", "half", "bfloat16"]) == ["bf16", "f32", "f16"]
    with pytest.raises(LnbenchUsageError, match="unknown dtype"):
        cfg.parse_dtypes(["f8"])
    assert cfg.dtype_name(torch.bfloat16) == "bf16"


def test_default_config_loads_and_has_verify_tables():
    config = cfg.load_config()
    assert cfg.shape_set(config, "verify")
    assert cfg.section(config, "verify")["eps"][0] > 0


def test_bad_config_files(tmp_path):
    with pytest.raises(LnbenchUsageError, match="not found"):
        cfg.load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[verify\nk = ")
    with pytest.raises(LnbenchUsageError, match="malformed"):
        cfg.load_config(bad)



def test_a_missing_config_from_the_environment_names_the_variable(tmp_path, monkeypatch):
    """An exported $LNBENCH_CONFIG is easy to forget: its errors say where the file name came from."""
    monkeypatch.setenv("LNBENCH_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(LnbenchUsageError, match=r"not found: .*gone\.toml \(from \$LNBENCH_CONFIG\)"):
        cfg.load_config()
    with pytest.raises(LnbenchUsageError) as given:          # --config names its own file: no variable
        cfg.load_config(tmp_path / "other.toml")
    assert "LNBENCH_CONFIG" not in str(given.value)


# ---- `config show` refuses what the commands refuse (issue 33 item 7) ------------------------------------------

BAD_VALUES = [
    ('[verify]\ndtypes = ["fp8"]\n', "verify", "config [verify] dtypes: unknown dtype 'fp8'"),
    ('[verify.shape_sets]\ndefault = ["0x5"]\n', "verify", "config [verify.shape_sets] default: malformed shape '0x5'"),
    ('[verify]\nshape_set = "nope"\n', "verify", "config [verify] has no shape set 'nope'"),
    ('[verify]\neps = [1e-5, 1e-5]\n', "verify", "config [verify] eps repeats 1e-05"),
    ('[perf]\nmodes = ["hott"]\n', "perf", "config [perf] modes: unknown mode 'hott'"),
    ('[perf]\nif_loaded = "maybe"\n', "perf", "config [perf] if_loaded must be one of warn, refuse"),
    ('[perf.shape_sets]\nquick = ["4096x"]\n', "perf", "config [perf.shape_sets] quick: malformed shape '4096x'"),
    ('[abi_compare]\nmetrics = ["wall"]\n', "abi-compare", "config [abi_compare] metrics: unknown metric 'wall'"),
    ('[abi_compare]\nshapes = []\n', "abi-compare", "config [abi_compare] shapes: empty shape list"),
]
COMMAND_ARGS = {"verify": ["--backend", "torch", "--device", "cpu", "--shape-set", "quick", "-q"],
                "perf": ["--backend", "torch", "--device", "cpu", "--shape-set", "quick", "-q"],
                "abi-compare": ["--pair", "torch-entry", "--device", "cpu", "-q"]}


@pytest.mark.parametrize("text,command,message", BAD_VALUES)
def test_config_show_refuses_what_the_command_refuses_naming_file_and_key(tmp_path, monkeypatch, text, command,
                                                                         message):
    """`config show` accepted dtypes = ["fp8"] and a shape 0x5 with exit 0, and verify then refused them without
    naming the file or the key: both now say the same one line, file and key in it, exit 2."""
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    lines = {}
    for args in (["config", "show", "--config", str(bad)], [command, "--config", str(bad), *COMMAND_ARGS[command]]):
        result = invoke(*args)
        out = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(out) == 1, result.output
        lines[args[0]] = out[0]
    assert lines["config"] == lines[command] == f"lnbench: error: {bad}: {message}" + lines["config"].split(message, 1)[1]
    assert not list(tmp_path.glob("results*")) and not list(tmp_path.rglob("*.csv"))


def test_config_show_of_a_bad_config_from_the_environment_in_a_real_process(tmp_path):
    import os
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text('[verify]\ndtypes = ["fp8"]\n')
    done = subprocess.run([sys.executable, "-m", "lnbench.cli", "config", "show"], capture_output=True, text=True,
                          env={**os.environ, "LNBENCH_CONFIG": str(bad)}, timeout=120)
    assert done.returncode == 2 and not done.stdout, done
    assert done.stderr.strip().splitlines() == [
        f"lnbench: error: {bad} (from $LNBENCH_CONFIG): config [verify] dtypes: unknown dtype 'fp8'; choose from "
        "f32, f16, bf16"], done.stderr


def test_the_dtype_tables_made_on_first_use_are_torchs() -> None:
    """lnbench.constants makes DTYPES on first use (so history and store never import torch); ELEM_BYTES is
    written out and must agree with torch."""
    import torch

    from lnbench import constants

    assert constants.DTYPES == {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    assert constants.DTYPE_NAMES == {v: k for k, v in constants.DTYPES.items()}
    assert constants.ELEM_BYTES == {k: v.itemsize for k, v in constants.DTYPES.items()}
    assert tuple(constants.DTYPES) == constants.DTYPE_CHOICES
