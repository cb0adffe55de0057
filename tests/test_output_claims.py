"""An output path is owned by one run (issue 33, item 2): a second run naming a file that a live lnbench run is
writing stops at once (exit 2, one line naming the other run); a claim left by a run killed hard blocks nothing;
a file left by a finished run is replaced as before. Real processes; each test fails on the code before (both
runs wrote, one run's rows were lost without a word)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from lnbench.output.claims import sidecar_of
from cli_helpers import invoke
from commands_under_test import ABI, INSPECT, PERF, VERIFY

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP/SIGKILL and flock")

HOLD = ("import sys, time; from pathlib import Path; from lnbench.output.claims import claim; "
        "claim(Path(sys.argv[1])); print('claimed', flush=True); time.sleep(3600)")   # until the test kills it


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "200", "OMP_NUM_THREADS": "1",
           "LNBENCH_RESULTS_DIR": str(tmp_path / "results")}
    env.pop("LNBENCH_DEBUG", None)
    return env


def _lnbench(args: list[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lnbench.cli", *args], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _claimed_by(path: Path, procs: list[subprocess.Popen], timeout_s: float = 120) -> subprocess.Popen:
    """Wait until one of `procs` has claimed `path` (its pid in the sidecar); that process."""
    sidecar, deadline = sidecar_of(path), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            first = sidecar.read_text().partition("\n")[0]
        except FileNotFoundError:
            first = ""
        owner = next((p for p in procs if first == str(p.pid)), None)
        if owner is not None:
            return owner
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    raise AssertionError(f"no claim on {path} within {timeout_s} s")


def _finish(proc: subprocess.Popen, timeout_s: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, err


def _refusal(path: Path, owner: subprocess.Popen, command_line: str) -> str:
    return (f"lnbench: error: {path} is being written by another lnbench run (pid {owner.pid}: {command_line}); "
            f"choose another path or wait")


@pytest.fixture
def holder(tmp_path):
    """holder(path): a live process (not lnbench's CLI) that owns `path` until the test ends; its pid."""
    started: list[subprocess.Popen] = []

    def hold(path: Path) -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], env=_env(tmp_path), stdout=subprocess.PIPE,
                                text=True)
        started.append(proc)
        assert proc.stdout.readline().strip() == "claimed"
        return proc.pid

    yield hold
    for proc in started:
        proc.kill()
        proc.wait()


@linux
def test_two_runs_started_together_naming_one_csv_one_owns_it_the_other_stops_at_once(tmp_path):
    same = tmp_path / "same.csv"
    runs = [_lnbench([*VERIFY, "--csv", str(same), "--json", str(tmp_path / f"{n}.json")], tmp_path)
            for n in ("a", "b")]
    try:
        owner = _claimed_by(same, runs)
        owner.send_signal(signal.SIGSTOP)        # the owner is still writing while the other gets there
        other = next(p for p in runs if p is not owner)
        code, out, err = _finish(other)
        owner.send_signal(signal.SIGCONT)
        owner_code, owner_out, owner_err = _finish(owner)
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
    owner_line = shlex.join(owner.args[3:])
    assert code == 2, err
    assert err.strip() == _refusal(same, owner, f"lnbench {owner_line}"), err
    assert "CSV written" not in out and "PASS" not in out, out           # stopped before any work
    other_json = Path(other.args[-1])
    assert not other_json.exists() and not list(tmp_path.glob(f".{other_json.name}.*"))
    assert owner_code == 0, owner_err
    frame = pd.read_csv(same)                                                 # the owner's rows, complete
    assert len(frame) == 28 and frame["complete"].all()
    assert set(frame["command_line"]) == {f"lnbench {owner_line}"}
    assert not sidecar_of(same).exists()


