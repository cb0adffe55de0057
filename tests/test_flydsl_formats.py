"""FlyDSL's CI formats: `lnbench flydsl-table` prints a perf result as the benchmark table FlyDSL's dashboard
ingest parses (checked with FlyDSL's own parser when its checkout is here), and `lnbench store` imports FlyDSL's
dashboard history.json (idempotently; a cut-short file is one line, exit 2, nothing written) into the store, where
`lnbench history` finds its change points."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import invoke, timing
from lnbench.results import load_result

DATA = Path(__file__).parent / "data" / "results-v1"
FLYDSL_CI = Path(__file__).resolve().parents[1].parent / "shared" / "flydsl-ci"
FLYDSL_INGEST = FLYDSL_CI / ".github" / "dashboard" / "ingest"
#: lnbench op -> FlyDSL's op name; a backend other than flydsl is appended as @BACKEND
NAMES = {"fwd": "layernorm", "bwd": "layernorm_bwd"}


def _value(text: str) -> float:
    """A printed TB/s value, checked to be plain fixed point with 4 significant digits (FlyDSL's parser)."""
    assert "e" not in text.lower() and float(text) > 0, text
    assert len(text.replace(".", "").lstrip("0")) >= 4, text
    return float(text)


def test_the_table_has_flydsl_columns_and_lnbench_values() -> None:
    out = invoke("flydsl-table", str(DATA / "perf.json"))
    assert out.exit_code == 0, out.output
    lines = [line.split() for line in out.output.splitlines() if line.strip()]
    assert lines[0] == ["op", "shape", "dtype", "TB/s", "TFLOPS"] and set(lines[1][0]) == {"-"}
    rows = load_result(DATA / "perf.json").rows
    agg = rows[rows["row_kind"] == "aggregate"]
    assert [(op, shape, dtype, _value(tbps), tflops) for op, shape, dtype, tbps, tflops in lines[2:]] == [
        (f"{NAMES[o]}@{b}", s, d, pytest.approx(g / 1000, rel=1e-3), "-")
        for b, o, s, d, g in zip(agg["backend"], agg["op"], agg["shape"], agg["dtype"], agg["gbps"])]


@pytest.mark.skipif(not (FLYDSL_INGEST / "parse_bench.py").is_file(), reason=f"no FlyDSL CI scripts at {FLYDSL_CI}")
def test_flydsl_s_own_ingest_parser_reads_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FLYDSL_INGEST))
    import parse_bench

    out = invoke("flydsl-table", str(DATA / "perf.json"))
    records = parse_bench.parse_log(out.output)
    assert [(r.op, r.shape, r.dtype, r.metric, r.status) for r in records] == [
        ("layernorm@torch", "8x64", "f32", "TB/s", "ok"), ("layernorm_bwd@torch", "8x64", "f32", "TB/s", "ok")]
    sys.modules.pop("parse_bench", None)


_FAST = ["-P", "1", *timing(runs=2, warmup_s=0.01, target_run_s=0.002)]


