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
from click.testing import CliRunner

from lnbench.cli import main
from lnbench.results import load_result

DATA = Path(__file__).parent / "data" / "results-v1"
FLYDSL_INGEST = Path("/work/flydsl-src/.github/dashboard/ingest")


def test_the_table_has_flydsl_columns_and_lnbench_values() -> None:
    out = CliRunner().invoke(main, ["flydsl-table", str(DATA / "perf.json")])
    assert out.exit_code == 0, out.output
    lines = [line.split() for line in out.output.splitlines() if line.strip()]
    assert lines[0] == ["op", "shape", "dtype", "TB/s", "TFLOPS"]
    rows = load_result(DATA / "perf.json").rows
    agg = rows[(rows["row_kind"] == "aggregate") & (rows["backend"] == rows["backend"].iloc[0])]
    assert [(op, shape, float(tbps)) for op, shape, _, tbps, _ in lines[1:]] == [
        ({"fwd": "layernorm", "bwd": "layernorm_bwd"}[o], s, round(g / 1000, 3))
        for o, s, g in zip(agg["op"], agg["shape"], agg["gbps"])]


@pytest.mark.skipif(not (FLYDSL_INGEST / "parse_bench.py").is_file(), reason="no FlyDSL checkout at /work/flydsl-src")
def test_flydsl_s_own_ingest_parser_reads_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FLYDSL_INGEST))
    import parse_bench

    out = CliRunner().invoke(main, ["flydsl-table", str(DATA / "perf.json")])
    records = parse_bench.parse_log(out.output)
    assert [(r.op, r.shape, r.dtype, r.metric, r.status) for r in records] == [
        ("layernorm", "8x64", "fp32", "TB/s", "ok"), ("layernorm_bwd", "8x64", "fp32", "TB/s", "ok")]
    sys.modules.pop("parse_bench", None)


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
    out = CliRunner().invoke(main, ["store", str(history), "--store", url])
    assert out.exit_code == 0 and "imported" in out.output, out.output
    again = CliRunner().invoke(main, ["store", str(history), "--store", url])
    assert "already there" in again.output
    out = CliRunner().invoke(main, ["history", "--store", url, "--kind", "flydsl", "--json", str(tmp_path / "h.json")])
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
    out = CliRunner().invoke(main, ["store", str(DATA / "perf.json"), str(history), "--store", url])
    assert out.exit_code == 2 and str(history) in out.output
    assert not (tmp_path / "s.sqlite").exists()
