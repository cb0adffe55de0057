"""The host lock of a run on several GPUs (lnbench.measure.host_lock): between processes, an exclusive holder
overlaps nobody, shared holders overlap each other, a waiting exclusive taker is not starved by shared ones,
and a case's Section takes it exclusive exactly when the case is host-bound."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from lnbench.measure.host_lock import HostLock, Section


def _hold(path: str, log: str, kinds: str, hold_s: float, start_at: float) -> None:
    """Take the lock once per letter of `kinds` (s: shared, x: exclusive), holding it `hold_s`; log each span."""
    lock = HostLock(path)
    while time.time() < start_at:
        time.sleep(0.001)
    spans = []
    for kind in kinds:
        lock.acquire(exclusive=kind == "x")
        begin = time.monotonic()
        time.sleep(hold_s)
        end = time.monotonic()
        lock.release()
        spans.append(f"{kind} {begin} {end}")
    with open(log, "a") as handle:
        handle.write("\n".join(spans) + "\n")


def _spans(log: Path) -> list[tuple[str, float, float]]:
    out = []
    for line in log.read_text().split("\n"):
        if line:
            kind, begin, end = line.split()
            out.append((kind, float(begin), float(end)))
    return out


def _run(tmp_path: Path, plans: list[tuple[str, float]], delay_s: float = 0.5) -> list[tuple[str, float, float]]:
    context = multiprocessing.get_context("spawn")
    log = tmp_path / "spans.log"
    start_at = time.time() + delay_s + 1.0
    procs = [context.Process(target=_hold, args=(str(tmp_path / "host.lock"), str(log), kinds, hold, start_at))
             for kinds, hold in plans]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    return _spans(log)


def test_an_exclusive_holder_overlaps_nobody_and_shared_holders_overlap(tmp_path):
    spans = _run(tmp_path, [("sxsxs", 0.03), ("ssxss", 0.03), ("sssss", 0.03)])
    assert len(spans) == 15
    for i, (kind, begin, end) in enumerate(spans):
        if kind == "x":
            assert all(e <= begin or b >= end for j, (_, b, e) in enumerate(spans) if j != i), (kind, begin, end)
    shared = [(b, e) for k, b, e in spans if k == "s"]
    overlaps = sum(1 for i, (b, e) in enumerate(shared) for (b2, e2) in shared[i + 1:] if b < e2 and b2 < e)
    assert overlaps > 0                     # shared holders did time at once


def test_a_waiting_exclusive_taker_is_not_starved_by_shared_ones(tmp_path):
    """Two processes keep the lock shared back to back (their spans overlap, so it is never free without the
    turnstile); a third asks for it exclusive once and must get it within a couple of shared spans."""
    context = multiprocessing.get_context("spawn")
    path = str(tmp_path / "host.lock")
    log = tmp_path / "spans.log"
    start_at = time.time() + 1.5
    readers = [context.Process(target=_hold, args=(path, str(log), "s" * 40, 0.05, start_at + k * 0.025))
               for k in range(2)]
    for proc in readers:
        proc.start()
    while time.time() < start_at + 0.3:
        time.sleep(0.01)
    lock = HostLock(path)
    asked = time.monotonic()
    lock.acquire(exclusive=True)
    waited = time.monotonic() - asked
    lock.release()
    for proc in readers:
        proc.join(60)
    assert waited < 0.5, waited                     # the readers go on for ~2 s: it got in between
    assert len(_spans(log)) == 80


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
import time
from lnbench.measure.host_lock import host_lock_from_env
from lnbench.measure.workers import read_spec, wait_turn, write_result
spec, out, prog = read_spec()
lock = host_lock_from_env()
wait_turn()
time.sleep(spec["before_s"])
lock.acquire(exclusive=spec["exclusive"])
got = time.monotonic()
time.sleep(spec["hold_s"])          # the hung one holds it far past its timeout
lock.release()
write_result(out, {"got": got, "waited_s": lock.waited_s})
"""


def test_a_worker_waiting_for_the_lock_outlives_a_hung_holder(tmp_path):
    """Two 'GPUs' (two run_workers calls at once, one lock): the first worker takes the lock exclusive and
    hangs; it is killed at its turn timeout (3 s). The second waits for the lock longer than that timeout, is
    not killed for it (waiting does not count), gets the lock when the hung one dies, and finishes."""
    import os
    import threading

    from lnbench.measure.host_lock import LOCK_VAR
    from lnbench.measure.workers import run_workers

    (tmp_path / "lock_probe.py").write_text(LOCK_PROBE)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           LOCK_VAR: str(tmp_path / "host.lock")}
    results = {}

    def gpu(name, spec):
        results[name] = run_workers("lock_probe", [spec], 3.0, env=env)[0]

    hung = threading.Thread(target=gpu, args=("hung", {"before_s": 0.0, "exclusive": True, "hold_s": 60}))
    patient = threading.Thread(target=gpu, args=("patient", {"before_s": 1.0, "exclusive": False, "hold_s": 1.5}))
    hung.start(); patient.start()
    hung.join(60); patient.join(60)
    assert results["hung"].timed_out and not results["hung"].ok
    assert results["patient"].ok, results["patient"].problem()
    assert results["patient"].payload["waited_s"] > 1.0         # it waited for the hung worker's death