def _table_lines(output: str) -> list[list[str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == ["op", "shape", "dtype", "TB/s", "TFLOPS"])
    return [line.split() for line in lines[start + 2:] if line.strip()]


def test_perf_prints_the_flydsl_table_after_its_run(tmp_path: Path) -> None:
    """`perf --flydsl-table` prints, after the run and under --quiet, the table `flydsl-table` prints of the same
    result: one formatter."""
    out = tmp_path / "p.json"
    run = invoke("perf", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes",
                 "8x64,16x64", "--op", "fwd,bwd", "--mode", "hot", *_FAST, "-q", "--no-csv",
                 "--json", str(out), "--flydsl-table")
    assert run.exit_code == 0, run.output
    rows = load_result(out).rows
    agg = rows[rows["row_kind"] == "aggregate"]
    assert [line[:3] + [line[4]] for line in _table_lines(run.output)] == [
        [f"{NAMES[o]}@torch", s, "f32", "-"] for o, s in zip(agg["op"], agg["shape"])]
    assert [_value(line[3]) for line in _table_lines(run.output)] == [
        pytest.approx(g / 1000, rel=1e-3) for g in agg["gbps"]]
    again = invoke("flydsl-table", str(out))
    assert again.exit_code == 0 and again.output in run.output


@pytest.mark.skipif(not (FLYDSL_INGEST / "parse_bench.py").is_file(), reason=f"no FlyDSL CI scripts at {FLYDSL_CI}")
def test_perf_s_flydsl_table_goes_through_flydsl_s_ingest_into_the_store(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The table `perf --flydsl-table` prints, parsed by FlyDSL's own ingest parser (parse_log, attach_meta) as
    its CI does, is read by lnbench's importer of FlyDSL's history: each case one point, its TB/s the run's."""
    monkeypatch.syspath_prepend(str(FLYDSL_INGEST))
    import parse_bench

    from lnbench.store import flydsl
    from lnbench.store.db import open_store

    out = tmp_path / "p.json"
    run = invoke("perf", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes",
                 "256x1024", "--op", "fwd,bwd", "--mode", "hot", *_FAST, "-q", "--no-csv",
                 "--json", str(out), "--flydsl-table")
    assert run.exit_code == 0, run.output
    records = parse_bench.attach_meta(parse_bench.parse_log(run.output), runner="linux-flydsl-mi355-1",
                                      commit="abc1234", run_id=7, ts="2026-05-01T00:00:00Z")
    sys.modules.pop("parse_bench", None)
    rows = load_result(out).rows
    agg = rows[rows["row_kind"] == "aggregate"]
    expected = {(f"{NAMES[o]}@torch", s): pytest.approx(g / 1000, rel=1e-3)
                for o, s, g in zip(agg["op"], agg["shape"], agg["gbps"])}
    assert {(r["op"], r["shape"]): r["value"] for r in records if r["metric"] == "TB/s"} == expected
    store = open_store(f"sqlite:///{tmp_path / 's.sqlite'}")
    assert flydsl.import_history(store, records) == (1, len(records))
    store.close()
    code = invoke("history", "--store", f"sqlite:///{tmp_path / 's.sqlite'}", "--json",
                  str(tmp_path / "h.json"))
    assert code.exit_code == 0, code.output
    series = json.loads((tmp_path / "h.json").read_text())["series"]
    assert {(s["backend"].removeprefix("flydsl:"), s["shape"]): s["latest"] for s in series} == expected
    assert {s["backend"] for s in series} == {f"flydsl:{op}" for op, _ in expected}


def _history_json(path: Path) -> Path:
    """A FlyDSL dashboard history.json (schema 1): 30 runs on one runner, layernorm TB/s 4% lower from run 20."""
    rng = np.random.default_rng(3)
    records = []
    for run in range(30):
        for shape, base in (("32768x8192", 4.2), ("8192x8192", 3.1)):
            value = base * (1 + rng.normal(0, 0.005)) * (0.96 if run >= 20 and shape == "32768x8192" else 1.0)
            records.append({"op": "layernorm", "shape": shape, "dtype": "bf16", "metric": "TB/s",
                            "value": round(value, 3), "status": "ok", "ts": f"2026-04-{run // 24 + 1:02d}T{run % 24:02d}:00:00Z",
                            "commit": f"f{run:04d}", "pr": None, "run_id": 1000 + run, "source": "ci",
                            "runner": "linux-flydsl-mi355-1", "arch": "gfx950"})
    path.write_text(json.dumps({"schema": 1, "updated": "2026-04-02T06:00:00Z", "repo": "ROCm/FlyDSL",
                                "records": records}))
    return path


def test_a_flydsl_history_is_imported_once_and_its_change_is_found(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    history = _history_json(tmp_path / "history.json")
    out = invoke("store", str(history), "--store", url)
    assert out.exit_code == 0 and "imported" in out.output, out.output
    again = invoke("store", str(history), "--store", url)
    assert "already there" in again.output
    out = invoke("history", "--store", url, "--kind", "flydsl", "--json", str(tmp_path / "h.json"))
    assert out.exit_code == 0, out.output
    series = {s["shape"]: s for s in json.loads((tmp_path / "h.json").read_text())["series"]}
    assert series["32768x8192"]["runs"] == 30
    assert [(c["from_commit"], c["to_commit"]) for c in series["32768x8192"]["changes"]] == [("f0019", "f0020")]
    assert series["32768x8192"]["changes"][0]["size_pct"] == pytest.approx(-4, abs=1)
    assert series["8192x8192"]["changes"] == []


def test_a_cut_short_flydsl_history_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    history = _history_json(tmp_path / "history.json")
    history.write_text(history.read_text()[:3000])
    out = invoke("store", str(DATA / "perf.json"), str(history), "--store", url)
    assert out.exit_code == 2 and str(history) in out.output
    assert not (tmp_path / "s.sqlite").exists()
