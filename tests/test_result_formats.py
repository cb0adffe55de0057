"""Result files load in one pandas call: JSON rows in pandas' Table Schema beside the metadata, CSV columns of
one type each (worker index an integer, lists joined); `--no-csv`; compare still reads the older JSON form."""
from __future__ import annotations

import csv
import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from cli_helpers import ONE_THREAD as ENV, timing
from lnbench.compare.command import compare_command
from lnbench.perf.command import perf_command
from lnbench.verify.command import verify_command

TINY = ["--device", "cpu", "--dtype", "f32", "--backend", "torch", "--op", "fwd", "--mode", "hot",
        "--shapes", "4x64,2x32", "-P", "2", *timing(), "-q"]


@pytest.fixture(scope="module")
def perf_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats")
    result = CliRunner().invoke(perf_command, [*TINY, "--csv", str(out / "p.csv"), "--json", str(out / "p.json")],
                                env={**ENV, "LNBENCH_RESULTS_DIR": str(out / "results")})
    assert result.exit_code == 0, result.output
    return out


def test_json_rows_load_with_read_json_table_and_keep_types(perf_files):
    frame = pd.read_json(perf_files / "p.json", orient="table")
    payload = json.loads((perf_files / "p.json").read_text())
    assert len(frame) == len(payload["data"]) == 2 * 2 + 2 and payload["metadata"]["lnbench_command"] == "perf"
    workers, agg = frame[frame.row_kind == "worker"], frame[frame.row_kind == "aggregate"]
    assert str(frame.worker.dtype) == "Int64" and set(workers.worker) == {0, 1} and agg.worker.isna().all()
    assert all(isinstance(v, list) and len(v) == 3 for v in workers.run_us)          # arrays, not text
    assert all(isinstance(v, list) and len(v) == 2 for v in agg.run_us)              # the worker medians
    assert frame.median_us.dtype.kind == "f" and "protocol" in payload and "workers" in payload


def test_csv_columns_hold_one_type_each(perf_files):
    with open(perf_files / "p.csv", newline="") as handle:
        records = list(csv.DictReader(handle))
    assert {r["row_kind"] for r in records} == {"worker", "aggregate"}
    assert all(re.fullmatch(r"\d+", r["worker"]) for r in records if r["row_kind"] == "worker")
    assert all(r["worker"] == "" for r in records if r["row_kind"] == "aggregate")
    for record in records:
        values = record["run_us"].split(";")
        assert "[" not in record["run_us"] and all(float(v) > 0 for v in values)
    frame = pd.read_csv(perf_files / "p.csv", dtype={"worker": "Int64"})
    assert set(frame.worker.dropna()) == {0, 1}


def test_no_csv_writes_no_csv_and_refuses_csv_beside_it(tmp_path):
    results = tmp_path / "results"
    env = {**ENV, "LNBENCH_RESULTS_DIR": str(results)}
    args = ["--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes", "4x64", "-q"]
    done = CliRunner().invoke(verify_command, [*args, "--no-csv", "--json", str(tmp_path / "v.json")], env=env)
    assert done.exit_code == 0, done.output
    assert (tmp_path / "v.json").exists() and not list(results.glob("*.csv")) if results.exists() else True
    assert "CSV written" not in done.output
    both = CliRunner().invoke(verify_command, [*args, "--no-csv", "--csv", str(tmp_path / "v.csv")], env=env)
    assert both.exit_code == 2 and "--csv and --no-csv both given" in both.output
    assert not (tmp_path / "v.csv").exists()


def test_compare_reads_the_older_json_form(perf_files, tmp_path):
    """Files written before the Table Schema: rows under "rows", run values as JSON text, worker "all"."""
    payload = json.loads((perf_files / "p.json").read_text())
    old_rows = [{**r, "run_us": json.dumps(r["run_us"]), "worker": "all" if r["worker"] is None else r["worker"]}
                for r in payload["data"]]
    old = {k: v for k, v in payload.items() if k not in ("schema", "data")}
    (tmp_path / "old.json").write_text(json.dumps({**old, "rows": old_rows}))
    result = CliRunner().invoke(compare_command, [str(tmp_path / "old.json"), str(perf_files / "p.json"),
                                                  "--json", str(tmp_path / "c.json"), "--no-csv"])
    assert result.exit_code == 0, result.output
    rows = pd.read_json(tmp_path / "c.json", orient="table")
    assert len(rows) == 2 and set(rows.verdict) == {"SAME"} and (rows.ratio == 1.0).all()
    assert str(rows.workers.dtype) in ("int64", "Int64") and (rows.workers == 2).all()


def test_a_non_utf8_file_name_is_written_escaped_not_an_internal_error(perf_files, tmp_path):
    """A file name that is not UTF-8 (bytes 0xff: the surrogate \\udcff in Python) lands in compare's metadata
    and titles: the CSV and the Markdown write it as `\\udcff`, where the run ended in an encoding error."""
    odd = tmp_path / "new-\udcff.json"
    odd.write_bytes((perf_files / "p.json").read_bytes())
    csv_path, md_path = tmp_path / "c.csv", tmp_path / "c.md"
    result = CliRunner().invoke(compare_command, [str(perf_files / "p.json"), str(odd), "--csv", str(csv_path),
                                                  "--md", str(md_path), "-q"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "new-\\udcff.json" in md_path.read_text(encoding="utf-8")
    assert pd.read_csv(csv_path)["new"].str.endswith("new-\\udcff.json").all()
