"""The first schema: runs, series, points.

Revision ID: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_key", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("schema_version", sa.String(16), nullable=False),
        sa.Column("commit", sa.String(64), nullable=False),
        sa.Column("dirty", sa.Boolean, nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("timestamp", sa.String(32), nullable=False),
        sa.Column("machine", sa.String(512), nullable=False),
        sa.Column("device", sa.String(128), nullable=False),
        sa.Column("protocol", sa.Text, nullable=False),
        sa.Column("protocol_hash", sa.String(16), nullable=False),
        sa.Column("lnbench_version", sa.String(32), nullable=False),
        sa.Column("command_line", sa.Text, nullable=False),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.Column("parts", sa.Text, nullable=False),
    )
    op.create_index("ix_runs_timestamp", "runs", ["timestamp"])
    op.create_table(
        "series",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("series_key", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("backend", sa.String(255), nullable=False),
        sa.Column("op", sa.String(32), nullable=False),
        sa.Column("dtype", sa.String(16), nullable=False),
        sa.Column("shape", sa.String(64), nullable=False),
        sa.Column("mode", sa.String(64), nullable=False),
        sa.Column("case_name", sa.String(255), nullable=False),
        sa.Column("machine", sa.String(512), nullable=False),
        sa.Column("protocol_hash", sa.String(16), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
    )
    op.create_table(
        "points",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("value", sa.Float),
        sa.Column("value2", sa.Float),
        sa.Column("values", sa.Text),
        sa.Column("status", sa.String(64), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("points")
    op.drop_table("series")
    op.drop_table("runs")
