"""Stores for the store tests: an SQLite file, and a real PostgreSQL server started for the session
(Debian's postgresql: initdb + pg_ctl in a temporary folder, a unix socket, run as an unprivileged user when the
tests run as root). `store_url` is parametrized over both; PostgreSQL skips, saying why, only when its binaries
are absent."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import pytest


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _as_user(user: str | None, argv: list[str]) -> list[str]:
    return ["runuser", "-u", user, "--", *argv] if user else argv


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server of this session: the socket folder URL base (postgresql+psycopg://USER@/?host=DIR)."""
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)")
    if shutil.which("runuser") is None and os.geteuid() == 0:
        pytest.skip("running as root without runuser: initdb refuses root")
    user = "nobody" if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="lnbench-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    os.chmod(base, 0o777)
    if user:
        ids = pwd.getpwnam(user)
        for path in (base, sock):
            os.chown(path, ids.pw_uid, ids.pw_gid)
    role = user or pwd.getpwuid(os.geteuid()).pw_name
    # UTF-8 whatever the host's locale: under LANG=C initdb makes an SQL_ASCII cluster, whose server answers
    # psycopg in bytes that SQLAlchemy's version check cannot read
    subprocess.run(_as_user(user, [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", role,
                                   "--no-sync", "--encoding=UTF8", "--no-locale"]), check=True, capture_output=True)
    subprocess.run(_as_user(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "start",
                                   "-o", f"-k {sock} -c listen_addresses='' -c fsync=off"]),
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://{role}@/{{db}}?host={sock}"
    finally:
        subprocess.run(_as_user(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def new_pg_database(server: str) -> str:
    """A fresh database on the session's server; its URL."""
    import sqlalchemy as sa

    name = f"t{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server.format(db="postgres"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return server.format(db=name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store: an SQLite file, or a fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return new_pg_database(request.getfixturevalue("pg_server"))
