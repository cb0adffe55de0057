"""The results store (lnbench.store): recording every kind, idempotence, shard parts as one run, parallel
writers (real processes), the commands' --store, the statements a recording takes, and migrations from the first
schema; on SQLite and on a real PostgreSQL server (tests/store_fixtures.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from lnbench.results import load_result
from lnbench.store import schema as S
from lnbench.store.db import head_revision, open_store
from lnbench.store.record import record, record_result
from cli_helpers import invoke
from store_fixtures import pg_server, store_url  # noqa: F401 - fixtures

DATA = Path(__file__).parent / "data" / "results-v1"
PROFILES = Path(__file__).parent / "data" / "profile-v1"
ROOT = Path(__file__).resolve().parents[1]
ALL = sorted(DATA.glob("*.json")) + sorted(DATA.glob("*.csv"))


def counts(url: str) -> tuple[int, int, int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        out = tuple(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                    for t in (S.runs, S.series, S.points))
    engine.dispose()
    return out  # type: ignore[return-value]


def test_every_kind_is_recorded_once_however_often_it_is_stored(store_url: str) -> None:
    store = open_store(store_url)
    first = [record_result(store, load_result(path)) for path in ALL]
    after_first = counts(store_url)
    again = [record_result(store, load_result(path)) for path in ALL]
    store.close()
    assert counts(store_url) == after_first
    assert all(r.points > 0 for r in first)
    assert not any(r.new_run or r.new_points for r in again)
    # a run's CSV and JSON are one run: 7 JSON results (merge-perf has no CSV), each CSV adds nothing new
    assert after_first[0] == 7
    kinds = {load_result(p).kind for p in ALL}
    assert kinds == {"verify", "selftest", "perf", "abi-compare", "inspect", "compare"}


def test_the_values_of_a_perf_run_are_its_aggregate_medians(store_url: str) -> None:
    result = load_result(DATA / "perf.json")
    store = open_store(store_url)
    record_result(store, result)
    with store.engine.connect() as conn:
        got = sorted(conn.execute(sa.select(S.series.c.backend, S.series.c.shape, S.points.c.value)
                                  .join(S.points, S.points.c.series_id == S.series.c.id)).all())
    store.close()
    agg = result.rows[result.rows["row_kind"] == "aggregate"]
    assert got == sorted(zip(agg["backend"], agg["shape"], agg["median_us"].astype(float)))


def _series(url: str) -> list[tuple]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(S.series.c.kind, S.series.c.backend, S.series.c.op, S.series.c.mode,
                                      S.series.c.case_name, S.series.c.unit, S.points.c.value, S.points.c.detail)
                            .join(S.points, S.points.c.series_id == S.series.c.id)).all()
    engine.dispose()
    return sorted(tuple(r) for r in rows)


def test_an_emulated_profile_is_recorded_as_modelled_series_never_measured_ones(store_url: str) -> None:
    """perf --device emu's file (the profile kind): a series per launch x target x mode, its value bound_us,
    labelled modelled (kind profile, unit `modelled us`); its CSV and JSON are one run; a measured perf run of the
    same cases has series of its own; floors under other target figures are other series (their protocol)."""
    light = load_result(PROFILES / "light.json")
    store = open_store(store_url)
    first = record_result(store, light)
    again = record_result(store, load_result(PROFILES / "light.csv"))
    assert first.new_run and first.points == len(light.rows) == 8 and not again.new_run and not again.new_points
    series = _series(store_url)
    assert {s[0] for s in series} == {"profile"} and {s[5] for s in series} == {"modelled us"}
    assert sorted(s[6] for s in series) == pytest.approx(sorted(light.rows["bound_us"]), rel=1e-11)
    assert {s[4] for s in series} == {f"test_ln_{op}_0/{t}/gfx942" for op in ("fwd", "bwd")
                                      for t in ("MI300X", "MI325X")}
    assert all(s[7].startswith("bound by issue_valu; code ") for s in series)
    record_result(store, load_result(DATA / "perf.json"))            # measured: its own series, kind perf
    assert {(s[0], s[5]) for s in _series(store_url)} == {("profile", "modelled us"), ("perf", "us")}
    figures = json.loads(json.dumps(light.run.value("targets")))
    figures["MI300X"]["hbm_gbps"] = 1.0
    record(store, light.kind, light.version, light.run.with_(targets=figures), light.rows)
    store.close()
    assert counts(store_url)[1] == 8 + 2 + 8


def test_a_compare_of_modelled_floors_is_its_own_series_per_launch_and_target(tmp_path: Path) -> None:
    """compare on two profiles writes a row per launch x target x mode: each is recorded (not the first row of a
    case only), labelled modelled, apart from a measured compare of the same case."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    out = invoke("compare", str(PROFILES / "light.json"), str(PROFILES / "heavy.json"),
                 "--no-csv", "--json", str(tmp_path / "c.json"), "--store", url)
    assert out.exit_code == 0, out.output
    series = _series(url)
    assert len(series) == 8 and {s[5] for s in series} == {"modelled ratio"}
    assert {s[4] for s in series if s[2] == "fwd"} == {"test_ln_fwd_0/MI300X/modelled", "test_ln_fwd_0/MI325X/modelled"}
    assert {round(s[6], 4) for s in series if s[2] == "fwd"} == {round(0.08 / 0.072380952380952, 4)}


