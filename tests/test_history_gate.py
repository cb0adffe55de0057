"""Issue 53: a regression gate CI can trust. `history --fail-on-regression` raises no alarm without a code change
(runs of one commit are never split; a change must stand out against the within-run and run-to-run noise, with
the false discovery rate held over every series; a step the peers share is the machine's), and gates every
slowdown in its own unit's direction, with a summary line that says what the exit status says."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import gate_sets
from lnbench.cli import main
from lnbench.history.gate import direction, judge
from lnbench.history.significance import Noise, adjusted, detectable_pct, noise, step
from lnbench.history.summary import Series, summarize
from lnbench.results import HistoryRow
from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record

DATA = Path(__file__).parent / "data" / "results-v1"


def _history(url: str, *args: str) -> tuple[int, str]:
    out = CliRunner().invoke(main, ["history", "--store", url, "--kind", "perf", *args])
    return out.exit_code, " ".join(out.output.split())


def _perf_store(tmp_path: Path, commits: list[str], factor: Callable[[int, str, str], float],
                run_noise: float = 0.01, worker_spread: float = 0.005, seed: int = 1) -> str:
    """perf.json's cases (torch fwd and bwd; a second backend, `peer`, copies them) over one run per entry of
    `commits`; each aggregate median times `factor(run, backend, op)` and a run noise, its workers ±spread."""
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    store = open_store(url)
    perf = load_result(DATA / "perf.json")
    base = perf.rows[perf.rows["row_kind"] == "aggregate"]
    rows = pd.concat([base, base.assign(backend="peer")], ignore_index=True)
    rng = np.random.default_rng(seed)
    for i, commit in enumerate(commits):
        run_rows = rows.copy()
        medians = [m * factor(i, b, o) * math.exp(rng.normal(0, run_noise))
                   for m, b, o in zip(rows["median_us"], rows["backend"], rows["op"])]
        run_rows["median_us"] = medians
        run_rows["run_us"] = [[m * math.exp(rng.normal(0, worker_spread)) for _ in range(3)] for m in medians]
        record(store, perf.kind, perf.version, perf.run.with_(timestamp=f"2026-12-01T{i // 60:02d}:{i % 60:02d}:00",
                                                               git_commit=commit), run_rows)
    store.close()
    return url


def _flat(i: int, backend: str, op: str) -> float:
    return 1.0


def test_runs_of_one_commit_are_never_split_even_by_a_big_shift(tmp_path: Path) -> None:
    """16 runs of one unchanged tree where the machine got 20% slower halfway: no change point, exit 0, the shift
    listed as the machine's (same commit), and the summary says there was nothing to judge."""
    url = _perf_store(tmp_path, ["A"] * 16, lambda i, b, o: 1.2 if i >= 8 else 1.0)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 0, text
    series = json.loads(out.read_text())["series"]
    assert all(s["changes"] == [] for s in series)
    assert all(s["shifts"] and s["shifts"][0]["index"] == 8 and s["shifts"][0]["size_pct"] > 15 for s in series)
    assert "gate: no slowdown of at least 5% (exit 0)" in text and "4 nothing to judge yet" in text
    assert "A run 9 +" in text                                          # the machine shifts column


def test_a_shift_between_runs_of_one_commit_next_to_a_commit_change_is_not_the_codes(tmp_path: Path) -> None:
    """Runs A x12 then B x8, the machine 20% slower from the 7th run of A: the step is inside A, so the boundary
    A..B holds no change, and the shift is listed at its run inside A; exit 0."""
    url = _perf_store(tmp_path, ["A"] * 12 + ["B"] * 8, lambda i, b, o: 1.2 if i >= 6 else 1.0)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 0, text
    series = json.loads(out.read_text())["series"]
    assert all(s["changes"] == [] and [(x["commit"], x["index"]) for x in s["shifts"]] == [("A", 6)] for s in series)


