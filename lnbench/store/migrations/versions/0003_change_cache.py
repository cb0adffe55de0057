"""A cache of the change points `lnbench history` found, so a long history is searched once per new run.

Revision ID: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("change_cache", sa.Column("key", sa.String(64), primary_key=True),
                    sa.Column("result", sa.Text, nullable=False))


def downgrade() -> None:
    op.drop_table("change_cache")
