"""Alembic's entry for lnbench's store: migrations run on the connection lnbench.store.db hands over (never a
URL from a config file), inside the transaction that holds the store's migration lock."""
from __future__ import annotations

from alembic import context

from lnbench.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
