"""`--store [URL]` on the commands that write results: the store is opened (and migrated) when the command
reserves its outputs, before any work, so a bad store stops the run at once; the run is recorded when its
complete result files are written (cli_common.emit_outputs). $LNBENCH_STORE set records every such run too.

This module imports nothing heavy: SQLAlchemy is imported only when a store is asked for.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import click

from lnbench.errors import one_line

if TYPE_CHECKING:
    from lnbench.results.records import Cells

#: click context key: the --store value ("" = given without a URL)
STORE_KEY = "lnbench.store"
_OPEN: dict[str, Any] = {}          # "store": the open Store of this command, "failed": a recording failed


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.meta[STORE_KEY] = value
    return value


def store_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--store [URL]."""
    return click.option("--store", "store", is_flag=False, flag_value="", default=None, expose_value=False,
                        callback=_remember, metavar="[URL]",
                        help="Also record the run in a results store (lnbench history): an SQLAlchemy URL or an "
                             "SQLite path; without one $LNBENCH_STORE, the config's [store] url, else "
                             "results/lnbench.sqlite.")(func)


def requested() -> str | None:
    """The --store value of the running command ("" without a URL), "" when only $LNBENCH_STORE asks, or None."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and STORE_KEY in ctx.meta:
        return ctx.meta[STORE_KEY]
    return "" if os.environ.get("LNBENCH_STORE") else None


def prepare() -> None:
    """Open the asked-for store now (StoreError: one line, exit 2, before any work)."""
    given = requested()
    if given is None or "store" in _OPEN:
        return
    from lnbench.store.db import open_store
    from lnbench.store.url import store_url

    ctx = click.get_current_context(silent=True)
    config_path = ctx.params.get("config_path") if ctx is not None else None
    _OPEN["store"] = open_store(store_url(given, config_path))


def record(rows: Sequence[Cells], metadata: Any) -> str | None:
    """Record a command's complete result in the store prepared for it; the line to print, or None when no
    store was asked for. A failure is one error line and exit 2 at the end (the result files stay written)."""
    store = _OPEN.get("store")
    if store is None:
        return None
    from lnbench.store.db import StoreError
    from lnbench.store.record import record_rows

    try:
        done = record_rows(store, rows, metadata)
    except StoreError as exc:
        _OPEN["failed"] = str(exc)
        return None
    except Exception as exc:  # noqa: BLE001 - the result files are written: never lose the run to the store
        _OPEN["failed"] = f"store {store.url}: cannot record the run ({one_line(exc)})"
        return None
    what = "recorded" if done.new_run or done.new_points else "already recorded"
    return f"Run {what} in store {store.url} (run {done.run_id}, {done.new_points} new of {done.points} points)"


def failure() -> str | None:
    """Why recording failed in this command, or None."""
    return _OPEN.get("failed")


def reset() -> None:
    store = _OPEN.pop("store", None)
    if store is not None:
        store.close()
    _OPEN.pop("failed", None)
