"""lnbench history: change points from e-divisive on planted series (a 5% step in a flat noisy series is found
at the right run; identical distributions give none), verify's failing-since, filters, --fail-on-regression,
--exclude-loaded, and the table/CSV/JSON/Markdown outputs."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from lnbench.cli import main
from lnbench.history.changes import Search, change_points, sparkline
from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record
import h200_store
from store_fixtures import pg_server, store_url  # noqa: F401 - fixtures

DATA = Path(__file__).parent / "data" / "results-v1"


@pytest.mark.parametrize("seed", range(5))
def test_a_planted_5pct_step_in_a_noisy_series_is_found_at_its_run(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = 100 * (1 + rng.normal(0, 0.01, 60))
    values[37:] *= 1.05
    found = change_points(values)
    assert [cp.index for cp in found] == [37]
    assert found[0].size_pct == pytest.approx(5, abs=1.5) and found[0].p <= 0.01


@pytest.mark.parametrize("seed", range(10))
def test_a_series_of_one_distribution_has_no_change_point(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    assert change_points(100 * (1 + rng.normal(0, 0.01, 60))) == []


def test_a_first_search_of_many_series_starts_no_worker_process(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Searching is milliseconds a series: worker processes cost more to start than they save (and a pool's
    workers, ended by SIGTERM, printed lnbench's Terminated traceback)."""
    import multiprocessing

    import lnbench.history.cache as cache

    def no_pool(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(multiprocessing, "get_context", no_pool)
    monkeypatch.setattr(multiprocessing, "Pool", no_pool)
    store = open_store(f"sqlite:///{tmp_path / 's.sqlite'}")
    rng = np.random.default_rng(3)
    wanted = [Search(tuple(100 * (1 + rng.normal(0, 0.01, 20))), (False, *[True] * 19)) for _ in range(40)]
    found = cache.found_changes(store, wanted)
    store.close()
    assert set(found) == set(wanted)


def test_quiet_records_the_table_for_the_markdown_without_laying_it_out() -> None:
    from lnbench.output.tables import SHOWN, Column, render_table, silent_console

    console = silent_console()
    render_table(console, "History", [Column("a", "a")], [{"a": 1}])
    assert SHOWN[-1][0] == "History" and SHOWN[-1][2] == [{"a": 1}]
    assert console.file.getvalue() == ""            # nothing rendered (history's 200 rows: 0.4 s)


def test_history_imports_neither_torch_nor_alembic(tmp_path: Path) -> None:
    """`lnbench history` on a store at the newest schema pays for neither (1.1 s and 0.15 s of imports), and
    its change points need no library (lnbench.history.edivisive)."""
    import os
    import subprocess
    import sys

    url = _store(tmp_path, runs=8)
    unwanted = ("torch", "alembic", "signal_processing_algorithms")
    code = ("import sys\nfrom lnbench.cli import main\ntry:\n    main(['history', '-q', '--store', sys.argv[1]])\n"
            f"except SystemExit:\n    pass\nprint('imported', sorted(m for m in {unwanted} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "imported []" in out.stdout, out.stdout + out.stderr


def test_sparkline_spans_low_to_high() -> None:
    assert sparkline([1, 2, 3]) == "▁▄█" and sparkline([5, 5]) == "▄▄"


def _store(tmp_path: Path, step_at: int = 25, runs: int = 40, loaded: set[int] = frozenset(),
           url: str | None = None) -> str:
    """perf.json's two cases over `runs` commits, 1% noise (each run's two workers ±0.5% around its median); the
    first backend's fwd 5% slower from `step_at`;
    verify.json's first check failing from the 7th of 10 runs."""
    url = url or f"sqlite:///{tmp_path / 'h.sqlite'}"
    store = open_store(url)
    perf = load_result(DATA / "perf.json")
    rng = np.random.default_rng(1)
    agg = perf.rows["row_kind"] == "aggregate"
    for i in range(runs):
        rows = perf.rows.copy()
        noise = 1 + rng.normal(0, 0.01, int(agg.sum()))
        step = np.where((rows.loc[agg, "op"] == "fwd") & (i >= step_at), 1.05, 1.0)
        rows.loc[agg, "median_us"] = rows.loc[agg, "median_us"].to_numpy() * noise * step
        rows.loc[agg, "run_us"] = pd.Series([[m * 0.995, m * 1.005] for m in rows.loc[agg, "median_us"]],
                                            index=rows.index[agg])    # the workers' medians around it, ±0.5%
        run = perf.run.with_(timestamp=f"2026-05-01T00:{i:02d}:00", git_commit=f"c{i:03d}",
                             load_flag="busy" if i in loaded else "")
        record(store, perf.kind, perf.version, run, rows)
    verify = load_result(DATA / "verify.json")
    for i in range(10):
        rows = verify.rows.copy()
        if i >= 6:
            rows.loc[0, "status"] = "FAIL"
        record(store, verify.kind, verify.version,
               verify.run.with_(timestamp=f"2026-05-01T01:{i:02d}:00", git_commit=f"v{i:03d}"), rows)
    store.close()
    return url


def _history(url: str, *args: str) -> tuple[int, str]:
    out = CliRunner().invoke(main, ["history", "--store", url, *args])
    return out.exit_code, out.output


def test_history_finds_the_step_with_its_commit_range_and_the_failing_check(tmp_path: Path, store_url: str) -> None:
    url = _store(tmp_path, url=store_url)          # on SQLite and on PostgreSQL
    code, output = _history(url, "--json", str(tmp_path / "h.json"), "--csv", str(tmp_path / "h.csv"),
                            "--md", str(tmp_path / "h.md"))
    assert code == 0, output
    series = json.loads((tmp_path / "h.json").read_text())["series"]
    perf = {s["op"]: s for s in series if s["kind"] == "perf"}
    assert [(c["from_commit"], c["to_commit"]) for c in perf["fwd"]["changes"]] == [("c024", "c025")]
    assert perf["fwd"]["changes"][0]["size_pct"] == pytest.approx(5, abs=1.5)
    assert perf["bwd"]["changes"] == []
    failing = [s for s in series if s["since"]]
    assert len(failing) == 1 and failing[0]["since"] == "v006" and failing[0]["latest_status"] == "FAIL"
    assert len(pd.read_csv(tmp_path / "h.csv")) == len(series)
    assert "c024..c025" in (tmp_path / "h.md").read_text() and "c024..c025" in output


#: history's CSV columns before it was a result kind (kept, with the run's columns after them)
_OLD_CSV_COLUMNS = ["kind", "backend", "op", "dtype", "shape", "mode", "case_name", "machine", "unit", "series_id",
                    "runs", "latest", "latest_status", "latest_commit", "since", "trend", "newest_change_pct",
                    "changes_text"]


def test_history_writes_history_results_that_load_result_reads(tmp_path: Path) -> None:
    """--csv/--json write the `history` kind: one HistoryRow a series (the old columns), a HistoryRun naming the
    store, the filters and the method; the JSON keeps `series` with the change points as lists; a store does not
    record a history (one line, exit 2)."""
    from lnbench.history.cache import METHOD
    from lnbench.results import HISTORY, HistoryRun

    url = _store(tmp_path)
    csv, js = tmp_path / "h.csv", tmp_path / "h.json"
    code, output = _history(url, "--kind", "perf", "--last", "30", "--fail-on-regression", "3", "--csv", str(csv),
                            "--json", str(js))
    assert code == 1, output
    for path in (csv, js):
        result = load_result(path, (HISTORY.name,))
        assert result.kind == "history" and result.version == HISTORY.version and isinstance(result.run, HistoryRun)
        assert result.run.change_method == METHOD and result.run.last_runs == 30 and result.run.regressions == 1
        assert result.run.store_url.endswith("h.sqlite") and result.run.fail_on_regression_pct == 3
        assert len(result.rows) == 2 and set(result.rows["kind"]) == {"perf"}
        fwd = result.rows[result.rows["op"] == "fwd"].iloc[0]
        assert fwd["changes_text"].startswith("c024..c025 +") and fwd["newest_change_pct"] > 3
    assert list(pd.read_csv(csv).columns[:len(_OLD_CSV_COLUMNS)]) == _OLD_CSV_COLUMNS
    payload = json.loads(js.read_text())
    assert payload["metadata"]["filters"] == {"kind": "perf"} and payload["metadata"]["schema"] == HISTORY.schema
    assert [c["to_commit"] for s in payload["series"] if s["op"] == "fwd" for c in s["changes"]] == ["c025"]
    out = CliRunner().invoke(main, ["store", str(js), "--store", f"sqlite:///{tmp_path / 'other.sqlite'}"])
    assert out.exit_code == 2 and "not recorded in a store" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1


def _table_rows(output: str) -> list[str]:
    """The table's rows (a row's wrapped cells continue on lines whose first cell is blank: not rows)."""
    return [line for line in output.splitlines() if line.startswith("│") and line.split("│")[1].strip()]


def test_history_of_an_h200_shaped_store_prints_the_step_first_in_at_most_40_lines(tmp_path: Path) -> None:
    """Issue 40: 336 verify series (PASS), 20 abi-compare series without a value, 16 perf series, one 5% slower
    from a known commit: the table lists the 16 timed series, the stepped one first with its commits and size;
    verify and abi-compare are a line each."""
    code, output = _history(h200_store.build(tmp_path / "h200.sqlite"))
    assert code == 0, output
    assert len(output.splitlines()) <= 40, output
    rows = _table_rows(output)
    assert len(rows) == 16 and all(row.split("│")[1].strip() == "perf" for row in rows)
    cells = [c.strip() for c in rows[0].split("│")[1:-1]]
    assert cells[1:6] == list(h200_store.PLANTED)
    step = re.search(rf"\.\.{h200_store.STEP_COMMIT} \+(\d+\.\d)% \(p [\d.e-]+, adj [\d.e-]+\)", rows[0])
    assert step and 3.5 <= float(step.group(1)) <= 6.5
    assert not any(re.search(r"\.\.\w+ [+-]\d", row) for row in rows[1:])
    lines = output.splitlines()
    assert "verify: 336 series (336 PASS); --kind verify or --all lists them" in lines
    assert "abi-compare: 20 series (20 without a value, not run (no ROCm device)); --kind abi-compare or --all " \
           "lists them" in lines


def test_all_and_kind_list_every_series_and_the_files_are_the_same_whatever_the_table(tmp_path: Path) -> None:
    url = h200_store.build(tmp_path / "h200.sqlite")
    shown = {}
    for name, args in (("default", ()), ("all", ("--all",)), ("verify", ("--kind", "verify"))):
        code, output = _history(url, *args, "--json", str(tmp_path / f"{name}.json"),
                                "--csv", str(tmp_path / f"{name}.csv"))
        assert code == 0, output
        shown[name] = output
    assert len(_table_rows(shown["all"])) == 372 and "--all lists them" not in shown["all"]
    rows = _table_rows(shown["verify"])
    assert len(rows) == 336 and all(row.split("│")[1].strip() == "verify" for row in rows)
    default, every = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("default", "all"))
    assert default["data"] == every["data"] and default["series"] == every["series"] and len(every["series"]) == 372
    frames = [pd.read_csv(tmp_path / f"{name}.csv")[_OLD_CSV_COLUMNS] for name in ("default", "all")]
    pd.testing.assert_frame_equal(*frames)


def test_the_default_table_lists_failing_checks_and_says_so(tmp_path: Path) -> None:
    code, output = _history(_store(tmp_path))
    assert code == 0, output
    rows = _table_rows(output)
    assert len(rows) == 3 and "c024..c025" in rows[0] and "verify" in rows[2] and "v006" in rows[2]
    assert "verify: 12 series (11 PASS, 1 FAIL); the table lists the failing; --kind verify or --all lists them" \
        in output.splitlines()


def test_fail_on_regression_exits_1_only_for_a_slowdown_of_that_size(tmp_path: Path) -> None:
    url = _store(tmp_path)
    assert _history(url, "--fail-on-regression", "3")[0] == 1
    assert _history(url, "--fail-on-regression", "20")[0] == 0
    assert _history(url, "--fail-on-regression", "3", "--op", "bwd")[0] == 0


def _pr_run(tmp_path: Path, name: str, fwd_factor: float) -> Path:
    """perf.json as a pull request's run (its commit, later), its fwd median `fwd_factor` times as long."""
    payload = json.loads((DATA / "perf.json").read_text())
    payload["metadata"].update(git_commit=name, timestamp="2026-06-01T00:00:00+00:00")
    for row in payload["data"]:
        if row["row_kind"] == "aggregate" and row["op"] == "fwd":
            row["median_us"] *= fwd_factor
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(payload))
    return path


