"""Runs say whether the machine was busy (`load_flag`, for `history --exclude-loaded`); points are read by
series (an index for history).

Revision ID: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from lnbench.store.migrations.columns import add_columns, drop_columns

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    add_columns("runs", sa.Column("load_flag", sa.String(255), nullable=False, server_default=""))
    op.create_index("ix_points_series_run", "points", ["series_id", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_points_series_run", "points")
    drop_columns("runs", "load_flag")
