"""The host lock of a run on several GPUs (lnbench.measure.host_lock): between processes, an exclusive holder
overlaps nobody, shared holders overlap each other, a waiting exclusive taker is not starved by shared ones,
and a case's Section takes it exclusive exactly when the case is host-bound.

What happens at once is made to happen by barriers (files each process writes and waits for), never by
sleeping "long enough"; the deadlines on those waits (HANG_S) only end a test that would otherwise hang."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from lnbench.measure.host_lock import HostLock, Section

#: a wait for another process that has not come within this long is a hang (the test fails); never a speed bet
HANG_S = 120.0


def _arrive(folder: str, count: int) -> bool:
    """A barrier between processes: mark this one as here, wait until `count` are (False: they never came)."""
    import os

    Path(folder).mkdir(exist_ok=True)
    (Path(folder) / str(os.getpid())).write_text("")
    deadline = time.monotonic() + HANG_S
    while len(list(Path(folder).iterdir())) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _hold(path: str, log: str, kinds: str, hold_s: float, gate: str, count: int) -> None:
    """Take the lock once per letter of `kinds` (s: shared, x: exclusive), holding it `hold_s`; log each span.
    Every process starts when all `count` have started (`gate`), so they ask for the lock together."""
    lock = HostLock(path)
    assert _arrive(gate, count)
    spans = []
    for kind in kinds:
        lock.acquire(exclusive=kind == "x")
        begin = time.monotonic()
        time.sleep(hold_s)                  # the work done holding it (others ask meanwhile)
        end = time.monotonic()
        lock.release()
        spans.append(f"{kind} {begin} {end}")
    with open(log, "a") as handle:
        handle.write("\n".join(spans) + "\n")


def _spans(log: Path) -> list[tuple[str, float, float]]:
    out = []
    for line in log.read_text().split("\n")[:-1]:         # whole lines only (a writer may be mid-line)
        if line:
            kind, begin, end = line.split()
            out.append((kind, float(begin), float(end)))
    return out


def _run(tmp_path: Path, plans: list[tuple[str, float]]) -> list[tuple[str, float, float]]:
    context = multiprocessing.get_context("spawn")
    log = tmp_path / "spans.log"
    gate = str(tmp_path / "gate")
    procs = [context.Process(target=_hold, args=(str(tmp_path / "host.lock"), str(log), kinds, hold, gate,
                                                 len(plans)))
             for kinds, hold in plans]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(HANG_S)
        assert proc.exitcode == 0
    return _spans(log)


def test_an_exclusive_holder_overlaps_nobody(tmp_path):
    spans = _run(tmp_path, [("sxsxs", 0.03), ("ssxss", 0.03), ("sssss", 0.03)])
    assert len(spans) == 15
    for i, (kind, begin, end) in enumerate(spans):
        if kind == "x":
            assert all(e <= begin or b >= end for j, (_, b, e) in enumerate(spans) if j != i), (kind, begin, end)


def _share(path: str, folder: str, count: int, out: str) -> None:
    """Hold the lock shared until `count` processes hold it (a barrier passed only if they hold it at once)."""
    lock = HostLock(path)
    lock.acquire(exclusive=False)
    together = _arrive(folder, count)
    lock.release()
    Path(out).write_text("together" if together else "alone")


def test_shared_holders_hold_it_at_once(tmp_path):
    """Three processes each take the lock shared and keep it until all three hold it: only a lock that lets
    shared holders in side by side lets them pass (one that made them take turns would leave each alone)."""
    context = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"out{k}" for k in range(3)]
    procs = [context.Process(target=_share, args=(str(tmp_path / "host.lock"), str(tmp_path / "holding"), 3,
                                                  str(out))) for out in outs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(2 * HANG_S)
        assert proc.exitcode == 0
    assert [out.read_text() for out in outs] == ["together"] * 3


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def _order(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _blocked(pid: int) -> bool:
    """Whether process `pid` waits for a flock (a `->` line of /proc/locks: a request not granted yet)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
            return True
    return False