def test_with_judges_a_pull_requests_runs_against_the_stored_history(tmp_path: Path) -> None:
    """--with FILE: the files' points are the newest runs of their series, not recorded; --fail-on-regression
    counts only a change point at one of them (a slowdown main already had is not the pull request's)."""
    from lnbench.store.db import open_store as reopen

    (tmp_path / "flat").mkdir()
    url = _store(tmp_path / "flat", step_at=100)
    slow = [_pr_run(tmp_path, f"pr{i}", 1.05) for i in (1, 2)]
    same = [_pr_run(tmp_path, f"aa{i}", 1.0) for i in (1, 2)]
    out = tmp_path / "h.json"
    code, output = _history(url, "--kind", "perf", "--with", str(slow[0]), "--with", str(slow[1]),
                            "--fail-on-regression", "3", "--json", str(out))
    assert code == 1, output
    fwd = next(s for s in json.loads(out.read_text())["series"] if s["op"] == "fwd")
    assert fwd["runs"] == 42 and fwd["changes"][-1]["to_commit"] == "pr1" and fwd["changes"][-1]["run"] == -1
    assert json.loads(out.read_text())["metadata"]["judged_files"] == f"{slow[0]}; {slow[1]}"
    assert _history(url, "--kind", "perf", "--with", str(same[0]), "--with", str(same[1]),
                    "--fail-on-regression", "3")[0] == 0
    store = reopen(url)
    with store.engine.connect() as conn:            # nothing was recorded
        assert conn.exec_driver_sql("SELECT count(*) FROM runs WHERE \"commit\" LIKE 'pr%'").scalar() == 0
    store.close()
    before = slow[0].read_bytes()
    code, output = _history(url, "--with", str(slow[0]), "--json", str(slow[0]))
    assert code == 2 and "--json" in output and slow[0].read_bytes() == before        # a judged file is an input
    stepped = _store(tmp_path, step_at=25)          # main got 5% slower at c025; the pull request stays there
    assert _history(stepped, "--kind", "perf", "--fail-on-regression", "3")[0] == 1
    assert _history(stepped, "--kind", "perf", "--with", str(slow[0]), "--with", str(slow[1]),
                    "--fail-on-regression", "3")[0] == 0


