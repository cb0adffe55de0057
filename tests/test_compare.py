"""`lnbench compare` on real `lnbench perf` / `abi-compare` results made on the CPU in this module."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import ONE_THREAD as ENV, error_line, timing
from lnbench import settings as cfg
from lnbench.abi.command import abi_compare_command
from lnbench.compare.cases import TimedCase
from lnbench.compare.command import compare_command
from lnbench.compare.planted import main as planted_main, plant_slowdown
from lnbench.compare.verdict import Settings, compare_case
from lnbench.perf.command import perf_command
from lnbench.output.files import write_json
from lnbench.results.verdicts import Verdict

FASTER, SAME, SLOWER = Verdict.FASTER, Verdict.SAME, Verdict.SLOWER

# short protocol: many short runs (R = 15 of ~4 ms) keep the per-worker medians steady on a busy CPU
SHORT = ["--device", "cpu", "--dtype", "bf16", *timing(runs=15, warmup_s=0.01, target_run_s=0.004, max_iters=None),
         "-q"]
KEY = ("torch", "bwd", "bf16", "8x64", "hot")


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory) -> Path:
    """One small real perf run: torch fwd/bwd × 2 shapes, hot; liger (absent here: `not run`); P = 3."""
    out = tmp_path_factory.mktemp("perf")
    result = CliRunner().invoke(perf_command, [*SHORT, "--backend", "torch,liger", "--shapes", "8x64,3x100",
                                               "--op", "fwd,bwd", "--mode", "hot", "-P", "3",
                                               "--csv", str(out / "p.csv"), "--json", str(out / "p.json")],
                                env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return out / "p.json"


@pytest.fixture
def payload(perf_json) -> dict:
    return json.loads(perf_json.read_text())


@pytest.fixture
def planted_case(payload) -> tuple[str, ...]:
    """The torch case whose workers' runs spread least (interquartile range / median): a CPU shared with other
    processes can make one case too noisy for any test to see 10 % in it, and that says nothing about the gate."""
    def spread(key: tuple[str, ...]) -> float:
        runs = [np.array(r["run_us"]) for r in payload["data"] if r["row_kind"] == "worker"
                and (r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]) == key]
        return max(float(np.subtract(*np.percentile(v, [75, 25])) / np.median(v)) for v in runs)
    keys = {(r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]) for r in payload["data"]
            if r["row_kind"] == "aggregate" and r["status"] == "ok"}
    assert len(keys) == 4
    return min(sorted(keys), key=spread)


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _compare(base: Path, new: Path, tmp_path: Path, *extra: str):
    args = [str(base), str(new), "--csv", str(tmp_path / "c.csv"), "--json", str(tmp_path / "c.json"), *extra]
    result = CliRunner().invoke(compare_command, args)
    rows = json.loads((tmp_path / "c.json").read_text())["data"] if (tmp_path / "c.json").exists() else []
    return result, {(r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]): r for r in rows}


# --- the gate ---------------------------------------------------------------------------------------------

def test_planted_10pct_slowdown_fails_the_gate_and_is_named(perf_json, payload, planted_case, tmp_path):
    planted, key = plant_slowdown(payload, 1.10, planted_case)
    assert key == planted_case and planted["metadata"]["planted_slowdown"].endswith("x1.1")
    new = _write(tmp_path, "planted.json", planted)
    md = tmp_path / "summary.md"
    result, rows = _compare(perf_json, new, tmp_path, "--fail-if-slower", "5", "--md", str(md))
    assert result.exit_code == 1, result.output
    name = " ".join(planted_case)
    assert f"--fail-if-slower 5: {name} is 10.0% slower" in result.output
    assert result.output.count("--fail-if-slower 5:") == 1
    hit = rows[planted_case]
    assert hit["verdict"] == SLOWER and hit["ratio"] == pytest.approx(1.10, rel=1e-3)
    assert hit["ci_low"] > 1.0 and hit["ci_low"] <= hit["ratio"] <= hit["ci_high"]
    others = [r for k, r in rows.items() if k != planted_case and r["backend"] == "torch"]
    assert len(others) == 3 and {r["verdict"] for r in others} == {SAME}
    assert all(r["ratio"] == pytest.approx(1.0) for r in others)
    text = md.read_text()
    line = "| " + " | ".join(planted_case) + " |"
    assert "FAILED (1 case(s) slower by more than 5%)" in text and line in text
    assert text.index("### Changed") < text.index(line) < text.index("<details>")


def test_gate_passes_without_a_significant_slowdown(perf_json, payload, planted_case, tmp_path):
    faster = _write(tmp_path, "faster.json", plant_slowdown(payload, 0.90, planted_case)[0])
    result, rows = _compare(perf_json, faster, tmp_path, "--fail-if-slower", "5")
    assert result.exit_code == 0, result.output
    assert rows[planted_case]["verdict"] == FASTER
    assert rows[planted_case]["change_pct"] == pytest.approx(-10, abs=0.1)
    slower = _write(tmp_path, "slower.json", plant_slowdown(payload, 1.10, planted_case)[0])
    result, rows = _compare(perf_json, slower, tmp_path, "--fail-if-slower", "5", "--threshold", "15")
    assert result.exit_code == 0, result.output          # 10 % is under the 15 % threshold: SAME
    assert rows[planted_case]["verdict"] == SAME
    result, rows = _compare(perf_json, slower, tmp_path, "--fail-if-slower", "12")
    assert result.exit_code == 0 and rows[planted_case]["verdict"] == SLOWER, result.output  # slower, by < 12 %


def test_a_case_that_now_errors_fails_the_gate_and_a_dropped_one_does_not(perf_json, payload, tmp_path):
    """Timed in BASE, an error in NEW: a worse regression than any slowdown, which the gate passed ('not
    compared'). A case NEW does not hold (a smaller run) and one neither file timed (liger here) do not fail it."""
    broken = copy.deepcopy(payload)
    for row in broken["data"]:
        if (row["backend"], row["op"], row["dtype"], row["shape"], row["mode"]) == KEY:
            row.update(status="error", detail="RuntimeError: planted", median_us=None, run_us=None)
    broken["data"] = [r for r in broken["data"] if (r["op"], r["shape"]) != ("fwd", "3x100")]
    new = _write(tmp_path, "broken.json", broken)
    result, rows = _compare(perf_json, new, tmp_path)
    assert result.exit_code == 0 and rows[KEY]["verdict"] == "not compared", result.output
    md = tmp_path / "gate.md"
    result, rows = _compare(perf_json, new, tmp_path, "--fail-if-slower", "5", "--md", str(md))
    assert result.exit_code == 1, result.output
    gate_lines = [line for line in result.output.splitlines() if line.startswith("--fail-if-slower 5:")]
    assert gate_lines == [f"--fail-if-slower 5: {' '.join(KEY)} was timed in BASE but not in NEW "
                          f"(new: error: RuntimeError: planted)"], result.output
    assert "FAILED (0 case(s) slower by more than 5%, 1 no longer timed)" in md.read_text()
    assert rows[("torch", "fwd", "bf16", "3x100", "hot")]["verdict"] == "only in base"


def test_cases_in_one_file_only_are_listed(perf_json, payload, tmp_path):
    dropped = copy.deepcopy(payload)
    dropped["data"] = [r for r in dropped["data"] if (r["op"], r["shape"]) != ("fwd", "3x100")]
    new = _write(tmp_path, "dropped.json", dropped)
    result, rows = _compare(perf_json, new, tmp_path)
    assert result.exit_code == 0, result.output
    assert rows[("torch", "fwd", "bf16", "3x100", "hot")]["verdict"] == "only in base"
    assert rows[("liger", "fwd", "bf16", "3x100", "hot")]["verdict"] == "only in base"
    liger = rows[("liger", "bwd", "bf16", "8x64", "hot")]
    from lnbench.backends import probe_backend
    from lnbench.run.device import parse_device

    reason = probe_backend("liger", parse_device("cpu"))[1].reason      # not installed, or needs a GPU
    assert liger["verdict"] == "not compared" and reason in liger["detail"]
    assert "3 cases compared: 0 SLOWER, 0 FASTER, 3 SAME; 2 only in base, 3 not compared" in result.output
    result, rows = _compare(new, perf_json, tmp_path)
    assert rows[("torch", "fwd", "bf16", "3x100", "hot")]["verdict"] == "only in new"


def test_an_ok_case_without_a_time_is_not_compared(perf_json, payload, tmp_path):
    """An aggregate row `ok` whose median is missing (a hand-edited file) holds no time: `not compared`, saying
    why, and a file with no such time at all has no timed case (it was taken as timed, with no runs: exit 0)."""
    for row in payload["data"]:
        if row["row_kind"] == "aggregate" and (row["backend"], row["op"], row["dtype"], row["shape"], row["mode"]) == KEY:
            row["median_us"] = None
    result, rows = _compare(perf_json, _write(tmp_path, "blank.json", payload), tmp_path)
    assert result.exit_code == 0, result.output
    assert rows[KEY]["verdict"] == "not compared" and "new: ok but no positive median_us" in rows[KEY]["detail"]
    for row in payload["data"]:
        if row["row_kind"] == "aggregate":
            row["median_us"] = None
    result, _ = _compare(perf_json, _write(tmp_path, "blank.json", payload), tmp_path)
    error_line(result, "vs no timed case")


def _kernel_headline(payload: dict, slower: float = 1.0) -> dict:
    """The payload as a `perf --timer kernel` result (kernel time = stream time), KEY's kernel time × `slower`."""
    out = copy.deepcopy(payload)
    out["metadata"]["headline"] = "kernel"
    for row in out["data"]:
        row["headline"] = "kernel"
        if row["status"] == "ok":
            factor = slower if (row["backend"], row["op"], row["dtype"], row["shape"], row["mode"]) == KEY else 1.0
            row.update(kernel_status="ok", kernel_us=row["median_us"] * factor,
                       kernel_run_us=[v * factor for v in row["run_us"]])
    return out


def test_a_kernel_headline_compares_kernel_times(perf_json, payload, tmp_path):
    """Under perf --timer kernel the headline is the kernel time, and that is what compare compares (it compared
    the stream time); a stream-timed run and a kernel-timed one are not comparable without --force."""
    base = _write(tmp_path, "kbase.json", _kernel_headline(payload))
    new = _write(tmp_path, "knew.json", _kernel_headline(payload, slower=2.0))
    result, rows = _compare(base, new, tmp_path)
    assert result.exit_code == 0, result.output
    assert rows[KEY]["verdict"] == "SLOWER" and rows[KEY]["ratio"] == pytest.approx(2.0)
    assert all(row["verdict"] == "SAME" for key, row in rows.items() if key != KEY and row["workers"])
    planted, _ = plant_slowdown(_kernel_headline(payload), 2.0, KEY)      # the planted tool slows kernel time too
    result, rows = _compare(base, _write(tmp_path, "kplanted.json", planted), tmp_path)
    assert rows[KEY]["verdict"] == "SLOWER" and rows[KEY]["ratio"] == pytest.approx(2.0)
    result, _ = _compare(perf_json, base, tmp_path)
    error_line(result, "headline differs (stream vs kernel time")


# --- refusals ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, fragment", [
    (lambda d: d["metadata"].update(device_name="NVIDIA H200"), "device differs ('cpu"),
    (lambda d: d["protocol"].update(runs=9), "protocol differs (runs 15 vs 9)"),
    (lambda d: [r.update(dtype="f16") for r in d["data"] if r["shape"] == "8x64"], "dtypes differ (bf16 vs bf16,f16)"),
    (lambda d: d["metadata"].update(torch_threads=d["metadata"]["torch_threads"] + 1), "torch threads differ"),
])
def test_mismatched_runs_are_refused_unless_forced(perf_json, payload, tmp_path, change, fragment):
    change(payload)
    new = _write(tmp_path, "other.json", payload)
    result, _ = _compare(perf_json, new, tmp_path)
    error_line(result, fragment)
    assert "--force" in result.output
    result, rows = _compare(perf_json, new, tmp_path, "--force")
    assert result.exit_code == 0, result.output
    assert "--force:" in result.output and rows