def test_shard_parts_of_one_run_are_one_run(store_url: str) -> None:
    result = load_result(DATA / "verify.json")
    half = len(result.rows) // 2
    store = open_store(store_url)
    a = record(store, result.kind, result.version,
               result.run.with_(shard="1/2", shard_total_cases=4, timestamp="2026-01-01T00:00:00+00:00",
                                command_line="lnbench verify --shard 1/2"), result.rows.iloc[:half])
    b = record(store, result.kind, result.version,
               result.run.with_(shard="2/2", shard_total_cases=4, timestamp="2026-01-01T00:05:00+00:00",
                                command_line="lnbench verify --shard 2/2"), result.rows.iloc[half:])
    with store.engine.connect() as conn:
        parts, when = conn.execute(sa.select(S.runs.c.parts, S.runs.c.timestamp)).one()
    store.close()
    assert a.run_id == b.run_id and counts(store_url)[0] == 1
    assert parts == '["1/2", "2/2"]' and when.startswith("2026-01-01T00:00:00")
    assert a.new_points + b.new_points == a.points + b.points


def test_repeated_runs_at_one_commit_are_separate_runs(store_url: str) -> None:
    result = load_result(DATA / "perf.json")
    store = open_store(store_url)
    for minute in range(3):
        record(store, result.kind, result.version, result.run.with_(timestamp=f"2026-01-01T00:0{minute}:00+00:00"),
               result.rows)
    store.close()
    assert counts(store_url)[0] == 3 and counts(store_url)[1] == 2


WRITER = """
import sys
from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record
url, who, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
result = load_result(sys.argv[4])
store = open_store(url)
for i in range(n):
    record(store, result.kind, result.version, result.run.with_(timestamp=f"2026-02-{who + 1:02d}T00:00:{i:02d}"),
           result.rows)
"""


def test_parallel_writers_lose_nothing(store_url: str) -> None:
    """Four real processes create (migrate) and write one store at once: every run is there, whole."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(w), "5", str(DATA / "verify.json")],
                              env=env, stderr=subprocess.PIPE, text=True) for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    points = len(load_result(DATA / "verify.json").rows)
    assert counts(store_url) == (20, points, 20 * points)


def test_recording_a_run_is_a_few_statements_however_many_rows(store_url: str) -> None:
    """What keeps recording fast, counted rather than timed: a run's points and series go in a statement per
    chunk, not one per row, so a run of 40 times the rows takes as many statements as the small one."""
    result = load_result(DATA / "verify.json")
    many = result.rows.loc[result.rows.index.repeat(40)].reset_index(drop=True)
    many["case"] = [f"case{i}" for i in range(len(many))]          # every row its own series
    store = open_store(store_url)
    record_result(store, result)                  # the first run: a new store's own first statements
    statements: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    counts: list[int] = []
    recorded = []
    for i, rows in enumerate((result.rows, many)):
        statements.clear()
        recorded.append(record(store, result.kind, result.version,
                               result.run.with_(timestamp=f"2026-03-01T00:00:0{i}"), rows))
        counts.append(len(statements))
    store.close()
    assert [r.new_points for r in recorded] == [len(result.rows), len(many)] and len(many) > 400
    assert counts[0] == counts[1] and counts[0] <= 8, (counts, statements)


def _old_store_with_a_run(store_url: str, revision: str, lacks: str) -> None:
    """A store migrated only to `revision` (without the column `lacks`) holding one perf run, closed."""
    old = open_store(store_url, migrate_to=revision)
    with old.engine.begin() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        assert lacks not in columns
        extra = ", load_flag" if "load_flag" in columns else ""
        conn.exec_driver_sql(
            "INSERT INTO runs (run_key, kind, schema_version, \"commit\", dirty, branch, timestamp, machine, device, "
            f"protocol, protocol_hash, lnbench_version, command_line, complete, parts{extra}) VALUES ('k', 'perf', "
            "'1.0', 'abc', false, 'main', '2025-01-01', 'm', 'cpu', '{}', 'p', '0.1.0', 'lnbench perf', true, '[]'"
            + (", ''" if extra else "") + ")")
    old.close()


def test_a_store_of_the_first_schema_is_migrated_forward_with_its_runs(store_url: str) -> None:
    _old_store_with_a_run(store_url, "0001", "load_flag")
    store = open_store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(S.runs.c.commit, S.runs.c.load_flag)).one() == ("abc", "")
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == head_revision()
    record_result(store, load_result(DATA / "perf.json"))
    store.close()
    assert counts(store_url)[0] == 2


def test_the_head_revision_opened_without_alembic_is_the_newest_migration() -> None:
    from lnbench.store.db import HEAD

    assert HEAD == head_revision()


def test_commands_record_their_run_with_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--store` on a command (compare, the cheapest to run) records the run when its files are written; again is
    one run; $LNBENCH_STORE alone records too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LNBENCH_STORE", raising=False)
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    args = ["compare", str(DATA / "perf.json"), str(DATA / "perf.json"), "--csv", str(tmp_path / "c.csv")]
    out = invoke(*args, "--store")
    assert out.exit_code == 0, out.output
    default = tmp_path / "results" / "lnbench.sqlite"
    assert "Run recorded in store" in out.output and default.is_file()
    assert counts(f"sqlite:///{default}")[0] == 1
    monkeypatch.setenv("LNBENCH_STORE", str(tmp_path / "env.sqlite"))
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    assert counts(f"sqlite:///{tmp_path / 'env.sqlite'}")[0] == 1


def test_lnbench_store_records_files(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    out = invoke("store", *map(str, ALL), "--store", url)
    assert out.exit_code == 0, out.output
    assert counts(url)[0] == 7
    out = invoke("store", str(DATA / "perf.json"), "--store", url)
    assert "already there" in out.output and counts(url)[0] == 7


def test_the_main_job_does_not_import_the_store() -> None:
    code = ("import sys, lnbench.cli_common, lnbench.verify.command; "
            "print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic', 'lnbench.store.db'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_store_failing_at_the_end_exits_2_with_the_result_files_kept(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The store opened before the work but refused the run at the end: one error line, exit 2, the CSV written."""
    import lnbench.store.record as rec
    from lnbench.store.db import StoreError

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise StoreError("store X: database is locked")

    monkeypatch.setattr(rec, "record_rows", refuse)
    monkeypatch.delenv("LNBENCH_STORE", raising=False)
    out = invoke("compare", str(DATA / "perf.json"), str(DATA / "perf.json"), "--csv",
                 str(tmp_path / "c.csv"), "--store", str(tmp_path / "s.sqlite"))
    assert out.exit_code == 2 and (tmp_path / "c.csv").is_file()
    errors = [line for line in out.output.splitlines() if line.startswith("lnbench: error:")]
    assert errors == ["lnbench: error: store X: database is locked (the run is not recorded; its result files are "
                      "written)"]