def test_fail_on_regression_says_how_many_series_it_could_not_judge(tmp_path: Path) -> None:
    """A series of fewer than 6 runs has no change point: the gate passes it, and says so (summary, table, run
    record)."""
    url = _store(tmp_path, runs=4)
    out = tmp_path / "h.json"
    code, output = _history(url, "--fail-on-regression", "3", "--json", str(out))
    assert code == 0, output
    text = " ".join(output.split())
    assert "gate: no slowdown of at least 3% (exit 0); 2 nothing to judge yet" in text
    assert "too few runs (4; 6 needed)" in text
    assert json.loads(out.read_text())["metadata"]["unjudged"] == 2
    assert "gate:" not in _history(url)[1]                            # no gate, nothing to say


def test_filters_and_exclude_loaded(tmp_path: Path) -> None:
    url = _store(tmp_path, step_at=30, loaded=set(range(30, 40)))
    out = tmp_path / "h.json"
    assert _history(url, "--kind", "perf", "--json", str(out))[0] == 0
    series = json.loads(out.read_text())["series"]
    assert {s["kind"] for s in series} == {"perf"} and any(s["changes"] for s in series)
    assert _history(url, "--kind", "perf", "--exclude-loaded", "--json", str(out))[0] == 0
    series = json.loads(out.read_text())["series"]
    assert all(s["runs"] == 30 and not s["changes"] for s in series)       # the slow runs were the loaded ones
    assert _history(url, "--since", "2026-05-01T01:00:00", "--json", str(out))[0] == 0
    assert {s["kind"] for s in json.loads(out.read_text())["series"]} == {"verify"}
    code, output = _history(url, "--since", "nosuchcommit")
    assert code == 2 and "nosuchcommit" in output


