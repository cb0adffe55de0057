"""SIGTERM / SIGKILL of the lnbench parent: no worker outlives it, no temp folder is left (lnbench.run.processes)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lnbench.run.processes import Terminated, terminate_on_signals

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")

PERF = ["perf", "--device", "cpu", "--backend", "torch", "--shapes", "2x64,3x257", "--op", "fwd,bwd",
        "--mode", "hot", "-P", "2", "-R", "5", "--warmup-s", "0", "-q"]
#: perf's worker 0 hangs in its turn after its first case (lnbench.perf.worker_main's test hook): its timed turn
#: goes on until the run is stopped, whatever the machine's speed
HANG_IN_TURN = {"LNBENCH_PERF_FAULT": "0:hang:1"}
ABI = ["abi-compare", "--pair", "torch-entry", "--device", "cpu", "--runtime-only", "--shapes", "2x64",
       "--dtype", "f32", "--op", "fwd", "-P", "2", "-R", "5", "--warmup-s", "3", "-q"]


#: how long a step may take before the test gives up: generous, since a loaded machine starts workers slowly
#: (the waits return as soon as the step is done)
WAIT_S = 120.0


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pid and _alive(int(entry)):
                found.append(int(entry))
    return found


def _wait_for(predicate, timeout_s: float, step_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    return predicate()


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "200", **(HANG_IN_TURN if args[0] == "perf" else {})}
    env.pop("LNBENCH_DEBUG", None)
    env.pop("LNBENCH_KEEP_WORKER_DIRS", None)
    return subprocess.Popen([sys.executable, "-m", "lnbench.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signal_dispositions)


def _default_signal_dispositions() -> None:
    """In the child before exec: the signals these tests send act as they do by default, whatever the host
    handed the test run (an ignored disposition survives exec)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _workers(proc: subprocess.Popen, count: int) -> list[int]:
    """The pids of the parent's worker processes, once `count` of them run (fails the test otherwise)."""
    pids = _wait_for(lambda: len(_children(proc.pid)) >= count and _children(proc.pid), WAIT_S)
    if not pids:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"no worker process appeared (exit {proc.returncode}): {err[-2000:]}")
    return pids


def _in_turn(tmp_path: Path) -> None:
    """Wait until worker 0, in its turn, has finished a unit (a line in its progress file): timed work is going
    on, and goes on (perf: worker 0 hangs there, HANG_IN_TURN; abi-compare: worker 1's turn, which warms up each
    side for 3 s, is still to come)."""
    def progressed() -> bool:
        for path in (tmp_path / "tmp").glob("lnbench-workers-*/w0/progress.txt"):
            try:
                return bool(path.read_text())
            except OSError:
                return False
        return False

    assert _wait_for(progressed, WAIT_S), "worker 0 never finished a unit of its turn"


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("args", [PERF, ABI], ids=["perf", "abi-compare"])
def test_sigterm_stops_workers_and_cleans_up(args: list[str], tmp_path: Path) -> None:
    proc = _start(args, tmp_path)
    pids = _workers(proc, 2)
    try:
        _in_turn(tmp_path)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 128 + signal.SIGTERM, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines.count("lnbench: terminated") == 1, err
        assert lines[-1] == "lnbench: terminated", err
        assert "Traceback" not in err, err
        assert _wait_for(lambda: not any(_alive(pid) for pid in pids), WAIT_S), \
            f"workers still running: {[pid for pid in pids if _alive(pid)]}"
        assert not list((tmp_path / "tmp").glob("lnbench-workers-*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill_leftovers(pids)


def test_sigkill_of_parent_ends_workers(tmp_path: Path) -> None:
    proc = _start(PERF, tmp_path)
    pids = _workers(proc, 2)
    try:
        _in_turn(tmp_path)          # (a worker waiting for its turn would exit anyway: its stdin closes)
        proc.kill()
        proc.communicate(timeout=WAIT_S)
        left = _wait_for(lambda: not any(_alive(pid) for pid in pids), WAIT_S)
        assert left, f"workers outlived a SIGKILLed parent: {[pid for pid in pids if _alive(pid)]}"
    finally:
        _kill_leftovers(pids)


@pytest.fixture
def sighup_disposition():
    """Set SIGHUP's disposition for one test and put back what the host gave (nohup and some CI runners
    start the test run with SIGHUP ignored)."""
    inherited = signal.getsignal(signal.SIGHUP)
    yield lambda disposition: signal.signal(signal.SIGHUP, disposition)
    signal.signal(signal.SIGHUP, inherited)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_terminate_on_signals_raises_once_and_restores(sighup_disposition) -> None:
    sighup_disposition(signal.SIG_DFL)
    with pytest.raises(Terminated) as caught:
        with terminate_on_signals():
            os.kill(os.getpid(), signal.SIGHUP)         # os.kill runs the handler before it returns
            pytest.fail("SIGHUP raised nothing")
    assert caught.value.exit_code == 128 + signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_sighup_ignored_by_the_parent_stays_ignored(sighup_disposition) -> None:
    """Under nohup SIGHUP is ignored on purpose (the run should outlive the terminal): lnbench keeps it so."""
    sighup_disposition(signal.SIG_IGN)
    with terminate_on_signals():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)                 # ignored: nothing is raised (a handler would have
                                                            # run before os.kill returned)
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
