"""Runs keep their up-front estimate and actual time (issue 57), so `history` can show how good the estimates are
per machine: estimate_s (the printed estimate, a range's geometric middle), estimate_range ('' for a point) and
actual_s (seconds from the estimate line to the end). Nullable: runs recorded before, and kinds without an
estimate, have none.

Revision ID: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("estimate_s", sa.Float, nullable=True))
        batch.add_column(sa.Column("estimate_range", sa.String(64), nullable=True))
        batch.add_column(sa.Column("actual_s", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("actual_s")
        batch.drop_column("estimate_range")
        batch.drop_column("estimate_s")
