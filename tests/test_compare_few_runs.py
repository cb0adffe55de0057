"""`lnbench compare` on results with too few runs for any test: no SLOWER / FASTER, the gate never fails."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lnbench.abi.command import abi_compare_command
from lnbench.compare.cases import TimedCase
from lnbench.compare.command import compare_command
from lnbench.abi.stats import smallest_p
from lnbench.compare.verdict import SLOWER, TOO_FEW, Settings, compare_case
from lnbench.perf.command import perf_command

ENV = {"OMP_NUM_THREADS": "1"}
KEY = ("torch", "bwd", "bf16", "8x64", "hot")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    """A real perf payload of P = 1 worker × R = 2 runs per case (torch fwd/bwd × 2 shapes, hot)."""
    out = tmp_path_factory.mktemp("few")
    result = CliRunner().invoke(perf_command, [
        "--device", "cpu", "--backend", "torch", "--op", "fwd,bwd", "--mode", "hot", "--shapes", "2x64,3x257",
        "-P", "1", "-R", "2", "--warmup-s", "0", "--min-warmup-calls", "2", "--target-run-s", "0.002",
        "--min-iters", "3", "-q", "--json", str(out / "q.json")], env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return json.loads((out / "q.json").read_text())


def _with_runs(payload: dict, runs: list[float]) -> dict:
    """The payload with every timed case's runs set to `runs` (its worker and aggregate medians to match)."""
    out = json.loads(json.dumps(payload))
    for row in out["rows"]:
        if row["status"] == "ok":
            row["median_us"] = statistics.median(runs)
            if row["row_kind"] == "worker":
                row["run_us"] = json.dumps(runs)
    return out


def _compare(base: dict, new: dict, tmp_path: Path, *extra: str):
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "new.json").write_text(json.dumps(new))
    result = CliRunner().invoke(compare_command, [str(tmp_path / "base.json"), str(tmp_path / "new.json"),
                                                  "--json", str(tmp_path / "c.json"), "--csv", str(tmp_path / "c.csv"),
                                                  *extra])
    rows = json.loads((tmp_path / "c.json").read_text())["rows"] if (tmp_path / "c.json").exists() else []
    return result, rows


@pytest.mark.parametrize("new_runs", [[120.0, 121.0], [80.0, 81.0]])
def test_two_runs_against_two_never_fail_the_gate(two_runs, tmp_path, new_runs):
    # 20 % apart, every new run beyond every base run: a narrow interval, but p = 0.33 at best with 2 vs 2
    result, rows = _compare(_with_runs(two_runs, [100.0, 101.0]), _with_runs(two_runs, new_runs), tmp_path,
                            "--fail-if-slower", "5")
    assert result.exit_code == 0, result.output
    assert len(rows) == 4 and {r["verdict"] for r in rows} == {TOO_FEW}
    for row in rows:
        assert row["mw_p"] == pytest.approx(1 / 3) and abs(row["change_pct"]) > 15
        assert row["detail"].startswith("2 vs 2 runs: p ≥ 0.33")
    warnings = [line for line in result.output.splitlines() if line.startswith("lnbench: warning:")]
    assert len(warnings) == 1 and "4 case(s) have too few runs" in warnings[0] and "(-R, -P)" in warnings[0]
    assert "4 cases compared: 0 SLOWER, 0 FASTER, 0 SAME, 4 with too few runs" in result.output
    assert "% slower" not in result.output


def test_the_md_summary_shows_the_reason(two_runs, tmp_path):
    md = tmp_path / "s.md"
    result, _ = _compare(_with_runs(two_runs, [100.0, 101.0]), _with_runs(two_runs, [120.0, 121.0]), tmp_path,
                         "--fail-if-slower", "5", "--md", str(md))
    assert result.exit_code == 0, result.output
    text = md.read_text()
    assert "--fail-if-slower 5: passed" in text and "### Changed" not in text
    assert "| too few runs: 2 vs 2 runs: p ≥ 0.33" in text


def test_abi_compare_results_with_two_runs_have_too_few(tmp_path):
    result = CliRunner().invoke(abi_compare_command, [
        "--pair", "torch-entry", "--runtime-only", "--in-process", "--device", "cpu", "--shapes", "8x64",
        "--op", "fwd", "--metric", "direct", "-P", "1", "-R", "2", "--warmup-s", "0", "--min-warmup-calls", "2",
        "--target-run-s", "0.0005", "--min-iters", "3", "--max-iters", "20", "-q",
        "--csv", str(tmp_path / "a.csv"), "--json", str(tmp_path / "a.json")], env=ENV)
    assert result.exit_code == 0, result.output
    abi = json.loads((tmp_path / "a.json").read_text())
    result, rows = _compare(abi, abi, tmp_path, "--fail-if-slower", "5")
    assert result.exit_code == 0, result.output
    assert len(rows) == 2 and {r["verdict"] for r in rows} == {TOO_FEW}
    assert "2 case(s) have too few runs" in result.output


def _case(values: np.ndarray) -> TimedCase:
    runs = {w: [float(v) for v in row] for w, row in enumerate(values)}
    return TimedCase(KEY, "ok", float(np.median([np.median(r) for r in runs.values()])), runs)


def test_the_sample_size_rule_counts_the_pooled_runs_of_the_paired_workers():
    assert smallest_p(2, 2) == pytest.approx(1 / 3) and smallest_p(3, 3) == pytest.approx(0.1)
    assert smallest_p(4, 4) == pytest.approx(2 / 70) and smallest_p(1, 1) == 1.0
    base = np.array([[100.0, 101.0, 102.0, 103.0]])
    settings = Settings(threshold_pct=3.0)
    assert compare_case(_case(base[:, :3]), _case(base[:, :3] * 1.2), settings)["verdict"] == TOO_FEW   # p ≥ 0.1
    assert compare_case(_case(base), _case(base * 1.2), settings)["verdict"] == SLOWER                  # 4 vs 4
    two_workers = np.array([[100.0, 101.0], [102.0, 103.0]])                 # 2 workers × 2 runs: 4 vs 4 pooled
    assert compare_case(_case(two_workers), _case(two_workers * 1.2), settings)["verdict"] == SLOWER
    strict = Settings(threshold_pct=3.0, confidence=0.99)                   # 4 vs 4: p ≥ 0.029 > 0.01
    row = compare_case(_case(base), _case(base * 1.2), strict)
    assert row["verdict"] == TOO_FEW and row["detail"] == "4 vs 4 runs: p ≥ 0.029, so no difference is significant at 99%"
