"""The store's tables as the newest migration leaves them (queries are written against these; the migrations in
`migrations/versions/` create them).

    runs    one run: a command's result (its shard parts and --devices GPUs together), keyed by `run_key`
    series  one case on one machine under one protocol, keyed by `series_key`
    points  a series' values in one run (the headline value, worker values, status, ...)
    change_cache  change points history found before (a cache: dropping it loses nothing)
"""
from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_key", String(64), nullable=False, unique=True),      # identity hash: the same run twice is one
    Column("kind", String(32), nullable=False),                       # verify, perf, abi-compare, ...
    Column("schema_version", String(16), nullable=False),             # the result's schema (verify/1.0 -> 1.0)
    Column("commit", String(64), nullable=False),                     # lnbench checkout, without -dirty
    Column("dirty", Boolean, nullable=False),
    Column("branch", String(255), nullable=False),
    Column("timestamp", String(32), nullable=False),                  # UTC ISO 8601 (the earliest part's)
    Column("machine", String(512), nullable=False),                   # device name/model | driver | host CPU
    Column("device", String(128), nullable=False),
    Column("protocol", Text, nullable=False),                         # JSON of the run's protocol settings
    Column("protocol_hash", String(16), nullable=False),
    Column("lnbench_version", String(32), nullable=False),
    Column("command_line", Text, nullable=False),
    Column("complete", Boolean, nullable=False),
    Column("parts", Text, nullable=False),                            # JSON list of the shard parts recorded
    Column("load_flag", String(255), nullable=False, server_default=""),   # migration 0002
    Column("estimate_s", Float),                                      # migration 0004: the up-front estimate,
    Column("estimate_range", String(64)),                             # its range ('' for a point),
    Column("actual_s", Float),                                        # the seconds from it to the end
)

series = Table(
    "series", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("series_key", String(64), nullable=False, unique=True),
    Column("kind", String(32), nullable=False),
    Column("backend", String(255), nullable=False),
    Column("op", String(32), nullable=False),
    Column("dtype", String(16), nullable=False),
    Column("shape", String(64), nullable=False),
    Column("mode", String(64), nullable=False),                       # perf mode, abi metric, verify tensor, ...
    Column("case_name", String(255), nullable=False),                 # the rest of the case key
    Column("machine", String(512), nullable=False),
    Column("protocol_hash", String(16), nullable=False),
    Column("unit", String(32), nullable=False),                       # what `value` measures: us, ratio, ...
)

points = Table(
    "points", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("series_id", Integer, ForeignKey("series.id", ondelete="CASCADE"), primary_key=True),
    Column("value", Float),                 # the headline: perf median_us, abi speed-up, compare ratio, ...
    Column("value2", Float),                # the second value: perf kernel_us, verify allowed, compare ci
    Column("values", Text),                 # JSON list: perf worker medians
    Column("status", String(64), nullable=False),    # PASS/FAIL/error/ok/not run, ... or a compare verdict
    Column("detail", Text, nullable=False),
)

#: change points already found, by a hash of the series, the runs its values came from and the method's settings
#: (points never change once recorded, so the same key always has the same answer); migration 0003
change_cache = Table(
    "change_cache", metadata,
    Column("key", String(64), primary_key=True),
    Column("result", Text, nullable=False),        # JSON list of [index, size_pct, p]
)

Index("ix_points_series_run", points.c.series_id, points.c.run_id)     # migration 0002
Index("ix_runs_timestamp", runs.c.timestamp)
