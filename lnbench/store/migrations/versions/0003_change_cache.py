"""A cache of the change points `lnbench history` found, so a long history is searched once per new run.

Revision ID: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from lnbench.store.migrations.columns import required

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table("change_cache", sa.Column("key", sa.String(64), primary_key=True), *required(result=sa.Text))


def downgrade() -> None:
    op.drop_table("change_cache")
