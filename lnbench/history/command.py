"""`lnbench store FILE...` and `lnbench history`: the click commands over the results store (lnbench.store)."""
from __future__ import annotations

from pathlib import Path

import click

from lnbench.cli_common import EXIT_OK, console, guarded
from lnbench.tables import Column, render_table

_STORE_HELP = ("The results store: an SQLAlchemy URL (sqlite:///PATH, postgresql+psycopg://user@host/db) or an "
               "SQLite path (default: $LNBENCH_STORE, the config's [store] url, else results/lnbench.sqlite).")
_CONFIG_HELP = "TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none)."


@click.command("store")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "url", help=_STORE_HELP)
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=_CONFIG_HELP)
@guarded
def store_command(files: tuple[Path, ...], url: str | None, config_path: Path | None) -> int:
    """Record result files (CSV or JSON of verify, perf, abi-compare, inspect, compare, merge) in the results
    store: each run once (the same run again adds nothing; the shard parts of one run are one run). Every file
    is read before anything is written: one that is not a whole lnbench result stops the command (exit 2)."""
    from lnbench.results import load_result
    from lnbench.store.db import open_store
    from lnbench.store.record import record_result
    from lnbench.store.url import store_url

    results = [load_result(path) for path in files]
    store = open_store(store_url(url, config_path))
    try:
        rows = []
        for result in results:
            done = record_result(store, result)
            rows.append({"file": str(result.path), "kind": result.kind, "run": done.run_id,
                         "recorded": "new run" if done.new_run else "new points" if done.new_points else "already there",
                         "points": f"{done.new_points}/{done.points}"})
    finally:
        store.close()
    render_table(console, f"Recorded in {store.url}", [Column("file", "file", justify="left"), Column("kind", "kind"),
                 Column("run", "run"), Column("recorded", "recorded"), Column("points", "new/points")], rows)
    return EXIT_OK