def test_a_store_that_fails_while_recording_keeps_the_files_and_records_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any failure while recording (here one planted in the points of the run) is one line, exit 2: the result
    files stay written and the store holds nothing of the run."""
    import lnbench.store.record as recording

    def broken(*args, **kwargs):
        raise ValueError("planted: a point that cannot be made")

    monkeypatch.delenv("LNBENCH_STORE", raising=False)
    monkeypatch.setattr(recording, "identity_and_points", broken)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    csv_path = tmp_path / "c.csv"
    out = invoke("compare", str(DATA / "perf.json"), str(DATA / "perf.json"), "--csv",
                 str(csv_path), "--store", url)
    assert out.exit_code == 2, out.output
    last = out.output.strip().splitlines()[-1]
    assert last == (f"lnbench: error: store {url}: cannot record the run (ValueError: planted: a point that cannot "
                    f"be made) (the run is not recorded; its result files are written)"), last
    assert len(load_result(csv_path).rows) > 0
    assert counts(url) == (0, 0, 0)


def test_a_store_at_0003_gains_the_estimate_columns_and_a_run_keeps_its_estimate(store_url: str) -> None:
    """Issue 57: migration 0004 adds estimate_s, estimate_range and actual_s to runs (a run recorded before has
    none); a result whose run record carries them is recorded with them, one without them with NULLs."""
    _old_store_with_a_run(store_url, "0003", "estimate_s")
    store = open_store(store_url)
    result = load_result(DATA / "verify.json")
    record(store, result.kind, result.version, result.run.with_(estimate_s=12.5, estimate_range="",
                                                                 actual_s=11.25), result.rows)
    ranged = load_result(DATA / "perf.json")
    record(store, ranged.kind, ranged.version, ranged.run.with_(estimate_s=40.0, estimate_range="20 s – 2 min",
                                                                 actual_s=48.5), ranged.rows)
    with store.engine.connect() as conn:
        got = conn.execute(sa.select(S.runs.c.kind, S.runs.c.estimate_s, S.runs.c.estimate_range, S.runs.c.actual_s)
                           .order_by(S.runs.c.id)).all()
    from lnbench.history.estimates import estimate_rows

    judged = {row["kind"]: row for row in estimate_rows(store)}         # the run recorded before has none
    store.close()
    assert [tuple(row) for row in got] == [("perf", None, None, None), ("verify", 12.5, "", 11.25),
                                           ("perf", 40.0, "20 s – 2 min", 48.5)]
    assert {k: (v["runs"], v["points"], v["within"], v["ranges"], v["inside"]) for k, v in judged.items()} == {
        "perf": (1, 0, 0, 1, 1), "verify": (1, 1, 1, 0, 0)}
    assert judged["verify"]["median"] == pytest.approx(12.5 / 11.25)
