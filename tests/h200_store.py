"""A results store shaped like the NVIDIA H200 one of issue 40, built from fixed seeds: 336 verify series of one
run (all PASS), 20 abi-compare series whose points have no value, and 16 perf series of 15 runs with 1% noise,
one of which (PLANTED) is 5% slower from the run at commit STEP_COMMIT on."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from lnbench.results import load_result
from lnbench.store.db import open_store
from lnbench.store.record import record

DATA = Path(__file__).parent / "data" / "results-v1"
RUNS = 15
STEP_AT = 8                                         # the first slower run
BACKENDS, OPS, MODES, SHAPES = ("torch", "liger"), ("fwd", "bwd"), ("hot", "cold"), ("4096x4096", "8192x8192")
#: the perf series with the +5% step: backend, op, dtype, shape, mode
PLANTED = ("liger", "bwd", "bf16", "8192x8192", "cold")
MACHINE = {"device_name": "NVIDIA H200", "device_arch": "sm_90", "driver": "570.86.15", "device": "cuda:0"}


def commit_of(i: int) -> str:
    """The commit of perf run `i` (7 hex digits, like git's)."""
    return hashlib.sha1(f"run {i}".encode()).hexdigest()[:7]


STEP_COMMIT = commit_of(STEP_AT)


def _day(i: int) -> str:
    return f"2026-11-{i + 1:02d}T03:00:00+00:00"


def _perf_rows(template: dict, rng: np.random.Generator, i: int) -> pd.DataFrame:
    rows = []
    for b, backend in enumerate(BACKENDS):
        for o, op in enumerate(OPS):
            for m, mode in enumerate(MODES):
                for s, shape in enumerate(SHAPES):
                    base = 20.0 * (1 + b * 0.3) * (1 + o) * (1 + 0.5 * m) * (4 if s else 1)
                    step = 1.05 if (backend, op, "bf16", shape, mode) == PLANTED and i >= STEP_AT else 1.0
                    median = base * step * (1 + rng.normal(0, 0.01))
                    low, high = np.abs(rng.normal(0, 0.003, 2))
                    workers = [median * (1 - low), median, median * (1 + high)]     # the median is the middle one
                    rows.append({**template, "backend": backend, "op": op, "dtype": "bf16", "shape": shape,
                                 "mode": mode, "median_us": median, "run_us": workers, "min_us": workers[0],
                                 "max_us": workers[-1], "kernel_us": None, "status": "ok", "detail": ""})
    return pd.DataFrame(rows)


def _verify_rows(template: dict) -> pd.DataFrame:
    rows = [{**template, "backend": backend, "dtype": dtype, "case": case, "shape": shape, "tensor": tensor,
             "max_abs_err": 0.001, "allowed": 0.01, "status": "PASS", "detail": ""}
            for backend in ("torch", "compile", "liger", "flydsl") for dtype in ("bf16", "f16", "f32")
            for case in ("randn", "large_mean") for shape in ("1x64", "8x64", "5x300", "64x1024", "256x4096",
                                                              "1024x8192", "4096x4096")
            for tensor in ("y", "dx")]
    return pd.DataFrame(rows)


def _abi_rows(template: dict) -> pd.DataFrame:
    rows = [{**template, "part": "runtime", "pair": "flydsl", "op": op, "dtype": dtype, "shape": shape,
             "metric": "direct", "speedup": None, "ci_low": None, "verdict": None,
             "status": "not run (no ROCm device)", "detail": ""}
            for op in ("fwd", "bwd") for dtype in ("bf16", "f16") for shape in ("8x64", "5x300", "64x1024",
                                                                                 "256x4096", "4096x4096")]
    return pd.DataFrame(rows)


def build(path: Path, seed: int = 40) -> str:
    """Write the store at `path` (SQLite); its URL."""
    url = f"sqlite:///{path}"
    store = open_store(url)
    rng = np.random.default_rng(seed)
    perf = load_result(DATA / "perf.json")
    template = perf.rows[perf.rows["row_kind"] == "aggregate"].iloc[0].to_dict()
    try:
        for i in range(RUNS):
            run = perf.run.with_(**MACHINE, git_commit=commit_of(i), timestamp=_day(i), load_flag="")
            record(store, perf.kind, perf.version, run, _perf_rows(template, rng, i))
        for name, rows_of in (("verify.json", _verify_rows), ("abi-null.json", _abi_rows)):
            result = load_result(DATA / name)
            run = result.run.with_(**MACHINE, git_commit=commit_of(RUNS - 1), timestamp=_day(RUNS))
            record(store, result.kind, result.version, run, rows_of(result.rows.iloc[0].to_dict()))
    finally:
        store.close()
    return url


if __name__ == "__main__":          # python tests/h200_store.py STORE.sqlite: the store of docs/img/report-h200.png
    import sys

    print(build(Path(sys.argv[1])))