def test_a_planted_slowdown_fails_the_gate_at_its_commit_pair_and_names_only_that_series(tmp_path: Path) -> None:
    commits = ["A"] * 8 + ["B"] * 8
    url = _perf_store(tmp_path, commits, lambda i, b, o: 1.19 if i >= 8 and b == "torch" and o == "bwd" else 1.0)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 1, text
    payload = json.loads(out.read_text())
    failing = [s for s in payload["series"] if s["changes"]]
    assert [(s["backend"], s["op"]) for s in failing] == [("torch", "bwd")]
    change = failing[0]["changes"][-1]
    assert (change["from_commit"], change["to_commit"]) == ("A", "B") and change["cause"] == "code"
    assert change["ci_low"] < change["ratio"] < change["ci_high"] and change["ci_low"] > 1.1
    assert change["p_adj"] >= change["p"] and change["p_adj"] <= 0.05
    assert "gate: 1 slowdown(s) of at least 5% (exit 1)" in text
    assert payload["metadata"]["gate_text"] == "gate: 1 slowdown(s) of at least 5% (exit 1)"
    assert payload["metadata"]["regressions"] == 1 and payload["metadata"]["fdr_q"] == 0.05
    assert "Benjamini-Hochberg" in payload["metadata"]["change_test"]


def test_a_step_every_backend_shows_at_once_is_the_machines(tmp_path: Path) -> None:
    """Peer controls: both backends 10% slower from the same commit on: each change point's cause is the
    machine, and the gate passes."""
    commits = [f"c{i:02d}" for i in range(16)]
    url = _perf_store(tmp_path, commits, lambda i, b, o: 1.10 if i >= 8 else 1.0)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 0, text
    series = json.loads(out.read_text())["series"]
    assert all(s["changes"] and s["changes"][-1]["cause"] == "machine" for s in series)
    assert all(s["changes"][-1]["peer_shift_pct"] > 5 for s in series)
    assert "newest change is the machine's" in text


def test_a_host_bound_series_says_what_it_can_detect_and_is_not_gated_below_it(tmp_path: Path) -> None:
    """Workers spread ±30% inside each run (a host-bound case): a 12% step at a commit boundary is not a
    failure of a 5% gate, and the series says its noise and the size it detects."""
    commits = [f"c{i:02d}" for i in range(16)]
    url = _perf_store(tmp_path, commits, lambda i, b, o: 1.12 if i >= 8 and b == "torch" else 1.0,
                      run_noise=0.05, worker_spread=0.3)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 0, text
    series = json.loads(out.read_text())["series"]
    assert all(s["noise_pct"] > 20 and s["detectable_pct"] > 25 for s in series)
    assert "too noisy for 5% (noise ±" in text and "detects ≥" in text


def test_two_pull_request_runs_judged_with_with_find_a_5pct_step(tmp_path: Path) -> None:
    """The README's CI sketch: 20 nightly runs of main, then the pull request's two runs (--with, not recorded),
    its torch cases 5% slower: exit 1 at the pull request's commit; the same runs at main's speed: exit 0."""
    url = _perf_store(tmp_path, [f"c{i:02d}" for i in range(20)], _flat)
    perf = json.loads((DATA / "perf.json").read_text())
    rng = np.random.default_rng(11)

    def pr_files(factor: float, tag: str) -> list[str]:
        paths = []
        for k in range(2):
            payload = json.loads(json.dumps(perf))
            payload["metadata"].update(git_commit=f"{tag}{k}", timestamp=f"2026-12-02T00:0{k}:00+00:00")
            for row in payload["data"]:
                if row["row_kind"] == "aggregate":
                    row["median_us"] *= factor * math.exp(rng.normal(0, 0.01))
                    row["run_us"] = [row["median_us"] * math.exp(rng.normal(0, 0.005)) for _ in range(3)]
            path = tmp_path / f"{tag}{k}.json"
            path.write_text(json.dumps(payload))
            paths += ["--with", str(path)]
        return paths

    code, text = _history(url, *pr_files(1.05, "slow"), "--fail-on-regression", "3")
    assert code == 1 and "FAILS: +" in text, text
    code, text = _history(url, *pr_files(1.0, "same"), "--fail-on-regression", "3")
    assert code == 0, text


