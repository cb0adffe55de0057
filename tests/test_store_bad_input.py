"""Bad input to the results store loses nothing: a malformed or unreachable URL, a store of a newer schema, a
corrupt SQLite file, a result file of an unknown kind or cut short -> one line naming it, exit 2, nothing written;
a recording killed midway (SIGKILL at random points) leaves whole runs only."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from cli_helpers import error_line, invoke
from lnbench.store import schema as S
from lnbench.store.db import open_store

DATA = Path(__file__).parent / "data" / "results-v1"
ROOT = Path(__file__).resolve().parents[1]


def _store(tmp_path: Path, *args: str):
    return invoke("store", *args)


@pytest.mark.parametrize("url, says", [
    ("notaurl://", "notaurl"),
    ("postgresql+psycopg://nobody@/x?host=/nonexistent-socket-dir", "nonexistent-socket-dir"),
    ("sqlite:////nonexistent-folder/s.sqlite", "does not exist"),
])
def test_a_bad_store_url_is_one_line_and_exit_2(tmp_path: Path, url: str, says: str) -> None:
    error_line(_store(tmp_path, str(DATA / "perf.json"), "--store", url), says)


def test_a_corrupt_sqlite_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not an sqlite database" * 100)
    before = path.read_bytes()
    error_line(_store(tmp_path, str(DATA / "perf.json"), "--store", str(path)), str(path))
    assert path.read_bytes() == before


def test_a_store_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    open_store(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    engine.dispose()
    error_line(_store(tmp_path, str(DATA / "perf.json"), "--store", url), "newer than this lnbench knows")


def _runs(url: str) -> int:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(sa.select(sa.func.count()).select_from(S.runs)).scalar_one()
    engine.dispose()
    return n


@pytest.mark.parametrize("make", ["unknown kind", "cut short"])
def test_a_bad_result_file_writes_nothing(tmp_path: Path, make: str) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    open_store(url).close()
    bad = tmp_path / "bad.json"
    text = (DATA / "perf.json").read_text()
    bad.write_text(text.replace('"perf/1.0"', '"frobnicate/1.0"') if make == "unknown kind" else text[:len(text) // 2])
    error_line(_store(tmp_path, str(DATA / "verify.json"), str(bad), "--store", url), str(bad))
    assert _runs(url) == 0                      # the good file before it is not recorded either


def test_a_command_with_a_bad_store_stops_before_its_work(tmp_path: Path) -> None:
    out = invoke("compare", str(DATA / "perf.json"), str(DATA / "perf.json"),
                 "--csv", str(tmp_path / "c.csv"), "--store", "notaurl://")
    error_line(out, "notaurl")
    assert not (tmp_path / "c.csv").exists()


WRITER = """
import os, signal, sys
import sqlalchemy as sa
from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record
result = load_result(sys.argv[2])
store = open_store(sys.argv[1])
kill_at, points = int(sys.argv[3]), []

def point(*args):           # a statement about to run, or a transaction about to commit: killed at the chosen one
    points.append(1)
    if len(points) == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

sa.event.listen(store.engine, "before_cursor_execute", point)
sa.event.listen(store.engine, "commit", point)
print("ready", flush=True)
i = 0
while True:
    record(store, result.kind, result.version, result.run.with_(timestamp=f"t{i}"), result.rows)
    i += 1
"""


def test_a_recording_killed_at_random_points_leaves_whole_runs(tmp_path: Path) -> None:
    """Each writer is SIGKILLed at a random point of its work: before one of its statements (in the middle of a
    run's transaction, or before it begins) or before a commit, never before its first run is whole (a run is
    7 such points on SQLite). The store keeps whole runs only."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    points = 12                                  # verify.json's checks
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, url, str(DATA / "verify.json"),
                                 str(rng.randint(8, 40))], env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        assert proc.wait(timeout=300) == -signal.SIGKILL        # (the limit only ends a hung test)
        store = open_store(url)                  # still opens
        with store.engine.connect() as conn:
            per_run = conn.execute(sa.select(sa.func.count()).select_from(S.points)
                                   .group_by(S.points.c.run_id)).scalars().all()
            runs = conn.execute(sa.select(sa.func.count()).select_from(S.runs)).scalar_one()
        store.close()
        assert len(per_run) == runs and set(per_run) <= {points}
        assert runs >= round_ + 1                # each writer left at least its first run, whole


FULL = """
import resource, signal, sys
from lnbench.results import load_result
from lnbench.store.db import StoreError, open_store
from lnbench.store.record import record
result = load_result(sys.argv[2])
store = open_store(sys.argv[1])
rows = result.rows.loc[result.rows.index.repeat(400)].reset_index(drop=True)
rows["case"] = [f"case{i}" for i in range(len(rows))]          # 4800 points: more than the file may grow by
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import os
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(sys.argv[1].removeprefix("sqlite:///")) + 8192,) * 2)
try:
    record(store, result.kind, result.version, result.run.with_(timestamp="full"), rows)
except StoreError as exc:
    print("refused:", exc)
"""


def test_a_full_disk_during_recording_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """The store's file may not grow (RLIMIT_FSIZE: the disk is full for it): the run is refused with one line
    and the store holds exactly what it held."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    store = open_store(url)
    from lnbench.results import load_result
    from lnbench.store.record import record_result

    record_result(store, load_result(DATA / "perf.json"))
    store.close()
    out = subprocess.run([sys.executable, "-c", FULL, url, str(DATA / "verify.json")], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("refused:"), out.stdout + out.stderr
    assert "full" in out.stdout or "disk" in out.stdout or "large" in out.stdout, out.stdout
    assert _runs(url) == 1