def test_change_points_are_searched_once_per_series_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lnbench.history.cache as cache

    url = _store(tmp_path)
    out = tmp_path / "h.json"
    assert _history(url, "--json", str(out))[0] == 0
    first = json.loads(out.read_text())["series"]

    def boom(values):  # noqa: ANN001, ANN202
        raise AssertionError("searched again")

    monkeypatch.setattr(Search, "run", boom)
    assert _history(url, "--json", str(out))[0] == 0
    assert json.loads(out.read_text())["series"] == first
    code, output = _history(url, "--last", "30")                  # other runs: a new key, searched
    assert code == 2 and "searched again" in output


PROFILES = Path(__file__).parent / "data" / "profile-v1"
SOURCES = Path(__file__).parent / "kernel_sources"
LIGHT, HEAVY = 0.072380952380952, 0.08           # the fixtures' fwd bound_us: pointer_ln, heavy_ln (README there)


def test_e_divisive_misses_the_steps_of_a_deterministic_series_that_exact_changes_find() -> None:
    """Modelled floors are deterministic: a step is real however few runs it has. e-divisive (a permutation test)
    finds none in 5 runs + 5, none in the first 2 runs after a step, none that returns (A B A); exact_changes finds
    each at its run; a value's text round trip (JSON keeps 15 digits) is no change."""
    from lnbench.history.changes import ChangePoint, exact_changes

    for before, after in ((5, 5), (10, 1), (10, 2)):
        series = [LIGHT] * before + [HEAVY] * after
        assert change_points(series) == []
        assert exact_changes(series) == [ChangePoint(before, pytest.approx(10.526, abs=1e-3), 0.0)]
    assert [cp.index for cp in change_points([LIGHT] * 10 + [HEAVY] * 3)] == [10]       # found 3 runs late
    back = [LIGHT] * 10 + [HEAVY] * 10 + [LIGHT] * 10
    assert change_points(back) == [] and [cp.index for cp in exact_changes(back)] == [10, 20]
    assert exact_changes([0.07238095238095238, LIGHT, LIGHT, 0.07238095238095238]) == []
    assert exact_changes([LIGHT, LIGHT]) == [] and exact_changes([LIGHT]) == []