@pytest.mark.parametrize("size, code", [(-7.7, 1), (7.7, 0)])
def test_a_flydsl_tbps_history_is_gated_in_its_own_direction(tmp_path: Path, size: float, code: int) -> None:
    """FlyDSL's dashboard history (TB/s, printed to 3 decimals): a -7.7% step is a slowdown, a +7.7% one is not."""
    rng = np.random.default_rng(7)
    records = []
    for run in range(12):
        for op, base in (("layernorm", 4.2), ("rmsnorm", 4.5)):
            value = base * (1 + rng.normal(0, 0.005)) * (1 + size / 100 if run >= 8 and op == "layernorm" else 1)
            records.append({"op": op, "shape": "8192x8192", "dtype": "bf16", "metric": "TB/s",
                            "value": round(value, 3), "status": "ok", "ts": f"2026-11-{run + 1:02d}T00:00:00Z",
                            "commit": f"{run:07x}", "run_id": 1000 + run, "runner": "mi300x-1", "arch": "gfx942"})
            if run == 11 and op == "layernorm":          # FlyDSL's own verdict of its newest run, kept beside ours
                records[-1].update(regression=size < 0, vs_main={"label": "main", "baseline": base, "ratio": 1.0,
                                                                 "delta_pct": size})
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"records": records}))
    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    assert CliRunner().invoke(main, ["store", "--store", url, str(history)]).exit_code == 0
    out = CliRunner().invoke(main, ["history", "--store", url, "--fail-on-regression", "5", "--json",
                                    str(tmp_path / "h.json")])
    assert out.exit_code == code, out.output
    series = {s["op"]: s for s in json.loads((tmp_path / "h.json").read_text())["series"]}
    assert [c["to_commit"] for c in series["layernorm"]["changes"]] == [f"{8:07x}"]
    assert series["rmsnorm"]["changes"] == []
    gates = {r["op"]: r["gate"] for r in json.loads((tmp_path / "h.json").read_text())["data"]}
    assert gates["layernorm"].startswith("FAILS: -") == (code == 1) and not gates["rmsnorm"].startswith("FAILS")
    assert series["layernorm"]["changes"][0]["size_pct"] == pytest.approx(size, abs=1.5)
    flags = {r["op"]: r["flydsl_flag"] for r in json.loads((tmp_path / "h.json").read_text())["data"]}
    assert flags["layernorm"] == f"FlyDSL: {'regression ' if size < 0 else ''}{size:+.1f}% vs main"
    assert series["layernorm"]["flydsl_regression"] is (size < 0) and flags["rmsnorm"] == ""
    report = CliRunner().invoke(main, ["report", "--store", url, "--out", str(tmp_path / "r")])
    assert report.exit_code == 0 and flags["layernorm"] in (tmp_path / "r" / "index.html").read_text()


GATE_RUNS = Path(__file__).parent / "data" / "gate_runs"


def _recorded(tmp_path: Path, archives: list[str], keep: Callable[[str], bool] = lambda name: True) -> str:
    """A store of the runs in tests/data/gate_runs' archives (perf --json files, scripts/device_gate_stores.sh),
    recorded by `lnbench store` as a user would."""
    import tarfile

    folder = tmp_path / "runs"
    folder.mkdir(exist_ok=True)
    for name in archives:
        with tarfile.open(GATE_RUNS / name) as tar:
            tar.extractall(folder, filter="data")
    url = f"sqlite:///{tmp_path / 'recorded.sqlite'}"
    files = sorted(str(p) for p in folder.glob("*.json") if keep(p.name))
    assert CliRunner().invoke(main, ["store", "--store", url, *files]).exit_code == 0
    return url


@pytest.mark.parametrize("archives, runs", [(["aa-1.tgz", "aa-11.tgz"], 14), (["cpu-aa-1.tgz"], 15)])
def test_the_aa_stores_recorded_on_the_h100_and_this_cpu_pass_the_gate(tmp_path: Path, archives: list[str],
                                                                       runs: int) -> None:
    """14 runs of one unchanged tree on an NVIDIA H100 (2026-12-07; liger bwd 4096x4096 hot is host-bound, ±28%)
    and 15 on this 2-core CPU under load: no change point, exit 0."""
    url = _recorded(tmp_path, archives)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 0 and "gate: no slowdown of at least 5% (exit 0)" in text, text
    series = json.loads(out.read_text())["series"]
    assert len(series) == 16 and all(s["changes"] == [] for s in series)
    assert max(s["runs"] for s in series) == runs


