"""The result model (lnbench.results): every kind's files name their schema and round-trip through load_result with
the declared columns and dtypes; readers refuse a wrong kind and a newer major; a planted undeclared column is
caught; every command writes --md and appends (never overwrites) its Markdown to $GITHUB_STEP_SUMMARY."""
from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import ABI_TIMING, error_line, invoke, timing
from lnbench import results
from lnbench.cli_common import emit_outputs
from lnbench.output.files import ResultsNotWritten
from lnbench.results import KINDS, PANDAS_DTYPES, SchemaError, load_result
from session_once import built_once

PREVIOUS_STEP = "## an earlier step's summary\n"

#: (kind, file stem, command line after `lnbench`): small fast cases, each run once for the session; the fewest
#: timing calls (cli_helpers.timing), verify's cases in this process (--jobs 1), two workers where a run measures
#: (their spread fills the interval columns)
COMMANDS = [
    ("verify", "v", ["verify", "--device", "emu:gfx942", "--shapes", "64x256", "--dtype", "bf16",
                     "--backend", "flydsl,torch", "--jobs", "1"]),
    ("perf", "p", ["perf", "--device", "cpu", "--shapes", "64x256", "--processes", "2", *timing(runs=2),
                   "--backend", "torch", "--op", "fwd", "--mode", "hot", "--dtype", "f32", "--if-loaded", "warn"]),
    ("abi-compare", "a", ["abi-compare", "--device", "null", "--shapes", "64x256", "-P", "2", *ABI_TIMING,
                          "--op", "fwd", "--dtype", "bf16", "--metric", "direct", "--arch", "gfx942"]),
    ("inspect", "i", ["inspect", "--shapes", "1x256", "--arch", "gfx942", "--op", "fwd"]),
    ("selftest", "s", ["verify", "--self-test", "--shapes", "4x64", "--dtype", "f32"]),
]


def lnbench(args: list[str]):
    """`lnbench ARGS` run in this process (the files are what these tests read, not the process): sys.argv as the
    entry point would have it, so the runs' metadata names their command line."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["lnbench", *args])
        return invoke(*args)


def _run_every_command(tmp: Path) -> None:
    """Every command once (then compare of the perf run with itself), all appending to one step summary."""
    (tmp / "step.md").write_text(PREVIOUS_STEP)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        patch.setenv("GITHUB_STEP_SUMMARY", str(tmp / "step.md"))
        patch.setenv("LNBENCH_RESULTS_DIR", str(tmp / "results"))
        patch.delenv("LNBENCH_CONFIG", raising=False)
        for kind, stem, args in COMMANDS:
            out = lnbench([*args, "--csv", f"{stem}.csv", "--json", f"{stem}.json", "--md", f"{stem}.md", "-q"])
            assert out.exit_code == 0, (kind, out.output[-2000:], out.exception)
        out = lnbench(["compare", "p.json", "p.json", "--csv", "c.csv", "--json", "c.json", "--md", "c.md", "-q"])
        assert out.exit_code == 0, (out.output, out.exception)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The files of every command: made once for the session (tests/session_once.py), only read by the tests."""
    return built_once(tmp_path_factory, "results_model", _run_every_command)


ALL = [(kind, stem) for kind, stem, _ in COMMANDS] + [("compare", "c")]


def _dtype_ok(series: pd.Series, declared: str) -> bool:
    if series.isna().all():
        return True                        # an empty column has no type to keep
    kind = series.dtype
    if declared == results.INT:
        return pd.api.types.is_integer_dtype(kind)
    if declared == results.FLOAT:
        return pd.api.types.is_float_dtype(kind)
    if declared == results.BOOL:
        return pd.api.types.is_bool_dtype(kind)
    return kind == object


@pytest.mark.parametrize("kind,stem", ALL)
@pytest.mark.parametrize("suffix", ["csv", "json"])
def test_round_trip_declared_columns_and_dtypes(runs: Path, kind: str, stem: str, suffix: str) -> None:
    declared = KINDS[kind]
    result = load_result(runs / f"{stem}.{suffix}")
    assert (result.kind, result.version) == (kind, declared.version)
    assert result.run.schema == declared.schema and isinstance(result.run, declared.run_record)
    row_columns = [c for c in result.rows.columns if not result.run.has(c) or c in declared.names]
    assert set(row_columns) <= set(declared.names), set(row_columns) - set(declared.names)
    present = [c for c in result.rows.columns if c in declared.names]
    assert present == results.ordered_columns(declared, present)          # written in declared order
    for name in present:
        assert _dtype_ok(result.rows[name], declared.column(name).type), (name, result.rows[name].dtype)
    required = [c.name for c in declared.columns if c.required]
    assert set(required) <= set(result.rows.columns)
    if suffix == "json":
        declared.check_types(json.loads((runs / f"{stem}.json").read_text())["data"])   # every value its type


@pytest.mark.parametrize("kind,stem", ALL)
def test_provenance(runs: Path, kind: str, stem: str) -> None:
    meta = json.loads((runs / f"{stem}.json").read_text())["metadata"]
    command = "verify" if kind == "selftest" else kind
    assert meta["command_line"].startswith(f"lnbench {command} "), meta["command_line"]
    assert "git_commit" in meta and meta["lnbench_version"]
    if kind != "compare":
        for key in ("torch_version", "flydsl_version", "gpu_runtime", "driver", "device"):
            assert meta[key], key
        assert meta["driver"] in ("n/a (no GPU)", "unavailable")   # every run here: CPU, emulated or null device


