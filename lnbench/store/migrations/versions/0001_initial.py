"""The first schema: runs, series, points.

Revision ID: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Boolean, String, Text

from lnbench.store.migrations.columns import keyed, required

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "runs", *keyed("run_key"),
        *required(kind=String(32), schema_version=String(16), commit=String(64), dirty=Boolean,
                  branch=String(255), timestamp=String(32), machine=String(512), device=String(128),
                  protocol=Text, protocol_hash=String(16), lnbench_version=String(32), command_line=Text,
                  complete=Boolean, parts=Text),
    )
    op.create_index("ix_runs_timestamp", "runs", ["timestamp"])
    op.create_table(
        "series", *keyed("series_key"),
        *required(kind=String(32), backend=String(255), op=String(32), dtype=String(16), shape=String(64),
                  mode=String(64), case_name=String(255), machine=String(512), protocol_hash=String(16),
                  unit=String(32)),
    )
    op.create_table(
        "points",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("value", sa.Float),
        sa.Column("value2", sa.Float),
        sa.Column("values", Text),
        *required(status=String(64), detail=Text),
    )


def downgrade() -> None:
    op.drop_table("points")
    op.drop_table("series")
    op.drop_table("runs")