def _profile_run(tmp_path: Path, source: str, commit: str, minute: int) -> Path:
    """A fixture profile (light or heavy) as the run of `commit`, `minute` minutes into 2026-07-01."""
    payload = json.loads((PROFILES / f"{source}.json").read_text())
    payload["metadata"].update(git_commit=commit, timestamp=f"2026-07-01T00:{minute:02d}:00+00:00")
    path = tmp_path / f"{commit}.json"
    path.write_text(json.dumps(payload))
    return path


def _profile_store(tmp_path: Path, plan: str, url: str | None = None) -> str:
    """A store of profile runs, one a character of `plan` (l light, h heavy), commits c000, c001, ..."""
    url = url or f"sqlite:///{tmp_path / 'p.sqlite'}"
    files = [_profile_run(tmp_path, {"l": "light", "h": "heavy"}[c], f"c{i:03d}", i) for i, c in enumerate(plan)]
    out = CliRunner().invoke(main, ["store", *map(str, files), "--store", url])
    assert out.exit_code == 0, out.output
    return url


def test_history_of_modelled_floors_reports_each_step_exactly_at_its_commit(tmp_path: Path, store_url: str) -> None:
    """Four light runs, two heavy, one light again: every fwd series (per target and mode) has a step up at
    c003..c004 and back at c005..c006, exact; bwd (unchanged) none. The newest change is a speed-up: the gate
    passes; a pull request's heavy run judged with --with fails it at its own commit."""
    url = _profile_store(tmp_path, "llllhhl", store_url)          # on SQLite and on PostgreSQL
    out = tmp_path / "h.json"
    code, output = _history(url, "--kind", "profile", "--fail-on-regression", "5", "--json", str(out),
                            "--md", str(tmp_path / "h.md"))
    assert code == 0, output
    series = json.loads(out.read_text())["series"]
    assert len(series) == 8 and {s["unit"] for s in series} == {"modelled us"}
    for s in series:
        steps = [(c["from_commit"], c["to_commit"], round(c["size_pct"], 1), c["exact"]) for c in s["changes"]]
        assert steps == ([("c003", "c004", 10.5, True), ("c005", "c006", -9.5, True)] if s["op"] == "fwd" else []), s
    assert "c003..c004 +10.5% (exact)" in (tmp_path / "h.md").read_text() and "(exact)" in output
    assert "unjudged" not in output
    pr = _profile_run(tmp_path, "heavy", "pr1", 59)
    code, output = _history(url, "--kind", "profile", "--with", str(pr), "--fail-on-regression", "5",
                            "--json", str(out))
    assert code == 1, output
    slower = [s for s in json.loads(out.read_text())["series"] if s["changes"] and s["changes"][-1]["run"] < 0]
    assert len(slower) == 4 and all(s["op"] == "fwd" and s["changes"][-1]["to_commit"] == "pr1" for s in slower)
    assert _history(url, "--kind", "profile", "--with", str(pr), "--fail-on-regression", "20")[0] == 0
    assert _history(url, "--kind", "perf", "--json", str(out))[0] == 0           # never among measured times
    assert json.loads(out.read_text())["series"] == []


