"""lnbench's results store: every run's results kept across runs and commits, in one SQL database (SQLite by
default, PostgreSQL for a team; any SQLAlchemy URL).

    url        which store: --store URL, $LNBENCH_STORE, config `[store] url`, else results/lnbench.sqlite
    schema     the tables (runs, series, points) as the newest migration leaves them (SQLAlchemy Core)
    migrations Alembic revisions: 0001 the first schema, then one file per change
    db         open a store: connect, refuse a newer schema or a corrupt file, migrate; one transaction per run
    identity   a run's identity (commit, dirty, branch, machine, protocol, version) and its key
    points     a result's rows as series (one case on one machine under one protocol) and their values
    record     record one result (a ResultFile, or a command's rows and run record) as one run, idempotently
    hook       `--store [URL]` on the commands that write results, and the call cli_common.emit_outputs makes

Nothing here is imported unless a store is used (`--store`, $LNBENCH_STORE, `lnbench store`, `lnbench history`):
the main job's start-up does not pay for SQLAlchemy.
"""
