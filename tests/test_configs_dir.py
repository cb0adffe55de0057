"""The top-level configs/ a team starts from: each loads through lnbench's own loader, sets what its name
promises, and `lnbench config show --config` accepts it. They are repo files, not package data."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from lnbench import settings as cfg
from lnbench import validate
from lnbench.flydsl import preflight
from cli_helpers import invoke

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
NAMES = [path.name for path in CONFIGS]
MIB_MI3XX = 256 + 8 * 4          # Infinity Cache + 8 XCDs × 4 MiB L2


def test_the_configs_a_team_starts_from_are_there():
    assert {"ci.toml", "sweep.toml", "mi300x.toml", "mi355x.toml"} <= set(NAMES)
    assert set(NAMES) == {p.name for p in (ROOT / "configs").iterdir()}     # nothing but TOML files in there


@pytest.mark.parametrize("path", CONFIGS, ids=NAMES)
def test_each_config_loads_and_config_show_accepts_it(path):
    merged = cfg.load_config(path)                        # unknown keys / wrong kinds would raise here
    assert merged != cfg.default_config()                 # it changes something
    for table in ("verify", "perf"):                      # its shape sets parse and name a real set
        assert cfg.shape_set(merged, table)
        for shapes in merged[table]["shape_sets"].values():
            assert cfg.parse_shapes(shapes)
    preflight.kernel_widths({n for _, n in cfg.shape_set(merged, "verify")}, merged["verify"]["dtypes"])
    preflight.kernel_widths({n for _, n in cfg.shape_set(merged, "perf")}, merged["perf"]["dtypes"])
    result = invoke("config", "show", "--config", str(path))
    assert result.exit_code == 0, result.output
    assert f"packaged defaults + {path}" in result.output or path.name in result.output


def test_ci_runs_the_emulated_matrix_and_abi_compare_fast():
    merged = cfg.load_config(ROOT / "configs" / "ci.toml")
    verify = merged["verify"]
    assert verify["dtypes"] == ["f32", "f16", "bf16"]
    shapes = cfg.shape_set(merged, "verify")
    widths = {n for _, n in shapes}
    assert 1 in widths and any(n % 2 for n in widths if n > 1)          # N = 1 and an odd (ragged) width
    assert any(n % 8 and n % 2 == 0 for n in widths)                     # even but off the 16-byte vector
    assert any(n % 8 == 0 and n >= 256 for n in widths)                  # vector-friendly widths
    assert 1 in {m for m, _ in shapes}
    default = cfg.shape_set(cfg.default_config(), "verify")
    assert sum(m * n for m, n in shapes) * 8 < sum(m * n for m, n in default)   # far below the default set
    abi = merged["abi_compare"]
    assert abi["pair"] == "flydsl" and "device" not in abi["metrics"] and not abi["kernel_timer"]


def test_sweep_times_the_sweep_set_with_torch_liger_auto_cold_hot_fwd_bwd():
    merged = cfg.load_config(ROOT / "configs" / "sweep.toml")
    perf = merged["perf"]
    assert perf["shape_set"] == "sweep" and cfg.shape_set(merged, "perf") == cfg.shape_set(cfg.default_config(),
                                                                                           "perf", "sweep")
    assert set(perf["backends"]) == {"torch", "liger", "auto"}
    assert set(perf["modes"]) == {"cold", "hot"} and set(perf["ops"]) == {"fwd", "bwd"}


@pytest.mark.parametrize("name", ["mi300x.toml", "mi355x.toml"])
def test_mi3xx_sets_its_cache_size_and_model_hidden_sizes(name):
    path = ROOT / "configs" / name
    merged = cfg.load_config(path)
    assert merged["perf"]["llc_mib"] == MIB_MI3XX
    assert "Infinity Cache" in path.read_text() and "source:" in path.read_text()     # the figure says where from
    widths = {n for _, n in cfg.shape_set(merged, "perf")}
    assert {4096, 8192, 16384} <= widths                                  # Llama-class hidden sizes


def test_packaging_does_not_need_configs_dir():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["lnbench*"]      # configs/ is no package
    assert all(not item.startswith("../") for item in setuptools["package-data"]["lnbench"])
    assert Path(str(cfg.DEFAULT_CONFIG)).parent.parent.name == "lnbench"   # the defaults ship inside the package
