"""Opening a store: connect, refuse what this lnbench cannot use, migrate to the newest schema.

Every failure is a StoreError (a usage error: one line naming the store, exit 2) raised before anything is
written: a malformed URL, a driver that is not installed, a server that does not answer, a file that is not an
SQLite database, a store whose schema is newer than this lnbench's migrations.

SQLite stores run in WAL mode with a busy timeout, and every write transaction starts with BEGIN IMMEDIATE, so
parallel writers queue instead of failing; migrations are serialised by a lock file next to the database
(PostgreSQL: an advisory lock in the migration's own transaction, its DDL being transactional).
"""
from __future__ import annotations

import contextlib
import fcntl
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from lnbench.errors import LnbenchUsageError

MIGRATIONS = Path(__file__).with_name("migrations")
#: the newest migration's revision (tests/test_store.py checks it against migrations/versions/): a store already at
#: it opens without importing alembic (a tenth of a second of `lnbench history`)
HEAD = "0004"
#: how long a writer waits for another's transaction, seconds
BUSY_TIMEOUT_S = 60
#: PostgreSQL advisory lock id of migrations ("lnbench" in ASCII, truncated)
_PG_LOCK = 0x6C6E62656E6368


class StoreError(LnbenchUsageError):
    """A store that cannot be used (one line naming it, exit 2)."""


@dataclass
class Store:
    """An open store: its URL (password hidden) and engine, migrated to the newest schema."""

    url: str
    engine: Engine

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction (SQLite: BEGIN IMMEDIATE); any error rolls it back whole, database errors
        re-raised as StoreError."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store {self.url}: {_reason(exc)}") from None

    def close(self) -> None:
        self.engine.dispose()


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _sqlite_path(url: sa.URL) -> Path | None:
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
        else None


def engine_for(text: str) -> tuple[Engine, sa.URL]:
    """An engine for URL `text` (StoreError for a malformed URL or a missing driver); SQLite files are made
    WAL, with a busy timeout and BEGIN IMMEDIATE transactions."""
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise StoreError(f"malformed store URL {text!r} (expected e.g. sqlite:///results/lnbench.sqlite or "
                         f"postgresql+psycopg://user@host/db)") from None
    safe = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("psycopg2", "default"):
        url = url.set(drivername="postgresql+psycopg")      # the driver of the store-pg extra
    path = _sqlite_path(url)
    if path is not None and not path.parent.is_dir():
        raise StoreError(f"store {safe}: folder {path.parent} does not exist")
    if path is not None and path.is_dir():
        raise StoreError(f"store {safe}: {path} is a directory")
    try:
        kwargs = {"connect_args": {"timeout": BUSY_TIMEOUT_S, "isolation_level": None}} if path else \
            {"connect_args": {"connect_timeout": 10}} if url.get_backend_name() == "postgresql" else {}
        engine = sa.create_engine(url, **kwargs)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        hint = " (pip install 'lnbench[store-pg]')" if url.get_backend_name() == "postgresql" else ""
        raise StoreError(f"store {safe}: {_reason(exc)}{hint}") from None
    if url.get_backend_name() == "sqlite":
        _sqlite_pragmas(engine)
    return engine, url


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:      # noqa: ANN001 - DBAPI objects
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:                        # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _alembic_config(conn: Connection):              # noqa: ANN202 - alembic's Config
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    config = _alembic_config(None)  # type: ignore[arg-type]
    return ScriptDirectory.from_config(config).get_current_head() or ""


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(_alembic_config(None)).walk_revisions()}  # type: ignore[arg-type]


def current_revision(conn: Connection) -> str | None:
    """The store's schema revision (alembic's version table, read without alembic); None for a new store."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


@contextlib.contextmanager
def _migration_lock(engine: Engine, url: sa.URL) -> Iterator[None]:
    path = _sqlite_path(url)
    if path is None:
        yield
        return
    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def migrate(engine: Engine, url: sa.URL, safe: str, target: str = "head") -> None:
    """Bring the store to `target` (StoreError for a store of a newer schema than this lnbench knows)."""
    with _migration_lock(engine, url):
        with engine.connect() as conn:
            found = current_revision(conn)
        if found == HEAD and target == "head":
            return
        from alembic import command

        if found is not None and found not in known_revisions():
            raise StoreError(f"store {safe} has schema revision {found}, newer than this lnbench knows "
                             f"(newest {head_revision()}): upgrade lnbench")
        with engine.begin() as conn:
            if url.get_backend_name() == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK})")
            command.upgrade(_alembic_config(conn), target)


def open_store(text: str, migrate_to: str = "head") -> Store:
    """The store at URL `text`, migrated to the newest schema (module docstring for what fails)."""
    engine, url = engine_for(text)
    safe = url.render_as_string(hide_password=True)
    try:
        migrate(engine, url, safe, migrate_to)
    except StoreError:
        engine.dispose()
        raise
    except (sa.exc.SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise StoreError(f"store {safe}: {_reason(exc)}") from None
    return Store(safe, engine)