def test_no_overlap_is_refused(perf_json, payload, tmp_path):
    for row in payload["data"]:
        row["shape"] = row["shape"] + "0"
    result, _ = _compare(perf_json, _write(tmp_path, "elsewhere.json", payload), tmp_path)
    error_line(result, "no overlap")


@pytest.mark.parametrize("content, fragment", [
    ("", "is empty"),
    ("hello, world\n", "not an lnbench result"),
    (None, "not valid JSON (truncated?)"),                   # the real file cut in half
    ('{"metadata": {}, "rows": []}', "holds no result rows"),
    ('{"rows": [1, 2]}', "not an lnbench result"),
    ('{"metadata": {"x": 1}, "rows": [{"a": 1}]}', "not a result of lnbench perf"),
    ('[1, 2, 3]', "not an lnbench result"),
])
def test_bad_files_exit_2_with_one_line(perf_json, tmp_path, content, fragment):
    bad = tmp_path / "bad.json"
    text = perf_json.read_text()
    bad.write_text(text[: len(text) // 2] if content is None else content)
    result, _ = _compare(perf_json, bad, tmp_path)
    error_line(result, fragment)


def test_missing_file_directory_and_bad_options(perf_json, tmp_path):
    error_line(CliRunner().invoke(compare_command, [str(perf_json)]), "needs two result files")
    error_line(_compare(perf_json, tmp_path / "nope.json", tmp_path)[0], "no such file")
    error_line(_compare(tmp_path, perf_json, tmp_path)[0], "is a directory")
    error_line(_compare(perf_json, perf_json, tmp_path, "--fail-if-slower", "-1")[0], "--fail-if-slower")
    error_line(_compare(perf_json, perf_json, tmp_path, "--threshold", "nan")[0], "threshold")


def test_results_of_other_commands_are_refused(perf_json, tmp_path):
    verify = {"metadata": {"device_name": "cpu"}, "rows": [
        {"backend": "torch", "case": "randn", "dtype": "bf16", "shape": "8x64", "tensor": "y", "max_abs_err": 0.1,
         "allowed": 0.2, "status": "PASS"}]}
    error_line(_compare(perf_json, _write(tmp_path, "v.json", verify), tmp_path)[0],
                     "is from lnbench verify; this needs the JSON of lnbench perf or abi-compare")


# --- abi-compare results -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def abi_json(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("abi")
    result = CliRunner().invoke(abi_compare_command, [
        "--pair", "torch-entry", "--runtime-only", "--in-process", "--device", "cpu", "--shapes", "8x64,4x128",
        "--op", "fwd", "--metric", "direct", "-P", "2", *timing(), "-q",
        "--csv", str(out / "a.csv"), "--json", str(out / "a.json")], env=ENV)
    assert result.exit_code == 0, result.output
    return out / "a.json"


def test_abi_compare_results_compare_per_side(abi_json, perf_json, tmp_path):
    result, rows = _compare(abi_json, abi_json, tmp_path)
    assert result.exit_code == 0, result.output
    assert set(rows) == {(f"torch-entry:{side}", "fwd", "bf16", shape, "direct")
                         for side in ("tensor", "pointer") for shape in ("8x64", "4x128")}
    assert {r["verdict"] for r in rows.values()} == {SAME} and all(r["workers"] == 2 for r in rows.values())
    error_line(_compare(perf_json, abi_json, tmp_path)[0], "compare needs two results of the same command")


# --- statistics and verdicts, on synthetic run values ----------------------------------------------------------

def _case(values: np.ndarray, workers: list[int] | None = None) -> TimedCase:
    runs = {w: [float(v) for v in row] for w, row in zip(workers or range(len(values)), values)}
    headline = float(np.median([np.median(r) for r in runs.values()]))
    return TimedCase(KEY, "ok", headline, runs)


def test_verdicts_follow_interval_and_threshold():
    rng = np.random.default_rng(3)
    base = 100 + rng.normal(0, 0.5, size=(3, 5))
    settings = Settings(threshold_pct=3.0)
    same = compare_case(_case(base), _case(100 + rng.normal(0, 0.5, size=(3, 5))), settings)
    assert same.verdict == SAME and same.ci_low <= same.ratio <= same.ci_high
    slow = compare_case(_case(base), _case(base * 1.06), settings)
    assert slow.verdict == SLOWER and slow.ci_low > 1 and slow.change_pct == pytest.approx(6)
    small = compare_case(_case(base), _case(base * 1.02), settings)         # significant but under 3 %
    assert small.verdict == SAME and small.ci_low > 1
    noisy = compare_case(_case(base), _case(110 + rng.normal(0, 30, size=(3, 5))), settings)
    assert noisy.verdict == SAME and noisy.ci_low < 1 < noisy.ci_high   # 10 % inside the noise
    partial = compare_case(_case(base), _case(base[:2] * 1.2, [0, 2]), settings)
    assert partial.workers == 2 and "paired on worker(s) 0,2 (base has 3, new 2)" in partial.detail
    assert math.isnan(compare_case(_case(base), TimedCase(KEY, "error: boom"), settings).ratio)


def test_config_compare_table_and_sweep_shape_set():
    config = cfg.load_config()
    settings = Settings.from_config(config)
    assert settings.threshold_pct > 0 and 0 < settings.confidence < 1 
    sweep = cfg.shape_set(config, "perf", "sweep")
    widths = [n for _, n in sweep]
    assert [2 ** k for k in range(8, 17)] == [n for n in widths if n & (n - 1) == 0]      # 256 .. 65536
    assert len([n for n in widths if n & (n - 1)]) >= 3                                   # odd hidden sizes
    assert all(abs(m * n / 2 ** 24 - 1) < 1e-3 for m, n in sweep)                          # M·N held fixed


def test_planted_module_cli(perf_json, tmp_path):
    out = tmp_path / "p.json"
    result = CliRunner().invoke(planted_main, [str(perf_json), str(out), "--factor", "1.2", "--case",
                                               " ".join(KEY)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["metadata"]["planted_slowdown"] == "torch bwd bf16 8x64 hot x1.2"
    result = CliRunner().invoke(planted_main, [str(perf_json), str(out), "--case", "liger bwd bf16 8x64 hot"])
    error_line(result, "is not a timed case")


def test_planted_reads_and_parses_its_source_once(perf_json, tmp_path, monkeypatch):
    text = perf_json.read_text()
    expected = tmp_path / "expected.json"
    write_json(plant_slowdown(json.loads(text), 1.2, KEY)[0], expected)          # what planting always wrote
    reads, parses = [], []
    read_text, loads = Path.read_text, json.loads
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or read_text(self, *a, **k))
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: (s == text and parses.append(s)) or loads(s, *a, **k))
    out = tmp_path / "p.json"
    result = CliRunner().invoke(planted_main, [str(perf_json), str(out), "--factor", "1.2", "--case", " ".join(KEY)])
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert reads.count(perf_json) == 1 and len(parses) == 1
    assert out.read_text() == expected.read_text()
    assert result.output.replace("\n", "") == f"planted 1.2x on torch bwd bf16 8x64 hot -> {out}"  # rich wraps


def test_planted_refuses_a_perf_csv_in_one_line(perf_json, tmp_path):
    result = CliRunner().invoke(planted_main, [str(perf_json.with_suffix(".csv")), str(tmp_path / "p.json")])
    error_line(result, "is a CSV; this needs the JSON of lnbench perf")
    assert not (tmp_path / "p.json").exists()


def test_a_malformed_abi_worker_index_iserror_line(abi_json, tmp_path):
    data = json.loads(abi_json.read_text())
    data["workers"][0]["worker"] = "first"
    bad = _write(tmp_path, "bad-worker.json", data)
    error_line(_compare(bad, abi_json, tmp_path)[0], "malformed worker index")


def test_a_run_compares_with_its_own_csv_and_a_json_without_protocol(perf_json, payload, tmp_path):
    """The CSV of a perf run records fewer protocol settings than its JSON (no cold_mem_fraction, llc_mib): a
    setting known on one side only is not a difference. Nor is a JSON that lost its protocol entry."""
    result, rows = _compare(perf_json, perf_json.with_suffix(".csv"), tmp_path)
    assert result.exit_code == 0, result.output
    assert rows[KEY]["verdict"] == SAME
    payload.pop("protocol")
    result, _ = _compare(perf_json, _write(tmp_path, "bare.json", payload), tmp_path)
    assert result.exit_code == 0, result.output


def test_dtypes_message_names_a_side_without_timed_cases(perf_json, payload, tmp_path):
    for row in payload["data"]:
        row["status"] = "error"
    result, _ = _compare(perf_json, _write(tmp_path, "failed.json", payload), tmp_path)
    error_line(result, "dtypes differ (bf16 vs no timed case)")


def test_planted_refuses_to_write_over_its_source(perf_json, tmp_path):
    before = perf_json.read_bytes()
    result = CliRunner().invoke(planted_main, [str(perf_json), str(perf_json), "--factor", "1.1"])
    assert result.exit_code == 2 and "is an input of this command (SOURCE)" in result.output
    assert perf_json.read_bytes() == before


def test_compare_imports_no_torch(tmp_path):
    """`lnbench compare A B` (a CI gate's step) reads result files: it pays for no torch import (~1.5 s)."""
    import os
    import subprocess
    import sys

    perf = str(Path(__file__).parent / "data" / "results-v1" / "perf.json")
    code = ("import sys\nfrom lnbench.cli import main\ntry:\n    main(['compare', sys.argv[1], sys.argv[1], '--no-csv'])\n"
            "except SystemExit as stop:\n    print('exit', stop.code)\nprint('torch imported:', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, perf], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "exit 0" in out.stdout and "torch imported: False" in out.stdout, out.stdout + out.stderr
