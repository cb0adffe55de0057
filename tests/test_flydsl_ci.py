"""lnbench's FlyDSL CI outputs through FlyDSL's own CI scripts (../shared/flydsl-ci beside the repository: FlyDSL's
files, unchanged, run with this interpreter in a subprocess, never copied): the table → benchmark_output_to_csv.py →
compare_benchmark.py; the table and lnbench compare's block → parse_bench.py (one record per case, names and values
as lnbench printed them, a planted 3 % slowdown flagged at FlyDSL's −3 % rule); FlyDSL's ingest.py, its GitHub calls
fed local data as its own tests do → history.json → `lnbench store` → `lnbench history` with nothing lost; and
FlyDSL's own tests of those two scripts. Every test skips, with that reason, where the folder is absent."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_helpers import ONE_THREAD, error_line, timing
from lnbench.cli import main
from lnbench.compare.planted import plant_slowdown
from lnbench.results import load_result
from lnbench.results.flydsl_table import number
from lnbench.store import flydsl

REPO = Path(__file__).resolve().parents[1]
FLYDSL_CI = REPO.parent / "shared" / "flydsl-ci"
SCRIPTS, INGEST = FLYDSL_CI / "scripts", FLYDSL_CI / ".github" / "dashboard" / "ingest"
needs_ci = pytest.mark.skipif(not (INGEST / "parse_bench.py").is_file(),
                              reason=f"FlyDSL's CI scripts are not here ({FLYDSL_CI} is absent)")
pytestmark = needs_ci

DATA = Path(__file__).parent / "data"
NAMES = {"fwd": "layernorm", "bwd": "layernorm_bwd"}
#: a 3 % slowdown as FlyDSL's dashboard reads one: TB/s 3 % lower, the time 1/0.97 × longer
SLOWER_3PCT = 1 / 0.97
PREFIX = "2026-06-09T09:00:00.0000000Z "           # an Actions log's time stamp, as FlyDSL's parser strips it


def _run(script: Path, *args: object, cwd: Path | None = None) -> str:
    """One of FlyDSL's scripts, run with this interpreter; its stdout (the test fails on a non-zero exit)."""
    done = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _lnbench(*args: object) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args], env=ONE_THREAD)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny real CPU perf run: torch (timed) and flydsl (not run here: no ROCm GPU), f32/f16/bf16, two shapes,
    fwd and bwd, 2 workers, fixed seed."""
    out = tmp_path_factory.mktemp("perf") / "base.json"
    _lnbench("perf", "--device", "cpu", "--backend", "torch,flydsl", "--dtype", "f32,f16,bf16", "--shapes",
             "8x64,16x128", "--op", "fwd,bwd", "--mode", "hot", "-P", "2", "--seed", "11",
             *timing(runs=3, warmup_s=0.01, target_run_s=0.002), "-q", "--no-csv", "--json", out)
    return out


def _aggregate(path: Path) -> list[dict]:
    rows = load_result(path).rows
    return rows[rows["row_kind"] == "aggregate"].to_dict("records")


def _name(row: dict) -> str:
    return NAMES[row["op"]] + ("" if row["backend"] == "flydsl" else f"@{row['backend']}")


def _planted(perf_json: Path, tmp: Path) -> tuple[Path, tuple[str, ...]]:
    """NEW: BASE with its first timed torch case 3 % slower in TB/s."""
    planted, key = plant_slowdown(json.loads(perf_json.read_text()), SLOWER_3PCT)
    path = tmp / "new.json"
    path.write_text(json.dumps(planted))
    return path, key


def test_the_table_goes_through_flydsl_s_csv_and_compare_scripts(perf_json: Path, tmp_path: Path) -> None:
    """Every case a CSV row (ok with its value, missing with `-`), under FlyDSL's names; a planted 3 % slowdown is
    about −3 % in compare_benchmark.py, the other cases 0 %."""
    new, key = _planted(perf_json, tmp_path)
    for name, path in (("base", perf_json), ("new", new)):
        (tmp_path / f"{name}.log").write_text(_lnbench("flydsl-table", path))
        _run(SCRIPTS / "benchmark_output_to_csv.py", tmp_path / f"{name}.log", tmp_path / f"{name}.csv")
    csv_rows = (tmp_path / "base.csv").read_text().splitlines()
    agg = _aggregate(perf_json)
    assert len(csv_rows) == 1 + len(agg) == 1 + 24
    cells = [line.split(",") for line in csv_rows[1:]]
    assert [(c[0], c[1], c[2]) for c in cells] == [(_name(r), r["shape"], r["dtype"]) for r in agg]
    assert [c[5] for c in cells] == ["ok" if r["status"] == "ok" else "missing" for r in agg]
    for c, r in zip(cells, agg):
        assert c[3] == "-" if r["status"] != "ok" else float(c[3]) == pytest.approx(r["gbps"] / 1000, rel=1e-3)
    report = _run(SCRIPTS / "compare_benchmark.py", tmp_path / "base.csv", tmp_path / "new.csv",
                  "--baseline-label", "main")
    changes = {tuple(line.split()[:3]): float(line.split("(")[-1].rstrip("%)")) for line in report.splitlines()
               if "ratio=" in line}
    planted = (_name(dict(zip(("backend", "op"), key[:2]))), key[3], key[2])
    assert len(changes) == 12 and changes[planted] == pytest.approx(-3.0, abs=0.15)
    assert all(abs(pct) < 0.15 for k, pct in changes.items() if k != planted)


def test_the_table_and_compare_block_go_through_flydsl_s_dashboard_parser(perf_json: Path, tmp_path: Path) -> None:
    """One record per case (the not-measured ones too, as `missing`), op, shape, dtype and value as printed; the
    compare block gives each timed case vs_main from lnbench's paired ratio and the planted 3 % slowdown FlyDSL's
    regression flag; --flydsl-table FILE writes the same block; --flydsl-label TAG gives vs_tag."""
    new, key = _planted(perf_json, tmp_path)
    table = _lnbench("flydsl-table", new)
    block = _lnbench("compare", perf_json, new, "--no-csv", "-q", "--flydsl-table", tmp_path / "block.txt")
    assert (tmp_path / "block.txt").read_text() in block
    tagged = _lnbench("compare", perf_json, new, "--no-csv", "-q", "--flydsl-table", "--flydsl-label", "v0.2.0")
    log = tmp_path / "job.log"
    log.write_text("".join(PREFIX + line + "\n" for line in (table + block + tagged).splitlines()))
    _run(INGEST / "parse_bench.py", log, "--runner", "linux-flydsl-mi355-1", "--out", tmp_path / "recs.json")
    records = json.loads((tmp_path / "recs.json").read_text())
    agg = _aggregate(new)
    assert [(r["op"], r["shape"], r["dtype"]) for r in records] == [(_name(a), a["shape"], a["dtype"]) for a in agg]
    printed = {tuple(line.split()[:3]): line.split()[3] for line in table.splitlines()[3:] if line.strip()}
    for rec, row in zip(records, agg):
        cell = printed[(rec["op"], rec["shape"], rec["dtype"])]
        if row["status"] != "ok":
            assert (cell, rec["value"], rec["status"], rec["vs_main"]) == ("-", None, "missing", None)
            continue
        assert rec["value"] == float(cell) == pytest.approx(row["gbps"] / 1000, rel=1e-3) and rec["value"] > 0
        is_planted = (row["backend"], row["op"], row["dtype"], row["shape"], row["mode"]) == key
        assert rec["vs_main"]["delta_pct"] == (-3.0 if is_planted else 0.0)
        assert rec["regression"] is is_planted
        assert rec["vs_tag"]["tag"] == "v0.2.0" and rec["vs_tag"]["delta_pct"] == rec["vs_main"]["delta_pct"]


def test_a_bad_label_and_a_modelled_pair_are_refused_in_one_line(perf_json: Path) -> None:
    bad = CliRunner().invoke(main, ["compare", str(perf_json), str(perf_json), "--flydsl-table",
                                    "--flydsl-label", "main branch", "--no-csv"])
    error_line(bad, "--flydsl-label")
    light = DATA / "profile-v1" / "light.json"
    modelled = CliRunner().invoke(main, ["compare", str(light), str(light), "--flydsl-table", "--no-csv"])
    error_line(modelled, "--flydsl-table", "modelled")


def test_an_emulated_run_is_one_row_per_case_and_never_a_value(tmp_path: Path) -> None:
    """A `perf --device emu` profile: every case × mode a row of `-` (modelled floors are not measurements),
    through all three scripts; stderr says why."""
    light = DATA / "profile-v1" / "light.json"
    result = CliRunner().invoke(main, ["flydsl-table", str(light)])
    assert result.exit_code == 0 and "not measured" in result.stderr and "emulated" in result.stderr
    (tmp_path / "emu.log").write_text(result.stdout)
    rows = load_result(light).rows
    cases = {(r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]) for r in rows.to_dict("records")}
    _run(SCRIPTS / "benchmark_output_to_csv.py", tmp_path / "emu.log", tmp_path / "emu.csv")
    lines = (tmp_path / "emu.csv").read_text().splitlines()[1:]
    assert len(lines) == len(cases) and all(line.endswith(",-,-,missing") for line in lines)
    assert "No comparable" in _run(SCRIPTS / "compare_benchmark.py", tmp_path / "emu.csv", tmp_path / "emu.csv")
    records = json.loads(_run(INGEST / "parse_bench.py", tmp_path / "emu.log", "--runner", "linux-flydsl-mi325-1"))
    assert len(records) == len(cases) and all(r["value"] is None for r in records)
    assert {(r["op"].split("@")[1], r["shape"], r["dtype"]) for r in records} == {(c[0], c[3], c[2]) for c in cases}


def test_values_keep_4_significant_digits_in_plain_fixed_point() -> None:
    """0.1377 GB/s is not 0.000 TB/s; a 1 % change shows at every magnitude; never an exponent."""
    assert number(0.1377 / 1000) == "0.0001377" and number(3.9384) == "3.938" and number(12.34567) == "12.346"
    for value in (3.1e-8, 2.7e-5, 0.1377, 4.2, 987.6):
        assert number(value) != number(value * 1.01) and "e" not in number(value)


# --- FlyDSL's ingest → history.json → lnbench store → history ------------------------------------------------

_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import ingest
fake = json.load(open(sys.argv[2]))
def gh(path, paginate=False):
    for prefix, answer in fake["gh"]:
        if path.startswith(prefix):
            return answer
    raise RuntimeError("no fake answer for " + path)
ingest.gh = gh
ingest.gh_text = lambda path: fake["logs"][path]
raise SystemExit(ingest.main(sys.argv[3:]))
'''


def _fake_github(log_text: str, n_push: int = 6) -> dict:
    """GitHub's answers for `n_push` pushes to main and one pull request (#77), each with one benchmark job on
    two runners whose log is `log_text`; the newest run the latest."""
    now = datetime.now(timezone.utc)
    runs, gh, logs = [], [], {}
    for i in range(n_push + 1):
        pr = i == n_push
        run_id = 500 + i
        runs.append({"id": run_id, "head_sha": f"c{i:039d}", "event": "pull_request" if pr else "push",
                     "head_branch": "feat" if pr else "main", "pull_requests": [{"number": 77}] if pr else [],
                     "updated_at": (now - timedelta(hours=10 - i)).strftime("%Y-%m-%dT%H:%M:%SZ")})
        jobs = []
        for j, runner in enumerate(("linux-flydsl-mi355-1", "linux-flydsl-mi325-1")):
            job_id = run_id * 10 + j
            jobs.append({"id": job_id, "name": f"test ({runner})", "status": "completed", "conclusion": "success",
                         "completed_at": (now - timedelta(hours=10 - i)).strftime("%Y-%m-%dT%H:%M:%SZ")})
            logs[f"repos/ROCm/FlyDSL/actions/jobs/{job_id}/logs"] = log_text
        gh.append([f"repos/ROCm/FlyDSL/actions/runs/{run_id}/jobs", [{"jobs": jobs}]])
    gh.append(["repos/ROCm/FlyDSL/actions/workflows/", {"workflow_runs": runs[::-1]}])
    return {"gh": gh, "logs": logs}


def test_flydsl_s_ingest_history_goes_into_the_store_with_nothing_lost(perf_json: Path, tmp_path: Path) -> None:
    """ingest.py's history.json (pushes to main and a pull request, two runners) → `lnbench store`: every record a
    point whose run and detail hold all its fields; `history --branch main` lists every series; FlyDSL's flags read
    back with flag_text / flag_fields."""
    new, key = _planted(perf_json, tmp_path)
    log = _lnbench("flydsl-table", new) + _lnbench("compare", perf_json, new, "--no-csv", "-q", "--flydsl-table")
    (tmp_path / "fake.json").write_text(json.dumps(_fake_github("".join(PREFIX + x + "\n" for x in log.splitlines()))))
    (tmp_path / "driver.py").write_text(_DRIVER)
    _run(tmp_path / "driver.py", INGEST, tmp_path / "fake.json", "--out-dir", tmp_path / "dash")
    records = json.loads((tmp_path / "dash" / "history.json").read_text())["records"]
    assert len(records) == 7 * 2 * 24 and any(r["regression"] for r in records)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    _lnbench("store", tmp_path / "dash" / "history.json", "--store", url)
    _check_points(records, url)
    _lnbench("history", "--store", url, "--branch", "main", "--kind", "flydsl", "--json", tmp_path / "h.json")
    series = json.loads((tmp_path / "h.json").read_text())["series"]
    main_series = {(r["runner"], r["op"], r["shape"], r["dtype"], r["metric"]) for r in records if r["pr"] is None}
    assert len(series) == len(main_series) == 2 * 24 and all(s["runs"] == 6 for s in series)


def _check_points(records: list[dict], url: str) -> None:
    """Every record is one point: value, status and series as FlyDSL wrote them, its run's commit, time, machine and
    branch (main, or pr-77), and every other field in detail."""
    import sqlalchemy as sa

    from lnbench.store import schema as S
    from lnbench.store.db import open_store

    store = open_store(url)
    try:
        with store.engine.connect() as conn:
            got = conn.execute(sa.select(S.points.c.value, S.points.c.status, S.points.c.detail, S.series.c.op,
                                         S.series.c.shape, S.series.c.dtype, S.series.c.unit, S.runs.c.commit,
                                         S.runs.c.timestamp, S.runs.c.machine, S.runs.c.branch, S.runs.c.device)
                               .join(S.series, S.series.c.id == S.points.c.series_id)
                               .join(S.runs, S.runs.c.id == S.points.c.run_id)).all()
    finally:
        store.close()
    stored = {(r.commit, r.machine.split()[0], r.op, r.shape, r.dtype, r.unit): r for r in got}
    assert len(stored) == len(records)
    for rec in records:
        point = stored[(rec["commit"], rec["runner"], rec["op"], rec["shape"], rec["dtype"], rec["metric"])]
        assert (point.value, point.status, point.timestamp, point.device) == (rec["value"], rec["status"], rec["ts"],
                                                                              rec["arch"])
        assert point.branch == ("main" if rec["pr"] is None else f"pr-{rec['pr']}")
        detail = json.loads(point.detail)
        assert {k: detail[k] for k in ("vs_main", "vs_tag", "regression", "extra", "source", "pr")} == \
            {k: rec[k] for k in ("vs_main", "vs_tag", "regression", "extra", "source", "pr")}
        fields = flydsl.flag_fields(point.detail)
        assert fields["flydsl_regression"] is rec["regression"]
        assert fields["flydsl_vs_main_pct"] == (rec["vs_main"] or {}).get("delta_pct")
        assert ("regression" in flydsl.flag_text(point.detail)) is rec["regression"]


def test_flag_text_and_fields_of_a_point_s_detail() -> None:
    """The history's contract: FlyDSL's own flags of one point, "" / None for lnbench's own points and old stores."""
    regression = flydsl.detail_of({"op": "softmax", "value": 3.9, "regression": True, "source": "ci",
                                   "vs_main": {"label": "main", "baseline": 4.2, "ratio": 0.922, "delta_pct": -7.8},
                                   "vs_tag": {"tag": "v0.2.0", "baseline": 3.0, "ratio": 1.3, "delta_pct": 30.0}})
    assert flydsl.flag_text(regression) == "FlyDSL: regression -7.8% vs main, +30.0% vs v0.2.0"
    assert flydsl.flag_fields(regression) == {"flydsl_regression": True, "flydsl_vs_main_pct": -7.8,
                                              "flydsl_vs_tag_pct": 30.0}
    fine = flydsl.detail_of({"regression": False, "vs_main": {"label": "main~1", "delta_pct": 1.2}, "vs_tag": None})
    assert flydsl.flag_text(fine) == "FlyDSL: +1.2% vs main~1"
    assert flydsl.flag_fields(fine)["flydsl_vs_tag_pct"] is None
    none = {"flydsl_regression": None, "flydsl_vs_main_pct": None, "flydsl_vs_tag_pct": None}
    for detail in ("", "worker 0 noisy: run spread 49.8%", "[1, 2]", '{"source": "ci"}'):
        assert flydsl.flag_text(detail) == "" and flydsl.flag_fields(detail) == none
    assert flydsl.flag_text(flydsl.detail_of({"regression": True})) == "FlyDSL: regression"
    assert flydsl.detail_of({"op": "x", "run_id": 1, "runner": "r"}) == ""


def test_flydsl_s_own_tests_of_its_parser_and_ingest_pass_here(tmp_path: Path) -> None:
    """FlyDSL's test_parse_bench.py and test_ingest.py, on a copy of the folder (pytest writes beside them)."""
    copy = tmp_path / "flydsl-ci"
    shutil.copytree(FLYDSL_CI, copy)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(copy / ".github" / "dashboard" / "ingest")], capture_output=True, text=True,
                          cwd=copy, timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0 and " passed" in done.stdout and "failed" not in done.stdout, done.stdout + done.stderr