def test_a_modelled_series_is_judged_from_its_second_run(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    code, output = _history(_profile_store(tmp_path / "one", "l"), "--fail-on-regression", "5")
    assert code == 0 and "8 nothing to judge yet" in " ".join(output.split())
    two = _profile_store(tmp_path, "lh")
    code, output = _history(two, "--fail-on-regression", "5")
    assert code == 1 and "unjudged" not in output and "c000..c001 +10.5% (exact)" in output


def test_two_real_emulated_runs_show_the_heavier_kernel_at_its_commit(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Real `perf --device emu` runs (8x64 fwd, hot): the first recorded by --store as it runs, the second (the
    planted heavier kernel heavy_ln) as a later commit's file by `lnbench store`; history --kind profile finds the
    step on each target at that commit, exact, and --fail-on-regression 5 exits 1."""
    pytest.importorskip("tinygrad")
    from lnbench import backends

    monkeypatch.delenv(backends.KERNEL_SRC_ENV, raising=False)
    monkeypatch.delenv(backends.SOURCES_ENV, raising=False)
    monkeypatch.delenv("LNBENCH_STORE", raising=False)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    files, said = {}, {}
    for module in ("pointer_ln", "heavy_ln"):
        monkeypatch.setattr(backends, "_sources", {})
        config = tmp_path / f"{module}.toml"
        config.write_text(f"[backends.mine]\nmodule = 'lnbench_test_sources.{module}'\npath = '{SOURCES}'\n")
        files[module] = tmp_path / f"{module}.json"
        store = ["--store", url] if module == "pointer_ln" else []
        done = CliRunner().invoke(main, ["perf", "--device", "emu", "--shapes", "8x64", "--op", "fwd", "--mode", "hot",
                                         "--backend", "mine", "--config", str(config), "--no-csv", "--json",
                                         str(files[module]), "-q", *store])
        assert done.exit_code == 0, done.output
        said[module] = done.output
    assert "Run recorded in store" in said["pointer_ln"] and "(run 1, 2 new of 2 points)" in said["pointer_ln"]
    light = json.loads(files["pointer_ln"].read_text())["metadata"]["git_commit"]
    payload = json.loads(files["heavy_ln"].read_text())
    payload["metadata"].update(git_commit="heavy01", timestamp="2099-01-01T00:00:00+00:00")
    files["heavy_ln"].write_text(json.dumps(payload))
    assert CliRunner().invoke(main, ["store", str(files["heavy_ln"]), "--store", url]).exit_code == 0
    out = tmp_path / "h.json"
    code, output = _history(url, "--kind", "profile", "--fail-on-regression", "5", "--json", str(out))
    assert code == 1, output
    series = json.loads(out.read_text())["series"]
    assert sorted(s["case_name"].split("/")[1] for s in series) == ["MI300X", "MI325X"]
    for s in series:
        assert s["runs"] == 2 and s["latest"] == pytest.approx(HEAVY) and s["unit"] == "modelled us"
        assert [(c["from_commit"], c["to_commit"], c["exact"]) for c in s["changes"]] == [(light, "heavy01", True)]
        assert s["changes"][0]["size_pct"] == pytest.approx(10.526, abs=1e-3)
    assert _history(url, "--kind", "profile", "--fail-on-regression", "20")[0] == 0
