"""Every command that writes results × every device this machine has × every output, at the tiniest run.

The matrix is read off the commands' own declarations: a command with `--csv` is in it, with every device
(`lnbench.run.device.device_names_here`) when it declares `--device`, and with every output option it declares
(`--csv`, `--json`, `--md`, `--store`), all at once. Its tiniest run is tests/commands_under_test.SMALLEST (or, for
a command that reads results, READERS below says what feeds it); a new command without one fails
test_every_writing_command_is_in_the_matrix. Each case ends in exit 0 or 1 with every file written, loadable, and
holding the same rows (CSV = JSON = the points in the store), or in exit 2 with one line and no file; each JSON
of a timed kind is also compared with itself (`lnbench compare`) and recorded again into a fresh store
(`lnbench store`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pandas as pd
import pytest
import sqlalchemy as sa

from cli_helpers import ONE_THREAD, error_line, invoke
from commands_under_test import SMALLEST
from lnbench.cli import main
from lnbench.run.device import device_names_here
from lnbench.machine.install import missing_module_hint
from lnbench.results import CSV_LIST_SEPARATOR, ResultFile, list_from_cell, load_result
from lnbench.store import schema as S
from lnbench.store.record import identity_and_points

OUTPUT_OPTIONS = ("--csv", "--json", "--md", "--store")
#: commands that read results rather than make them, and where the matrix feeds them
READERS = {"compare": "each timed JSON the matrix writes, against itself",
           "merge": "shards: tests/test_shard_merge.py",
           "history": "a store: tests/test_history.py and the store check here"}
#: kinds `lnbench compare` takes
COMPARED_KINDS = ("perf", "abi-compare")


def _options(name: str) -> set[str]:
    command = main.get_command(click.Context(main), name)
    return {opt for param in command.params for opt in param.opts}


def writing_commands() -> dict[str, set[str]]:
    """Each command that writes a result file, with its options."""
    names = main.list_commands(click.Context(main))
    return {name: opts for name in names if "--csv" in (opts := _options(name))}


def matrix() -> list[tuple[str, str | None]]:
    cases: list[tuple[str, str | None]] = []
    for name, opts in writing_commands().items():
        if name in READERS:
            continue
        devices = device_names_here() if "--device" in opts else [None]
        cases += [(name, device) for device in devices]
    return cases


def test_every_writing_command_is_in_the_matrix() -> None:
    missing = [name for name in writing_commands() if name not in SMALLEST and name not in READERS]
    assert not missing, f"add the tiniest run of {missing} to tests/commands_under_test.SMALLEST"
    assert {"verify", "perf", "abi-compare", "inspect"} <= set(SMALLEST)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **ONE_THREAD, "LNBENCH_RESULTS_DIR": str(cwd / "results"), "LNBENCH_CALIBRATION": "off",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    env.pop("LNBENCH_STORE", None)
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def _value(value: object) -> object:
    """A cell as both files can hold it: a CSV cannot tell an empty text or list from a missing value, holds a
    list as `;`-joined text."""
    if isinstance(value, str) and CSV_LIST_SEPARATOR in value:
        value = list_from_cell(value)
    if isinstance(value, (list, tuple)):
        return tuple(_value(v) for v in value) or None
    if value is None or value == "" or (isinstance(value, float) and value != value) or value is pd.NA:
        return None
    return value.item() if hasattr(value, "item") else value


def _values(frame: pd.DataFrame) -> list[dict[str, object]]:
    return [{k: _value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _stored(url: str) -> tuple[int, int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        runs, points = (conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                        for table in (S.runs, S.points))
    engine.dispose()
    return runs, points


@pytest.mark.parametrize("command,device", matrix(), ids=lambda v: str(v))
def test_command_on_device_writes_every_output(command: str, device: str | None, tmp_path: Path) -> None:
    opts = _options(command)
    out = {opt: tmp_path / f"out.{opt.strip('-')}" for opt in OUTPUT_OPTIONS if opt in opts and opt != "--store"}
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    args = [*SMALLEST[command], *(["--device", device] if device else []),
            *(arg for opt, path in out.items() for arg in (opt, str(path))),
            *(["--store", url] if "--store" in opts else [])]
    proc = _run(args, tmp_path)
    said = f"lnbench {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode in (0, 1, 2), said
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, said
    if proc.returncode == 2:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("lnbench: error:"), said
        assert not any(path.exists() for path in out.values()), said
        return
    csv, js = load_result(out["--csv"]), load_result(out["--json"])
    assert csv.kind == js.kind and len(csv.rows) == len(js.rows) > 0, said
    assert [c for c in csv.rows.columns if c in js.rows.columns] == list(js.rows.columns), said   # + run cells
    assert _values(csv.rows[list(js.rows.columns)]) == _values(js.rows), said
    in_both = [k for k in csv.run.cells() if k in js.run.cells()]       # a run cell that is also a row column
    run_cells = [_values(pd.DataFrame([result.run.cells()])[in_both]) for result in (csv, js)]
    assert in_both and run_cells[0] == run_cells[1], said
    assert out["--md"].read_text(encoding="utf-8").count("|") > 4, said
    if "--store" in opts:
        _, points = identity_and_points(js.kind, js.version, js.run, js.rows)
        assert _stored(url) == (1, len(points)), said
        again = f"sqlite:///{tmp_path / 'again.sqlite'}"
        stored = invoke("store", str(out["--json"]), "--store", again)
        assert stored.exit_code == 0, stored.output
        assert _stored(again) == (1, len(points))
    if js.kind in COMPARED_KINDS:
        _compare_with_itself(out["--json"], js, tmp_path)


def _compare_with_itself(path: Path, result: ResultFile, tmp_path: Path) -> None:
    """`lnbench compare` of a timed result with itself: every case SAME; a result with no timed case (FlyDSL
    compiled, not executed on the cpu) is one line saying so."""
    compared = tmp_path / "compare.json"
    run = invoke("compare", str(path), str(path), "--no-csv", "--json", str(compared))
    timed = result.rows.get("median_us", result.rows.get("speedup"))
    if timed is None or timed.isna().all():
        assert run.exit_code == 2 and "no overlap" in error_line(run), run.output
        return
    assert run.exit_code == 0, run.output
    verdicts = load_result(compared).rows
    assert len(verdicts) > 0 and "SLOWER" not in set(verdicts["verdict"]), run.output


def test_a_run_cell_holding_a_list_is_one_csv_cell_and_reads_back_as_the_list(tmp_path: Path) -> None:
    """abi-compare on the emulated device records its modelled targets as a list: one JSON cell in the CSV."""
    from lnbench.output.files import write_csv
    from lnbench.results import ABI, AbiRow, AbiRun

    run = AbiRun(schema=ABI.schema, lnbench_command="abi-compare", modelled_targets=["MI350X", "MI355X"])
    rows = [AbiRow(part="runtime", pair="flydsl", op="fwd", dtype="bf16", shape="1x256", metric="direct", status="ok")]
    write_csv(rows, tmp_path / "a.csv", run)
    back = load_result(tmp_path / "a.csv")
    assert back.run.modelled_targets == ["MI350X", "MI355X"]
    assert json.loads(back.rows.loc[0, "modelled_targets"]) == ["MI350X", "MI355X"]


def test_a_missing_dependency_is_one_line_naming_what_to_install_before_any_work(tmp_path: Path) -> None:
    """$LNBENCH_STORE set and SQLAlchemy missing: the store is opened before the work, so the run stops there."""
    code = ("import sys; sys.modules['sqlalchemy'] = None; from lnbench.cli import main; "
            "sys.argv = ['lnbench', *sys.argv[1:]]; main()")
    env = {**os.environ, **ONE_THREAD, "LNBENCH_STORE": str(tmp_path / "s.sqlite"),
           "LNBENCH_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, "-c", code, *SMALLEST["verify"][:-1], "--device", "cpu"],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("lnbench: error: this needs sqlalchemy, which is not installed: pip install "
                               "'sqlalchemy>=2.0' (a dependency of lnbench itself)"), lines[0]
    assert not list(tmp_path.rglob("*.csv")) and not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("module,extra", [("liger_kernel", "peers"), ("psycopg", "store-pg"), ("tinygrad", "emu")])
def test_a_missing_module_of_an_extra_names_the_extra(module: str, extra: str) -> None:
    hint = missing_module_hint(ModuleNotFoundError(f"No module named '{module}'", name=f"{module}.sub"))
    assert hint is not None and hint.startswith(f"this needs {module}, which is not installed: pip install '")
    assert hint.endswith(f"(lnbench's `{extra}` extra)")
    assert missing_module_hint(ModuleNotFoundError("No module named 'nothing_lnbench_uses'",
                                                   name="nothing_lnbench_uses")) is None


@pytest.mark.parametrize("commit", ["063e900", "1234567", "12e4567"])
def test_a_commit_that_reads_as_a_number_stays_text_in_a_csv(tmp_path: Path, commit: str) -> None:
    """(found by the matrix on a fresh clone whose HEAD was 063e900: pandas read it as infinity)"""
    from lnbench.output.files import write_csv
    from lnbench.results import VERIFY, VerifyRow

    run = VERIFY.run(git_commit=commit, seed=1)
    rows = [VerifyRow(backend="torch", case="randn", dtype="f32", shape="2x8", tensor="y", status="PASS",
                      source_commit=commit)]
    write_csv(rows, tmp_path / "v.csv", run)
    back = load_result(tmp_path / "v.csv")
    assert back.run.git_commit == commit and back.rows["source_commit"].tolist() == [commit]
