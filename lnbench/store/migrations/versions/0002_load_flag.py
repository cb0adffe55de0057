"""Runs say whether the machine was busy (`load_flag`, for `history --exclude-loaded`); points are read by
series (an index for history).

Revision ID: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("load_flag", sa.String(255), nullable=False, server_default=""))
    op.create_index("ix_points_series_run", "points", ["series_id", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_points_series_run", "points")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("load_flag")