def test_the_planted_slowdown_recorded_on_the_h100_fails_at_its_commit_pair_only(tmp_path: Path) -> None:
    """The H100's A/A runs 1-8 at commit A, then 7 runs of commit B whose torch backward copies a quarter of dx
    again: exit 1, naming the four torch bwd series at A..B and no other."""
    url = _recorded(tmp_path, ["aa-1.tgz", "planted-1.tgz"], lambda name: name.startswith("planted")
                    or int(name[3:5]) <= 8)
    out = tmp_path / "h.json"
    code, text = _history(url, "--fail-on-regression", "5", "--json", str(out))
    assert code == 1 and "gate: 4 slowdown(s) of at least 5% (exit 1)" in text, text
    payload = json.loads(out.read_text())
    failing = {(r["backend"], r["op"], r["shape"], r["mode"]) for r in payload["data"] if r["gate"].startswith("FAILS")}
    assert failing == {("torch", "bwd", shape, mode) for shape in ("4096x4096", "64x256") for mode in ("hot", "cold")}
    for s in payload["series"]:
        assert [(c["from_commit"], c["to_commit"]) for c in s["changes"]] == \
            ([("736d03e", "322b94d")] if (s["backend"], s["op"]) == ("torch", "bwd") else [])


def test_a_unit_without_a_slower_direction_is_listed_as_not_gated() -> None:
    rows = [Series(HistoryRow(kind="inspect", unit="VGPR", latest=96.0, runs=8, commits=8, series_id=1, noise_pct=1.0,
                              detectable_pct=2.0),
                   changes=[{"size_pct": 20.0, "run": 5, "from_commit": "a", "to_commit": "b", "cause": "code",
                             "detectable_pct": 1.0}])]
    gate = judge(rows, 5)
    assert gate.slower == [] and gate.notes[1].startswith("not gated: unit 'VGPR'")
    assert gate.counts() == {"not gated (unit)": 1}


@pytest.mark.parametrize("unit, size, expected", [("us", 5, "slower"), ("us", -5, "faster"), ("TB/s", -5, "slower"),
                                                   ("TFLOPS", 5, "faster"), ("GB/s", -1, "slower"),
                                                   ("speedup", -3, "slower"), ("ratio", 5, "changed")])
def test_direction_by_unit(unit: str, size: float, expected: str) -> None:
    assert direction(unit, size) == expected


def test_the_noise_takes_the_larger_of_the_run_to_run_and_the_within_run_spread() -> None:
    rng = np.random.default_rng(4)
    steady = 100 * np.exp(rng.normal(0, 0.01, 30))
    tight = noise(steady.tolist(), [[v * 0.999, v, v * 1.001] for v in steady])
    wide = noise(steady.tolist(), [[v * 0.7, v, v * 1.3] for v in steady])
    assert tight.sigma == tight.between and 0.006 < tight.between < 0.02
    assert wide.sigma == wide.within > 0.15
    stepped = np.r_[steady[:15], steady[15:] * 1.5]                # a step: each stretch around its own median
    assert noise(stepped.tolist(), [[]] * 30, [15]).between < 0.02 < noise(stepped.tolist(), [[]] * 30).between
    assert noise([5.0] * 10, [[]] * 10).sigma == 0.001                   # never zero


def test_a_step_and_its_detectable_size_follow_the_noise() -> None:
    quiet = Noise(0.01, 0.01, 0.0, 30)
    s = step(([100.0] * 15, [[]] * 15), ([105.0] * 15, [[]] * 15), quiet)
    assert s.ratio == pytest.approx(1.05) and s.low < 1.05 < s.high and s.p < 1e-6
    assert step(([100.0] * 15, [[]] * 15), ([105.0] * 15, [[]] * 15), quiet, places=10).p == pytest.approx(10 * s.p)
    loud = Noise(0.15, 0.15, 0.1, 30)
    assert step(([100.0] * 15, [[]] * 15), ([105.0] * 15, [[]] * 15), loud).p > 0.3
    assert detectable_pct(loud, 30, 2, 0.05 / 16) > 30 > detectable_pct(quiet, 30, 2, 0.05 / 16) > 1
    assert detectable_pct(quiet, 30, 0, 0.05) == math.inf


