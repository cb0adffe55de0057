"""A perf result as the benchmark table FlyDSL's CI prints and its dashboard ingest reads: a header
`op shape dtype TB/s TFLOPS` and one row per case in fixed-width columns (22, 34, 10, 10, 10 characters), TB/s at
the headline time (lnbench's GB/s / 1000), TFLOPS `-` (LayerNorm is memory-bound), `missing` for a case that did
not time. One formatter for `lnbench perf --flydsl-table` (after the run) and `lnbench flydsl-table FILE`."""
from __future__ import annotations

import pandas as pd

from lnbench.errors import LnbenchUsageError
from lnbench.results.records import missing

#: lnbench op -> FlyDSL's benchmark op name; dtype names as FlyDSL's table writes them
OPS = {"fwd": "layernorm", "bwd": "layernorm_bwd"}
DTYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


def _line(op: str, shape: str, dtype: str, tbps: str, tflops: str) -> str:
    return f"{op[:22]:<22} {shape[:34]:<34} {dtype[:10]:<10} {tbps:>10} {tflops:>10}\n"


def table_text(rows: pd.DataFrame, backend: str | None = None, source: str = "the run") -> str:
    """The table of perf `rows` (a frame of PerfRow cells): `backend`'s aggregate rows (default: flydsl if the
    rows have it, else the first backend), the first mode timed; a usage error naming `source` when `backend`
    has no rows."""
    agg = rows[rows["row_kind"] == "aggregate"]
    backends = list(dict.fromkeys(agg["backend"]))
    chosen = backend or ("flydsl" if "flydsl" in backends else backends[0] if backends else None)
    if chosen not in backends:
        raise LnbenchUsageError(f"{source} has no perf rows of backend {chosen!r} (it has {', '.join(backends)})")
    mine = agg[agg["backend"] == chosen]
    mode = mine["mode"].iloc[0]                  # one table a mode: the first the run timed
    out = ["\n", _line("op", "shape", "dtype", "TB/s", "TFLOPS")]
    for row in mine[mine["mode"] == mode].to_dict("records"):
        gbps = row.get("gbps")
        ok = row.get("status") == "ok" and not missing(gbps)
        out.append(_line(OPS.get(row["op"], row["op"]), row["shape"], DTYPES.get(row["dtype"], row["dtype"]),
                         f"{gbps / 1000:.3f}" if ok else "missing", "-"))
    return "".join(out)
