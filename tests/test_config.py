import pytest
import torch

from lnbench import settings as cfg
from lnbench.errors import LnbenchUsageError


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