def test_benjamini_hochberg_adjusts_in_order_never_lowers_a_p_and_is_scipys() -> None:
    from scipy import stats

    ps = [0.001, 0.04, 0.03, 1.0]
    q = adjusted(ps)
    assert q == pytest.approx([0.004, 0.16 / 3, 0.16 / 3, 1.0]) and all(a >= p for a, p in zip(q, ps))
    rng = np.random.default_rng(9)
    for size in (1, 2, 7, 400):
        ps = (rng.uniform(0, 1, size) ** 3).tolist()
        assert adjusted(ps) == pytest.approx(stats.false_discovery_control(ps, method="bh").tolist(), rel=1e-12)
    assert adjusted([]) == []


def test_the_t_distribution_is_scipys() -> None:
    from scipy import stats

    from lnbench.history.significance import _t_ppf, _t_sf

    for df in (1, 5, 28, 200):
        assert _t_sf(2.5, df) == pytest.approx(stats.t.sf(2.5, df), rel=1e-10)
        assert _t_ppf(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)


def test_400_synthetic_aa_series_raise_no_alarm_and_device_bound_steps_are_found_at_their_commit() -> None:
    """The synthetic set (tests/gate_sets.py): 400 series x 30 nightly runs, half device-bound (1% noise), half
    host-bound (±20-30%, workers spread like the H100's): no gate failure and no change point on the A/A set;
    on the stepped set every device-bound 5% and 10% step at its commit (≥ 95% asked), no gate failure on a
    series without a step."""
    found = gate_sets.measure(5.0)
    assert found["aa_series"] == 400 and found["aa_gate_failures"] == 0 and found["aa_series_with_change_points"] == 0
    for size in ("5%", "10%"):
        hits, total = found["found_at_commit"][f"device {size}"]
        assert total >= 30 and hits / total >= 0.95
    assert found["gate_failures_not_planted"] == [] and len(found["stepped_gate_failures"]) >= 33
    assert found["noise_pct"]["device"] < 3 and 20 < found["noise_pct"]["host"] < 60


def test_the_history_csv_keeps_its_columns_and_adds_the_gates(tmp_path: Path) -> None:
    url = _perf_store(tmp_path, [f"c{i:02d}" for i in range(8)], _flat)
    assert _history(url, "--csv", str(tmp_path / "h.csv"), "--fail-on-regression", "5")[0] == 0
    columns = list(pd.read_csv(tmp_path / "h.csv", comment="#").columns)
    old = ["kind", "backend", "op", "dtype", "shape", "mode", "case_name", "machine", "unit", "series_id", "runs",
           "latest", "latest_status", "latest_commit", "since", "trend", "newest_change_pct", "changes_text"]
    assert [c for c in columns if c in old] == old
    assert {"noise_pct", "detectable_pct", "commits", "shifts_text", "gate"} <= set(columns)


def test_summarize_runs_on_a_frame_without_worker_values() -> None:
    frame, _ = gate_sets.points(stepped=True, series=8, runs=30)
    rows = summarize(frame.drop(columns=["values"]))
    assert len(rows) == 8 and all(s.row.noise_pct is not None for s in rows)


def test_compare_flags_at_most_5pct_of_the_h100_aa_pairs_and_says_what_noise_it_judged_against(
        tmp_path: Path) -> None:
    """Issue 53 item 7: `compare` of each consecutive pair of the H100's 14 A/A runs (13 pairs x 16 cases): at
    most 5% flagged, and a flagged case names the noise it was judged against."""
    import tarfile

    for name in ("aa-1.tgz", "aa-11.tgz"):
        with tarfile.open(GATE_RUNS / name) as tar:
            tar.extractall(tmp_path, filter="data")
    runs = sorted(tmp_path.glob("aa-*.json"))
    flagged, compared = [], 0
    for base, new in zip(runs, runs[1:]):
        out = tmp_path / f"c-{new.stem}.json"
        result = CliRunner().invoke(main, ["compare", str(base), str(new), "--no-csv", "-q", "--json", str(out)])
        assert result.exit_code == 0, result.output
        rows = json.loads(out.read_text())["data"]
        compared += sum(r["verdict"] in ("SAME", "SLOWER", "FASTER") for r in rows)
        flagged += [r for r in rows if r["verdict"] in ("SLOWER", "FASTER")]
    assert compared == 13 * 16 and len(flagged) / compared <= 0.05
    assert flagged and all("judged against the workers' paired spread ±" in r["detail"] for r in flagged)