def test_verify_flydsl_rows_carry_code_hash(runs: Path) -> None:
    frame = load_result(runs / "v.csv").rows
    fly = frame[frame.backend == "flydsl"]
    assert len(fly) and fly.emu_code.astype(str).str.fullmatch(r"[0-9a-f]{12}( [0-9a-f]{12})*").all()
    assert frame[frame.backend == "torch"].emu_code.isna().all()


def test_compare_refuses_a_verify_file(runs: Path) -> None:
    error_line(lnbench(["compare", str(runs / "v.json"), str(runs / "v.json"), "--no-csv"]), "is from lnbench verify")


@pytest.mark.parametrize("suffix", ["json", "csv"])
def test_newer_major_refused(runs: Path, suffix: str, tmp_path: Path) -> None:
    source = runs / f"p.{suffix}"
    newer = tmp_path / f"newer.{suffix}"
    if suffix == "json":
        payload = json.loads(source.read_text())
        payload["metadata"]["schema"] = "perf/2.0"
        newer.write_text(json.dumps(payload))
    else:
        frame = pd.read_csv(source)
        frame["schema"] = "perf/2.0"
        frame.to_csv(newer, index=False)
    error_line(lnbench(["compare", str(newer), str(runs / "p.json"), "--no-csv"]),
               "perf/2.0, newer than this lnbench reads (perf/1.0)")


def test_newer_minor_read(runs: Path, tmp_path: Path) -> None:
    payload = json.loads((runs / "p.json").read_text())
    payload["metadata"]["schema"] = "perf/1.7"
    (tmp_path / "minor.json").write_text(json.dumps(payload))
    result = load_result(tmp_path / "minor.json", ["perf"])
    assert (result.kind, result.version) == ("perf", "1.7")


def test_file_without_schema_reads_as_version_0(runs: Path, tmp_path: Path) -> None:
    payload = json.loads((runs / "v.json").read_text())
    del payload["metadata"]["schema"]
    (tmp_path / "old.json").write_text(json.dumps(payload))
    result = load_result(tmp_path / "old.json")
    assert (result.kind, result.version) == ("verify", "0")


def _row() -> dict:
    return {"backend": "torch", "op": "fwd", "dtype": "f32", "shape": "1x8", "mode": "hot", "verdict": "SAME"}


@pytest.mark.parametrize("bad,what", [({**_row(), "bogus": 1}, "undeclared column(s) bogus"),
                                      ({k: v for k, v in _row().items() if k != "verdict"},
                                       "required column(s) verdict missing")])
def test_planted_schema_breaks_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: dict,
                                         what: str) -> None:
    """A row that breaks its kind's declaration is never written where asked; the rows are kept as JSON lines
    in the folder the error names (lnbench.output.fallback.keep_rows)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    metadata = results.COMPARE.run(command="compare")
    emit_outputs([_row()], metadata, tmp_path / "ok.csv", tmp_path / "ok.json", announce=False)
    for csv_path, json_path in ((tmp_path / "bad.csv", None), (None, tmp_path / "bad.json")):
        with pytest.raises(ResultsNotWritten, match=re.escape(what)) as caught:
            emit_outputs([_row(), bad], metadata, csv_path, json_path, announce=False)
        assert isinstance(caught.value.__cause__, SchemaError) and caught.value.kept
        kept = re.search(r"kept in (\S+)/", str(caught.value)).group(1)
        assert len((Path(kept) / "compare.rows.jsonl").read_text().splitlines()) == 2
    assert not (tmp_path / "bad.csv").exists() and not (tmp_path / "bad.json").exists()
    with pytest.raises(SchemaError, match="names no declared kind"):   # an unstamped result is not written
        emit_outputs([_row()], {"command": "compare"}, tmp_path / "x.csv", None, announce=False)
    with pytest.raises(SchemaError, match="is not float"):
        results.COMPARE.check_types([{**_row(), "ratio": "fast"}])


@pytest.mark.parametrize("kind,stem", ALL)
def test_md_written(runs: Path, kind: str, stem: str) -> None:
    text = (runs / f"{stem}.md").read_text()
    assert text.startswith(f"## lnbench {kind}")
    assert "\n|---" in text and text.count("\n| ") >= 2          # a table with a header and at least one row


def test_step_summary_appended_by_every_command(runs: Path) -> None:
    text = (runs / "step.md").read_text()
    assert text.startswith(PREVIOUS_STEP)                       # appended, never overwritten
    headings = [line for line in text.splitlines() if line.startswith("## lnbench")]
    assert headings == ["## lnbench verify", "## lnbench perf", "## lnbench abi-compare", "## lnbench inspect",
                        "## lnbench selftest", "## lnbench compare"]
    for kind, stem in ALL:                                      # each command's own Markdown, as --md wrote it
        assert (runs / f"{stem}.md").read_text() in text, kind


def test_abi_executed_static_rows_carry_code_hashes(runs: Path) -> None:
    frame = load_result(runs / "a.json").rows
    static = frame[frame.part == "static"]
    assert len(static) and (static.exec_status == "ok").all()
    for side in ("tensor", "pointer"):
        assert static[f"exec_code_{side}"].str.fullmatch(r"[0-9a-f]{16}( [0-9a-f]{16})*").all()
    assert (static.exec_code_tensor != static.exec_code_pointer).all()     # two ABIs, two code objects


def test_compile_only_inspect_rows_have_no_code_hash(runs: Path) -> None:
    assert "code_object" not in load_result(runs / "i.csv").rows.columns   # not at hand compile-only (docs)
