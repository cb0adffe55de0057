"""`lnbench compare` on results with too few runs for any test: no SLOWER / FASTER, the gate never fails."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import ONE_THREAD as ENV, timing
from lnbench.abi.command import abi_compare_command
from lnbench.compare.cases import TimedCase
from lnbench.compare.command import compare_command
from lnbench.measure.stats import t_quantile
from lnbench.compare.verdict import Settings, compare_case
from lnbench.perf.command import perf_command
from lnbench.results.verdicts import Verdict

SAME, SLOWER, TOO_FEW = Verdict.SAME, Verdict.SLOWER, Verdict.TOO_FEW

KEY = ("torch", "bwd", "bf16", "8x64", "hot")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    """A real perf payload of P = 1 worker × R = 2 runs per case (torch fwd/bwd × 2 shapes, hot)."""
    out = tmp_path_factory.mktemp("few")
    result = CliRunner().invoke(perf_command, [
        "--device", "cpu", "--backend", "torch", "--op", "fwd,bwd", "--mode", "hot", "--shapes", "2x64,3x257",
        "-P", "1", *timing(runs=2, target_run_s=0.002, max_iters=None), "-q", "--json", str(out / "q.json")],
        env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return json.loads((out / "q.json").read_text())


def _with_runs(payload: dict, runs: list[float]) -> dict:
    """The payload with every timed case's runs set to `runs` (its worker and aggregate medians to match)."""
    out = json.loads(json.dumps(payload))
    for row in out["data"]:
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
    rows = json.loads((tmp_path / "c.json").read_text())["data"] if (tmp_path / "c.json").exists() else []
    return result, rows


@pytest.mark.parametrize("new_runs", [[120.0, 121.0], [80.0, 81.0]])
def test_one_worker_against_one_never_fails_the_gate(two_runs, tmp_path, new_runs):
    # 20 % apart, every new run beyond every base run, but one worker process per side: no spread between
    # processes to judge by, so no verdict (runs inside one process are not independent samples)
    result, rows = _compare(_with_runs(two_runs, [100.0, 101.0]), _with_runs(two_runs, new_runs), tmp_path,
                            "--fail-if-slower", "5")
    assert result.exit_code == 0, result.output
    assert len(rows) == 4 and {r["verdict"] for r in rows} == {TOO_FEW}
    for row in rows:
        assert row["p"] is None and row["ci_low"] is None and abs(row["change_pct"]) > 15
        assert row["detail"].startswith("1 paired worker: no spread between worker processes")
    warnings = [line for line in result.output.splitlines() if line.startswith("lnbench: warning:") and "busy machine" not in line]
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
    assert "| too few runs: 1 paired worker: no spread" in text


def test_abi_compare_results_with_two_runs_have_too_few(tmp_path):
    result = CliRunner().invoke(abi_compare_command, [
        "--pair", "torch-entry", "--runtime-only", "--in-process", "--device", "cpu", "--shapes", "8x64",
        "--op", "fwd", "--metric", "direct", "-P", "1", *timing(runs=2), "-q",
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


def test_the_sample_size_rule_counts_paired_workers_not_runs():
    settings = Settings(threshold_pct=3.0)
    one_worker = np.array([[100.0, 101.0, 102.0, 103.0, 104.0, 105.0]])          # many runs, one process
    assert compare_case(_case(one_worker), _case(one_worker * 1.2), settings).verdict == TOO_FEW
    two_workers = np.array([[100.0, 101.0], [103.0, 104.0]])                    # 2 processes: a verdict
    assert compare_case(_case(two_workers), _case(two_workers * 1.2), settings).verdict == SLOWER


def test_the_interval_is_a_paired_t_over_worker_medians():
    base = np.array([[100.0, 90.0, 110.0], [104.0, 94.0, 114.0], [98.0, 88.0, 108.0]])   # medians 100, 104, 98
    shifts = np.array([1.10, 1.02, 1.06])
    row = compare_case(_case(base), _case(base * shifts[:, None]), Settings(threshold_pct=3.0))
    d = np.log(shifts)
    half = t_quantile(0.95, 2) * d.std(ddof=1) / np.sqrt(3)                # t(0.975, 2 df) = 4.303
    assert t_quantile(0.95, 2) == pytest.approx(4.3027, abs=1e-4)
    center = np.log(row.ratio)                                           # around the headline ratio
    assert row.ci_low == pytest.approx(np.exp(center - half)) and row.ci_high == pytest.approx(np.exp(center + half))
    assert row.verdict == SAME and row.ci_low < 1 < row.ci_high        # 2-10 % apart across processes
    steady = compare_case(_case(base), _case(base * 1.06), Settings(threshold_pct=3.0))
    assert steady.verdict == SLOWER and steady.ci_low == pytest.approx(1.06) and steady.p < 1e-6


def test_runs_inside_a_worker_do_not_narrow_the_interval():
    # a worker-level shift the runs cannot see: run-level resampling called this significant; workers do not
    rng = np.random.default_rng(5)
    offsets = np.exp(rng.normal(0, 0.05, size=(2, 3, 1)))              # per-process level, 5 % spread
    base, new = (100 * offsets[i] * (1 + rng.normal(0, 0.001, size=(3, 15))) for i in range(2))
    row = compare_case(_case(base), _case(new), Settings(threshold_pct=0.0))
    width = row.ci_high / row.ci_low
    assert width > 1.05, row                                             # the interval holds the process spread
