"""What the migrations in versions/ share: the columns every keyed table starts with, NOT NULL columns declared by
name, and columns added to or dropped from an existing table. A helper changes no schema a migration produces: each
revision still writes out its own tables and columns (migrations are history; schema.py is the newest state)."""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op


def keyed(key: str) -> list[sa.Column]:
    """A table's surrogate id (integer primary key) and its identity: `key`, a unique 64-character hash."""
    return [sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column(key, sa.String(64), nullable=False, unique=True)]


def required(**types: Any) -> list[sa.Column]:
    """NOT NULL columns, name=type, in the order given."""
    return [sa.Column(name, kind, nullable=False) for name, kind in types.items()]


def add_columns(table: str, *columns: sa.Column) -> None:
    """Columns added to an existing table, in one batch (SQLite copies the table once)."""
    with op.batch_alter_table(table) as batch:
        for column in columns:
            batch.add_column(column)


def drop_columns(table: str, *names: str) -> None:
    """Columns dropped from an existing table, in one batch, in the order given."""
    with op.batch_alter_table(table) as batch:
        for name in names:
            batch.drop_column(name)
