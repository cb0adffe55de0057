"""The typed result model (lnbench.results): rows and run metadata are records whose fields are the declared
columns, so a writer cannot name a column the kind does not declare; columns, loader and CSV metadata derive from
the records; and no command builds a row or run metadata as a dict literal of declared names."""
from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import pytest

from lnbench import results
from lnbench.cli_common import emit_outputs
from lnbench.results import KINDS, SchemaError, UNSET, load_result

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
def test_a_kinds_columns_are_its_row_records_fields(kind: results.Kind) -> None:
    fields = tuple(f.metadata["col"] for f in dataclasses.fields(kind.row))
    assert kind.columns == fields and kind.names == tuple(f.name for f in dataclasses.fields(kind.row))
    assert all(f.default is UNSET for f in dataclasses.fields(kind.run_record))


def test_a_row_naming_an_undeclared_column_fails_where_it_is_built() -> None:
    with pytest.raises(TypeError, match="bogus"):
        results.VerifyRow(backend="torch", bogus=1)
    row = results.PerfRow(backend="torch", status="ok")
    with pytest.raises(SchemaError, match="median_uss"):
        row.median_uss = 1.0                                   # an attribute typo is caught
    with pytest.raises(SchemaError, match="bogus"):
        row.set(bogus=2)
    with pytest.raises(SchemaError, match="undeclared column"):
        results.CompareRow.of({"backend": "x", "bogus": 1})


def test_a_record_holds_the_cells_a_writer_set_in_declared_order() -> None:
    row = results.VerifyRow(status="PASS", backend="torch", detail=None)
    assert list(row.cells()) == ["backend", "status", "detail"]        # declared order, not the order given
    assert row.cells() == {"backend": "torch", "status": "PASS", "detail": None} and not row.has("case")
    assert row.case is None and row.has("detail") and row.detail is None   # unset and set-to-None both read None
    copy = row.with_(case="randn")
    assert copy.case == "randn" and not row.has("case")          # with_ copies
    copy.unset("case")
    assert not copy.has("case") and copy == row
    assert pickle.loads(pickle.dumps(row)) == row and type(pickle.loads(pickle.dumps(row))) is results.VerifyRow


def test_a_record_is_no_mapping_and_its_unset_fields_read_none() -> None:
    """Rows are read by attribute; `cells()` is the one way to a dict (frames, files, display)."""
    from collections.abc import Mapping

    row = results.PerfRow(backend="torch", status="ok", median_us=2.5)
    assert not isinstance(row, Mapping) and not hasattr(row, "__getitem__") and not hasattr(row, "keys")
    with pytest.raises(TypeError):
        row["median_us"]                                       # noqa: B018 - the read a mapping would allow
    assert row.min_us is None and not row.has("min_us") and row.value("median_us") == 2.5
    assert row.value("no_such_column") is None and repr(UNSET) == "UNSET"


def test_a_run_record_answers_by_field_not_by_key_string() -> None:
    run = results.PERF.run(P=3, R=5, I_min=100, I_max=900, warmup_s_min=0.1, device="cpu",
                           device_name="cpu (x86_64)", complete=False, stopped="interrupted (SIGINT) after 2 of 4")
    assert run.schema == results.PERF.schema
    assert run.protocol.as_dict() == {"processes": 3, "runs": 5, "warmup_s": 0.1, "min_iters": 100, "max_iters": 900}
    assert run.device_label == "cpu (x86_64)" and run.incomplete.startswith("interrupted")
    abi = results.ABI.run(pair="flydsl", processes=2, runs=3, dgamma_strategy=None, device="null:gfx942")
    assert abi.protocol.as_dict() == {"pair": "flydsl", "processes": 2, "runs": 3, "dgamma_strategy": None}
    assert abi.device_label == "null:gfx942"


