"""Rows named after their kernel source (lnbench.backends.name_rows), the one helper verify, perf and
abi-compare use."""
from __future__ import annotations

from lnbench import backends
from lnbench.results import AbiRow, VerifyRow

SOURCE = "module:lnbench_test_sources.pointer_ln"


def test_name_rows_names_each_row_after_its_backends_source_or_both_sides():
    """verify and perf: a row gets its own backend's provenance, a built-in backend's nothing; abi-compare: every
    row gets one `module@commit` column per side (lnbench's own kernels as `lnbench NAME@commit`)."""
    sources = {SOURCE: {"source_module": "m.pointer_ln", "source_file": "/s/pointer_ln.py", "source_commit": "abc1234"}}
    rows = [VerifyRow(backend=SOURCE), VerifyRow(backend="torch")]
    backends.name_rows(rows, sources)
    assert [r.cells() for r in rows] == [{"backend": SOURCE, **sources[SOURCE]}, {"backend": "torch"}]
    backends.name_rows(rows, None)
    assert rows[1].cells() == {"backend": "torch"}
    pair = [AbiRow(shape="8x64"), AbiRow(shape="4x32")]
    backends.name_rows(pair, sources, {"tensor_source": "flydsl-tensor", "pointer_source": SOURCE})
    assert {r.pointer_source for r in pair} == {"m.pointer_ln@abc1234"}
    assert {str(r.tensor_source).rpartition("@")[0] for r in pair} == {"lnbench flydsl-tensor"}
