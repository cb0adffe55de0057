"""`lnbench perf --device emu`: profiles and modelled floors per launch × target × mode (the `profile` kind),
deterministic; `lnbench compare` on two of them is an exact diff whose --fail-if-slower gate catches a planted
heavier kernel and names what grew; a modelled file is never compared with a measured one unless --force."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("tinygrad")

from lnbench import backends  # noqa: E402
from lnbench.cli import main  # noqa: E402
from lnbench.results import load_result  # noqa: E402
from cli_helpers import invoke

SOURCES = Path(__file__).parent / "kernel_sources"
IDENTITY = {"timestamp", "command_line", "wall_s", "git_commit", "estimate_s", "estimate_range", "actual_s"}  # per run


@pytest.fixture(autouse=True)
def clean_sources(monkeypatch):
    monkeypatch.delenv(backends.KERNEL_SRC_ENV, raising=False)
    monkeypatch.delenv(backends.SOURCES_ENV, raising=False)
    monkeypatch.setattr(backends, "_sources", {})


def perf(tmp_path: Path, name: str, *extra: str):
    out = tmp_path / f"{name}.json"
    result = invoke("perf", "--device", "emu", "--shapes", "8x256", "--op", "fwd", "--no-csv",
                    "--json", str(out), *extra)
    return result, out


def compare(*args: str):
    return invoke("compare", *map(str, args), "--no-csv")


def verdicts(path: Path) -> dict[str, int]:
    """How many cases of a compare JSON got each verdict."""
    return load_result(path).rows["verdict"].value_counts().to_dict()


def source_config(tmp_path: Path, module: str) -> Path:
    path = tmp_path / f"{module}.toml"
    path.write_text(f"[backends.mine]\nmodule = 'lnbench_test_sources.{module}'\npath = '{SOURCES}'\n")
    return path


def test_two_emulated_perf_runs_are_identical_and_compare_all_same(tmp_path):
    first, a = perf(tmp_path, "a")
    assert first.exit_code == 0, first.output
    assert "MODELLED lower bounds" in first.output
    second, b = perf(tmp_path, "b")
    assert second.exit_code == 0, second.output
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da["data"] == db["data"]
    assert {k: v for k, v in da["metadata"].items() if k not in IDENTITY} == \
        {k: v for k, v in db["metadata"].items() if k not in IDENTITY}
    rows = pd.DataFrame(da["data"])
    assert da["metadata"]["schema"].startswith("profile/") and da["metadata"]["modelled"] is True
    assert rows["modelled"].all() and set(rows["target"]) == {"MI300X", "MI325X"}
    assert set(rows["mode"]) == {"cold", "hot"} and (rows["bound_us"] > 0).all()
    assert (rows["bound_us"] >= rows["memory_us"].fillna(0)).all()
    done = compare(a, b, "--fail-if-slower", "5", "--json", tmp_path / "c.json")
    assert done.exit_code == 0, done.output
    assert verdicts(tmp_path / "c.json") == {"SAME": 4}
    drawn = invoke("plot", str(a), "--out", str(tmp_path / "png"))
    assert drawn.exit_code == 0, drawn.output
    assert {p.name for p in (tmp_path / "png").glob("*.png")} == {
        f"a-{kind}-{t}.png" for kind in ("roofline", "bound") for t in ("MI300X", "MI325X")}


def test_a_planted_heavier_kernel_fails_the_gate_naming_what_grew(tmp_path):
    light, a = perf(tmp_path, "light", "--backend", "mine", "--config", str(source_config(tmp_path, "pointer_ln")))
    assert light.exit_code == 0, light.output
    heavy, b = perf(tmp_path, "heavy", "--backend", "mine", "--config", str(source_config(tmp_path, "heavy_ln")))
    assert heavy.exit_code == 0, heavy.output
    done = compare(a, b, "--fail-if-slower", "5", "--json", tmp_path / "c.json")
    assert done.exit_code == 1, done.output
    assert "--fail-if-slower 5" in done.output and "grew: " in done.output and "exec_valu" in done.output
    assert verdicts(tmp_path / "c.json").get("SLOWER", 0) > 0
    assert compare(a, a, "--fail-if-slower", "5").exit_code == 0


def test_modelled_against_measured_is_refused_unless_forced(tmp_path):
    ok, modelled = perf(tmp_path, "m")
    assert ok.exit_code == 0, ok.output
    measured = tmp_path / "measured.json"
    timed = invoke("perf", "--device", "cpu", "--backend", "torch", "--shapes", "8x256", "--op",
                   "fwd", "--mode", "hot", "-P", "1", "-R", "2", "--min-iters", "5",
                   "--max-iters", "5", "--warmup-s", "0", "--min-warmup-calls", "1", "--no-csv",
                   "--json", str(measured), "-q")
    assert timed.exit_code == 0, timed.output
    refused = compare(modelled, measured)
    assert refused.exit_code == 2 and "never mixed" in refused.output and "Traceback" not in refused.output
    assert compare(measured, modelled).exit_code == 2
    forced = compare(modelled, measured, "--force")
    assert forced.exit_code == 0, forced.output
    # the measured rows as FlyDSL's (the CPU cannot time it): a real CPU time lies above every floor of a GPU
    # target; planted far faster than any floor, it lies below
    payload = json.loads(measured.read_text())
    for row in payload["data"]:
        row["backend"] = "flydsl"

    def words(planted_us: float | None = None) -> set[str]:
        if planted_us is not None:
            for row in payload["data"]:
                row["median_us"] = planted_us
        (tmp_path / "as-flydsl.json").write_text(json.dumps(payload))
        forced = compare(modelled, tmp_path / "as-flydsl.json", "--force", "--json", tmp_path / "forced.json")
        assert forced.exit_code == 0, forced.output
        return {row["verdict"] for row in json.loads((tmp_path / "forced.json").read_text())["data"]}
    assert words() == {"floor ≤ measured"} and words(1e-6) == {"FLOOR ABOVE MEASURED"}    # lnbench.results.verdicts' words
    bad_gate = compare(modelled, modelled, "--fail-if-slower", "-3")
    assert bad_gate.exit_code == 2 and "--fail-if-slower" in bad_gate.output


@pytest.mark.parametrize("args, message", [
    (["--backend", "torch"], "does not run on the emulated device"),
    (["--mode", "wall"], "models the modes cold, hot"),
])
def test_bad_emulated_perf_options_stop_before_any_work(tmp_path, args, message):
    result, out = perf(tmp_path, "bad", *args)
    assert result.exit_code == 2 and message in result.output and not out.exists()


def test_an_unknown_or_bad_target_figure_stops_emulated_perf(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[targets.MI300X]\nclock_mhz = 0\n")
    result, out = perf(tmp_path, "bad", "--config", str(bad))
    assert result.exit_code == 2 and "clock_mhz must be a positive number" in result.output and not out.exists()


def test_modelled_runs_of_different_shapes_merge_and_compare_exactly(tmp_path):
    first, a = perf(tmp_path, "a")
    second, b = invoke("perf", "--device", "emu", "--shapes", "4x1024", "--op", "fwd", "--no-csv",
                       "--json", str(tmp_path / "b.json")), tmp_path / "b.json"
    assert first.exit_code == 0 and second.exit_code == 0, second.output
    merged = tmp_path / "m.json"
    done = invoke("merge", str(a), str(b), "--json", str(merged), "--no-csv")
    assert done.exit_code == 0, done.output
    assert json.loads(merged.read_text())["metadata"]["schema"].startswith("profile/")
    diff = compare(merged, b, "--json", tmp_path / "c.json")
    assert diff.exit_code == 0, diff.output
    assert verdicts(tmp_path / "c.json") == {"only in base": 4, "SAME": 4}


def test_emulated_perf_where_the_emulator_cannot_run_is_one_line(tmp_path, monkeypatch):
    from lnbench.perf import modelled
    monkeypatch.setattr(modelled, "emulator_status", lambda: (False, "tinygrad is not installed"))
    result, out = perf(tmp_path, "none")
    assert result.exit_code == 2 and "cannot run here: tinygrad is not installed" in result.output
    assert not out.exists()