def test_csv_run_cells_are_the_declared_ones_never_a_constant_row_column(tmp_path: Path) -> None:
    """A CSV's run cells are its declared run columns; verify's per-case `seed` (the same in every row of a one-case
    file) stays a row column and the run's base seed is not guessed from it."""
    run = results.VERIFY.run(device="cpu", device_name="cpu", seed=1234)
    rows = [results.VerifyRow(backend="torch", case="randn", dtype="f32", shape="2x8", tensor=t, status="PASS",
                              seed=1235) for t in ("y", "mean")]
    emit_outputs(rows, run, tmp_path / "v.csv", tmp_path / "v.json", announce=False)
    from_csv, from_json = load_result(tmp_path / "v.csv"), load_result(tmp_path / "v.json")
    assert isinstance(from_csv.run, results.VerifyRun) and from_csv.run.device == "cpu"
    assert not from_csv.run.has("seed") and from_json.run.seed == 1234
    assert list(from_csv.rows["seed"]) == [1235, 1235] and not from_csv.undeclared


def test_metadata_an_older_or_newer_lnbench_wrote_is_kept_apart_when_read(tmp_path: Path) -> None:
    run = results.PERF.run(device="cpu")
    rows = [results.PerfRow(backend="torch", op="fwd", dtype="f32", shape="1x8", mode="hot", row_kind="aggregate",
                            status="ok", median_us=1.0, run_us=[1.0])]
    emit_outputs(rows, run, None, tmp_path / "p.json", announce=False)
    import json
    payload = json.loads((tmp_path / "p.json").read_text())
    payload["metadata"]["from_the_future"] = 7
    (tmp_path / "p.json").write_text(json.dumps(payload))
    result = load_result(tmp_path / "p.json")
    assert result.undeclared == {"from_the_future": 7} and result.run.device == "cpu"


def test_one_codec_for_list_cells() -> None:
    assert results.csv_cell([1.5, 2.0]) == "1.5;2.0"
    assert results.list_from_cell("1.5;2.0") == [1.5, 2.0]
    assert results.numbers_of("1.5;2") == results.numbers_of("[1.5, 2]") == results.numbers_of([1.5, 2]) == [1.5, 2.0]


#: names every row or run record declares that are metadata only (not also a row column of some kind)
_RUN_ONLY = sorted({c.name for k in KINDS.values() for c in k.run_record.COLUMNS}
                   - {name for k in KINDS.values() for name in k.names})


def _dict_literals_of_declared_names(path: Path) -> list[str]:
    """`{"name": ...}` literals in `path` whose keys include a run-only metadata name or that look like a result
    row (two or more keys that are row columns of one kind and include `status`, `verdict` or `part`)."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        metadata = keys & set(_RUN_ONLY) - {"device", "command"}    # worker specs and the lock file name these
        row_like = any(len(keys & set(k.names)) >= 2 and keys & {"status", "verdict", "part", "tensor"}
                       for k in KINDS.values())
        if metadata and len(metadata) >= 2 or row_like:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(keys)[:6]}")
    return found


def test_no_command_builds_a_row_or_run_metadata_as_a_dict_literal() -> None:
    """The records are the one way a result row or run record is made (issue 30: grep finds none)."""
    allowed = {     # dicts that are not result rows or run records, each for its reason
        "lnbench/env/facts.py": "the env table's rows", "lnbench/verify/summary.py": "verify's summary table",
        "lnbench/abi/tables.py": "abi-compare's display cells", "lnbench/abi/summary.py": "its summary table",
        "lnbench/verify/diagnosis.py": "the 'Why' table of diagnoses",
        "lnbench/verify/selftest.py": "the per-bug summary (the JSON's self_test entry)", "lnbench/plot/ratios.py": "a plot's point frame",
        "lnbench/measure/kernel_stats.py": "the kernel timer's summary",
        "lnbench/measure/protocol.py": "timing keyword arguments",
        "lnbench/perf/peak.py": "the peak cache's record", "lnbench/validate.py": "the numeric ranges of options",
        "lnbench/store/record.py": "rows of the store's SQL tables", "lnbench/store/flydsl.py": "the same"}
    found = [hit for path in sorted((ROOT / "lnbench").rglob("*.py")) if "results" not in path.parts
             and str(path.relative_to(ROOT)) not in allowed for hit in _dict_literals_of_declared_names(path)]
    assert not found, "\n".join(found)
