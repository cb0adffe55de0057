"""No test judges the machine's speed: every place a test reads the clock in an assertion, compares a duration a
run measured with a number, or sleeps, is listed here with the reason it does not (tests/wall_clock_scan.py finds
them). A new one fails this test until it is rewritten (an injected clock, an event, fixture data) or listed with
its reason, so a wall-clock assertion cannot land unreviewed."""
from __future__ import annotations

from pathlib import Path

import pytest

from wall_clock_scan import scan_folder, scan_source

HANG = "a deadline that only ends a hung test (it asserts no speed: the work it waits for always comes)"
#: (file, function, kind) -> why it judges no speed
ALLOWED = {
    ("test_eta.py", "test_busy_threads_counts_running_tasks_less_lnbench_and_its_own_workers", "sleep"):
        "lets a busy child process reach the running state before /proc is read; the claim is the state, not a time",
    ("test_host_lock.py", "_arrive", "sleep"): "a file barrier's poll (workers meet at it; no time is judged)",
    ("test_host_lock.py", "_hold", "sleep"): "work done while holding the lock, not a wait for an event",
    ("test_host_lock.py", "_until", "clock"): HANG,
    ("test_host_lock.py", "_until", "sleep"): "the poll of a predicate, with a deadline that only ends a hung test",
    ("test_host_lock.py", "test_a_worker_waiting_for_the_lock_outlives_a_hung_holder", "clock"):
        "an order of two clock readings (the lock came after the holder's death), not a duration",
    ("test_output_claims.py", "_claimed_by", "sleep"): "the poll for a claim file a child writes",
    ("test_output_space.py", "test_a_real_disk_filling_during_a_longer_run_keeps_every_row", "clock"): HANG,
    ("test_output_space.py", "test_a_real_disk_filling_during_a_longer_run_keeps_every_row", "sleep"):
        "the poll for the run's first rows on disk",
    ("test_signals.py", "_wait_for", "sleep"): "the poll for a condition, with a deadline that only ends a hung test",
    ("test_terminal.py", "_in_tmux", "sleep"): "the poll of a tmux pane for the text a run prints",
    ("test_user_run.py", "test_a_signal_during_start_up_is_one_line_not_a_traceback", "clock"): HANG,
    ("test_user_run.py", "test_a_signal_during_start_up_is_one_line_not_a_traceback", "sleep"):
        "the poll for the child's signal handlers",
    ("test_verify_forks.py", "test_a_run_that_uses_no_worker_leaves_none_behind", "sleep"):
        "the poll for the early workers to be gone, with a deadline that only ends a hung test",
}


def test_every_clock_reading_and_sleep_in_the_tests_is_listed_with_its_reason():
    found = {(f.file, f.function, f.kind): f.line for f in scan_folder(Path(__file__).parent)}
    unlisted = sorted(f"{file}:{line} {function} ({kind})" for (file, function, kind), line in found.items()
                      if (file, function, kind) not in ALLOWED)
    assert not unlisted, "a test reads the clock or sleeps; rewrite it or list it in ALLOWED with why:\n" + \
        "\n".join(unlisted)
    stale = sorted(str(key) for key in ALLOWED if key not in found)
    assert not stale, f"listed but gone (remove from ALLOWED): {stale}"


@pytest.mark.parametrize("source, kind", [
    ("import time\ndef test_x():\n    start = time.monotonic()\n    run()\n    assert time.monotonic() - start < 5\n",
     "clock"),
    ("import time\ndef test_x():\n    t0 = time.perf_counter()\n    took = time.perf_counter() - t0\n"
     "    assert took < 1\n", "clock"),
    ("def test_x(results):\n    assert all(r.duration_s < 1.0 for r in results)\n", "clock"),
    ("def test_x(r):\n    assert r.payload['waited_s'] > 1.0\n", "clock"),
    ("import time\ndef test_x():\n    time.sleep(1)\n    assert done()\n", "sleep"),
])
def test_the_scan_finds_a_planted_wall_clock_assertion(source, kind):
    (finding,) = scan_source(source, "test_planted.py")
    assert (finding.function, finding.kind) == ("test_x", kind)


def test_the_scan_leaves_injected_clocks_and_child_programs_alone():
    source = ("import time\ndef test_x(monkeypatch):\n    clock = [0.0]\n"
              "    monkeypatch.setattr(time, 'monotonic', lambda: clock[0])\n    clock[0] += 5\n"
              "    assert estimate.remaining_s() < 3\n    code = 'import time; time.sleep(60)'\n")
    assert scan_source(source, "test_ok.py") == []