def _take(path: str, exclusive: bool, name: str, log: str, hold_until: str) -> None:
    """Take the lock, write `name` to the log of who got it in turn, and give it back (at once, or once the
    file `hold_until` exists)."""
    lock = HostLock(path)
    lock.acquire(exclusive=exclusive)
    with open(log, "a") as handle:
        handle.write(name + "\n")
    if hold_until:
        _until(lambda: Path(hold_until).exists(), f"{hold_until} was never written")
    lock.release()


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks (Linux)")
def test_a_waiting_exclusive_taker_is_not_starved_by_shared_ones(tmp_path):
    """A holds the lock shared; X asks for it exclusive and waits; then B asks for it shared. flock alone lets B
    in at once, beside A (a shared request passes a waiting exclusive one), so readers coming and going would
    keep X out for ever; with the turnstile B waits behind X. Who got it, in turn: A, X, B."""
    context = multiprocessing.get_context("spawn")
    path, log, release = str(tmp_path / "host.lock"), tmp_path / "order.log", tmp_path / "release-a"
    procs = []

    def start(name: str, exclusive: bool, hold_until: str = "") -> int:
        proc = context.Process(target=_take, args=(path, exclusive, name, str(log), hold_until))
        proc.start()
        procs.append(proc)
        return proc.pid

    try:
        start("a", False, str(release))
        _until(lambda: _order(log) == ["a"], "A took the lock")
        x = start("x", True)
        _until(lambda: _blocked(x), "X waits for the lock")
        b = start("b", False)
        _until(lambda: _blocked(b) or "b" in _order(log), "B waits for the lock or has it")
        release.write_text("")
        for proc in procs:
            proc.join(HANG_S)
            assert proc.exitcode == 0
    finally:
        release.write_text("")
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert _order(log) == ["a", "x", "b"]


@pytest.mark.parametrize("by_size, threshold, share, alone", [
    (True, None, 0.1, "size"), (False, 0.7, 0.7, "measured"), (False, 0.7, 0.69, ""), (False, None, 1.0, "")])
def test_a_section_takes_the_lock_exclusive_only_for_a_host_bound_case(tmp_path, by_size, threshold, share, alone):
    lock = HostLock(tmp_path / "host.lock")
    with Section(lock, by_size, threshold) as section:
        assert lock.held == "shared"
        assert section.before_runs(share) is bool(alone)
        assert lock.held == ("exclusive" if alone else "shared") and section.alone == alone
    assert lock.held == ""


def test_without_a_lock_a_section_does_nothing(monkeypatch):
    from lnbench.measure.host_lock import LOCK_VAR, host_lock_from_env

    monkeypatch.delenv(LOCK_VAR, raising=False)
    assert host_lock_from_env() is None
    with Section(None, True, 0.0) as section:
        assert section.before_runs(1.0) is False and section.alone == ""


LOCK_PROBE = """
import os, time
from pathlib import Path
from lnbench.measure.host_lock import host_lock_from_env
from lnbench.run.workers import read_spec, wait_turn, write_result
spec, out, prog = read_spec()
lock = host_lock_from_env()
wait_turn()
Path(spec["asking"]).write_text(str(os.getpid()))        # its turn has begun: it asks for the lock now
lock.acquire(exclusive=False)
got = time.monotonic()
lock.release()
write_result(out, {"got": got, "waited_s": lock.waited_s})
"""

#: another GPU's worker, hung holding the lock exclusive (until it is killed)
HUNG_HOLDER = ("import sys, time; from lnbench.measure.host_lock import HostLock; "
               "lock = HostLock(sys.argv[1]); lock.acquire(exclusive=True); print('held', flush=True); "
               "time.sleep(3600)")


def test_a_worker_waiting_for_the_lock_outlives_a_hung_holder(tmp_path):
    """Another GPU's worker holds the lock exclusive and hangs. This GPU's worker (turn timeout 3 s) asks for the
    lock and waits: it is still waiting, not killed, a second past its timeout (waiting does not count); when
    the hung holder is killed (as its own run's timeout would) it gets the lock and finishes."""
    import os
    import subprocess
    import sys
    import threading

    from lnbench.measure.host_lock import LOCK_VAR
    from lnbench.run.workers import run_workers

    timeout_s = 3.0
    lock_path, asking = tmp_path / "host.lock", tmp_path / "asking"
    (tmp_path / "lock_probe.py").write_text(LOCK_PROBE)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", LOCK_VAR: str(lock_path)}
    hung = subprocess.Popen([sys.executable, "-c", HUNG_HOLDER, str(lock_path)], stdout=subprocess.PIPE, text=True)
    results = {}
    patient = threading.Thread(target=lambda: results.setdefault(
        "patient", run_workers("lock_probe", [{"asking": str(asking)}], timeout_s, env=env)[0]))
    try:
        assert hung.stdout.readline().strip() == "held"
        patient.start()
        _until(lambda: asking.exists() or not patient.is_alive(), "the patient worker asked for the lock")
        assert asking.exists(), results
        patient.join(timeout_s + 1.0)       # the lock stays held a second past the patient's turn timeout
        assert patient.is_alive(), results  # still waiting for it, not killed
        killed_at = time.monotonic()
    finally:
        hung.kill()
        hung.wait()
    patient.join(HANG_S)
    assert results["patient"].ok and not results["patient"].timed_out, results["patient"].problem()
    assert results["patient"].payload["got"] > killed_at         # the lock came with the hung holder's death
