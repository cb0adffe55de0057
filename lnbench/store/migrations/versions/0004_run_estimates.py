"""Runs keep their up-front estimate and actual time (issue 57), so `history` can show how good the estimates are
per machine: estimate_s (the printed estimate, a range's geometric middle), estimate_range ('' for a point) and
actual_s (seconds from the estimate line to the end). Nullable: runs recorded before, and kinds without an
estimate, have none.

Revision ID: 0004
"""
from __future__ import annotations

import sqlalchemy as sa

from lnbench.store.migrations.columns import add_columns, drop_columns

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    add_columns("runs", sa.Column("estimate_s", sa.Float, nullable=True),
                sa.Column("estimate_range", sa.String(64), nullable=True),
                sa.Column("actual_s", sa.Float, nullable=True))


def downgrade() -> None:
    drop_columns("runs", "actual_s", "estimate_range", "estimate_s")
