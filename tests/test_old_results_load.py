"""Result files written before the typed result model (issue 30) still load, and compare still takes them.

tests/data/results-v1/ holds one file of every kind (schema 1.0), as `scripts/output_diff.py run` wrote them at
commit 1fa0289 (the baseline of issue 30's output diff); the larger ones are cut to their first and last rows,
the rest of each file as written.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from lnbench.results import load_result
from cli_helpers import invoke

DATA = Path(__file__).parent / "data" / "results-v1"

#: file stem, kind, rows, and one cell of its first row that must read back as written; each stem as CSV and JSON
STEMS = [
    ("verify", "verify", 12, ("backend", "torch")),
    ("selftest", "selftest", 8, ("planted_bug", "none")),
    ("perf", "perf", 6, ("row_kind", "worker")),
    ("abi-null", "abi-compare", 4, ("part", "runtime")),
    ("inspect", "inspect", 8, ("part", "static")),
    ("compare-perf", "compare", 4, ("verdict", "FASTER")),
]
FILES = [(f"{stem}.{ext}", *facts) for stem, *facts in STEMS for ext in ("csv", "json")]
FILES.append(("merge-perf.json", "perf", 6, ("row_kind", "worker")))          # two perf parts merged (JSON)


@pytest.mark.parametrize(("name", "kind", "rows", "cell"), FILES, ids=[f[0] for f in FILES])
def test_v1_result_loads_with_its_kind_schema_and_rows(name: str, kind: str, rows: int,
                                                        cell: tuple[str, str]) -> None:
    result = load_result(DATA / name)
    assert (result.kind, result.version, len(result.rows)) == (kind, "1.0", rows)
    column, value = cell
    assert result.rows[column].iloc[0] == value


def test_v1_perf_files_compare(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    result = invoke("compare", str(DATA / "perf.json"), str(DATA / "merge-perf.json"),
                    "--no-csv", "--json", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    compared = load_result(out)
    assert compared.kind == "compare"
    assert list(compared.rows["op"]) == ["fwd", "bwd"]
    assert set(compared.rows["verdict"]) <= {"SAME", "FASTER", "SLOWER"}
    assert json.loads(out.read_text())["metadata"]["source_command"] == "perf"
