"""lnbench.store.points reads each kind's rows through its row record: every column it reads is a declared field
(a renamed column fails here, not as empty points), and each branch of each kind gives the point its cells say."""
from __future__ import annotations

import ast
import inspect
from typing import Any

import pandas as pd
import pytest

from lnbench.results import rows as R
from lnbench.store import points as P


def _reads() -> dict[str, set[str]]:
    """The fields each extractor of lnbench.store.points reads, by the record class its `row` is annotated with."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(P))):
        if isinstance(node, ast.FunctionDef) and node.args.args and node.args.args[0].arg == "row":
            annotation = ast.unparse(node.args.args[0].annotation)
            names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == "row"}
            for cls in annotation.split(" | "):
                out.setdefault(cls, set()).update(names)
    return out


def test_every_column_the_points_read_is_declared_by_its_row_record() -> None:
    reads = _reads()
    assert set(reads) == {"VerifyRow", "SelftestRow", "PerfRow", "AbiRow", "InspectRow", "CompareRow", "ProfileRow"}
    for cls, names in reads.items():
        undeclared = {name for name in names if not getattr(R, cls).declares(name)}
        assert not undeclared, f"{cls} does not declare {undeclared}"
    assert {"median_us", "kernel_us", "run_us", "row_kind"} <= reads["PerfRow"]


def _point(kind: str, **cells: Any) -> P.Point | None:
    return next(P.points_of(kind, pd.DataFrame([cells])), None)


CASE = {"op": "fwd", "dtype": "f16", "shape": "4x8"}


@pytest.mark.parametrize("kind, cells, case, value, value2, status", [
    ("verify", dict(backend="torch", dtype="f16", shape="4x8", tensor="dx", case="randn", max_abs_err=0.5,
                    allowed=1.0, status="PASS"), ("torch", "bwd", "f16", "4x8", "dx", "randn"), 0.5, 1.0, "PASS"),
    ("selftest", dict(planted_bug="no_eps", backend="copy", dtype="f16", shape="4x8", tensor="y", case="randn",
                      max_abs_err=2.0, allowed=1.0, status="FAIL"), ("no_eps", "fwd", "f16", "4x8", "y", "randn"),
     2.0, 1.0, "FAIL"),
    ("perf", dict(backend="torch", **CASE, mode="hot", row_kind="aggregate", median_us=3.0, kernel_us=2.5,
                  status="ok"), ("torch", "fwd", "f16", "4x8", "hot", ""), 3.0, 2.5, "ok"),
    ("abi-compare", dict(part="runtime", pair="flydsl", **CASE, metric="direct", speedup=1.2, ci_low=1.1,
                         verdict="FASTER", status="ok"), ("flydsl", "fwd", "f16", "4x8", "direct", "runtime"),
     1.2, 1.1, "FASTER"),
    ("abi-compare", dict(part="static", pair="flydsl", kernel="ln_fwd", arch="gfx942", instr_ratio=0.9,
                         kernarg_ratio=0.5, status="ok"), ("flydsl", "ln_fwd", "", "", "gfx942", "static"),
     0.9, 0.5, "ok"),
    ("inspect", dict(part="static", backend="flydsl", op="fwd", dtype="f16", n=8, abi="pointer", arch="gfx942",
                     instruction_count=100, vgpr=32, status="ok"),
     ("flydsl", "fwd", "f16", "8", "static", "pointer/gfx942"), 100.0, 32.0, "ok"),
    ("inspect", dict(part="executed", backend="flydsl", **CASE, arch="gfx942", exec_instructions=400,
                     global_bytes_loaded=64, status="ok"), ("flydsl", "fwd", "f16", "4x8", "executed", "gfx942"),
     400.0, 64.0, "ok"),
    ("compare", dict(backend="torch", **CASE, mode="hot", ratio=1.1, change_pct=10.0, verdict="SLOWER",
                     modelled=True, launch="ln_fwd", target="mi300x"),
     ("torch", "fwd", "f16", "4x8", "hot", "ln_fwd/mi300x/modelled"), 1.1, 10.0, "SLOWER"),
    ("profile", dict(backend="flydsl", **CASE, mode="cold", launch="ln_fwd", target="mi300x", arch="gfx942",
                     bound_us=1.25, exec_instructions=50, status="ok"),
     ("flydsl", "fwd", "f16", "4x8", "cold", "ln_fwd/mi300x/gfx942"), 1.25, 50.0, "ok"),
])
def test_a_kinds_row_is_the_point_its_cells_say(kind: str, cells: dict[str, Any], case: tuple[str, ...],
                                                 value: float, value2: float, status: str) -> None:
    point = _point(kind, **cells)
    assert point is not None
    assert (point.case, point.value, point.value2, point.status) == (case, value, value2, status)


def test_rows_that_are_no_headline_give_no_point() -> None:
    assert _point("perf", backend="torch", **CASE, mode="hot", row_kind="worker", median_us=3.0) is None
    assert _point("abi-compare", part="other", status="ok") is None