@linux
def test_json_md_and_the_default_csv_of_a_live_run_are_its_own(tmp_path):
    js, md = tmp_path / "shared.json", tmp_path / "shared.md"
    owner = _lnbench([*VERIFY, "--json", str(js), "--md", str(md)], tmp_path)
    try:
        _claimed_by(md, [owner])                 # the last of its outputs claimed
        owner.send_signal(signal.SIGSTOP)
        (default,) = (tmp_path / "results").glob(".verify-*.lnbench-claim")
        default_csv = tmp_path / "results" / default.name[1:].removesuffix(".lnbench-claim")
        line = f"lnbench {shlex.join(owner.args[3:])}"
        for option, path in (("--csv", default_csv), ("--json", js), ("--md", md)):
            result = invoke(*VERIFY, option, str(path), *(["--no-csv"] if option != "--csv" else []))
            assert result.exit_code == 2, result.output
            assert result.output.strip() == _refusal(path, owner, line), result.output
        owner.send_signal(signal.SIGCONT)
        code, _, err = _finish(owner)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert code == 0, err
    assert json.loads(js.read_text())["metadata"]["complete"] is True and md.read_text().strip()
    assert len(pd.read_csv(default_csv)) == 28


@linux
def test_a_claim_left_by_a_run_killed_hard_does_not_block_the_next_run(tmp_path):
    out = tmp_path / "x.csv"
    first = _lnbench([*VERIFY, "--csv", str(out)], tmp_path)
    try:
        _claimed_by(out, [first])
        first.send_signal(signal.SIGSTOP)        # killed while it owns the file
        first.kill()
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    assert sidecar_of(out).read_text().startswith(f"{first.pid}\n")          # the dead run's claim is left behind
    second = _lnbench([*VERIFY, "--csv", str(out)], tmp_path)
    code, _, err = _finish(second)
    assert code == 0, err
    frame = pd.read_csv(out)
    assert len(frame) == 28 and frame["complete"].all()
    assert not sidecar_of(out).exists()


@linux
def test_a_file_left_by_a_finished_run_is_replaced(tmp_path):
    out = tmp_path / "x.csv"
    for _ in range(2):
        result = invoke(*VERIFY, "--csv", str(out), env={"OMP_NUM_THREADS": "1"})
        assert result.exit_code == 0, result.output
    assert len(pd.read_csv(out)) == 28 and not sidecar_of(out).exists()


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("perf")
    result = invoke(*PERF, "--json", str(out / "p.json"), "--no-csv",
                    env={"OMP_NUM_THREADS": "1", "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return out / "p.json"


def _commands(tmp_path: Path, perf: Path) -> list[tuple[list[str], Path]]:
    """(a command line, the output it names) for every command that writes a file."""
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    shutil.copy(perf, base)
    shutil.copy(perf, new)
    out = tmp_path / "held"
    return [([*VERIFY, "--csv", str(out / "v.csv")], out / "v.csv"),
            ([*VERIFY, "--json", str(out / "v.json")], out / "v.json"),
            ([*VERIFY, "--md", str(out / "v.md")], out / "v.md"),
            ([*PERF, "--csv", str(out / "p.csv")], out / "p.csv"),
            ([*PERF, "--json", str(out / "p.json")], out / "p.json"),
            ([*ABI, "--csv", str(out / "a.csv")], out / "a.csv"),
            ([*INSPECT, "--csv", str(out / "i.csv")], out / "i.csv"),
            (["compare", str(base), str(new), "-q", "--csv", str(out / "c.csv")], out / "c.csv"),
            (["compare", str(base), str(new), "-q", "--md", str(out / "c.md")], out / "c.md"),
            (["merge", "--force", str(base), "--csv", str(out / "m.csv")], out / "m.csv"),
            (["merge", "--force", str(base), "--json", str(out / "m.json"), "--no-csv"], out / "m.json"),
            (["plot", str(new), "--out", str(out)], out / "new-bf16-hot.png"),
            (["peak", "--device", "cpu", "--size-mib", "1", "--runs", "2", "--peak-file", str(out / "peak.json")],
             out / "peak.json")]


@linux
def test_every_command_stops_at_once_on_a_file_a_live_run_writes(tmp_path, holder, perf_json, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    for args, path in _commands(tmp_path, perf_json):
        if args[0] == "plot":
            pytest.importorskip("matplotlib")
        pid = holder(path)
        result = invoke(*args, env={"OMP_NUM_THREADS": "1", "LNBENCH_RESULTS_DIR": str(tmp_path / "results")})
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2, (args, result.output)
        assert lines[-1].startswith(f"lnbench: error: {path} is being written by another lnbench run (pid {pid}: "
                                    f"-c {path}); choose another path or wait"), (args, result.output)
        assert not path.exists(), args
    results = tmp_path / "results"
    assert not results.exists() or not list(results.iterdir())       # no default CSV, no claim left behind
