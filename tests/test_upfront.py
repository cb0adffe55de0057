"""The up-front estimate against the load read at the start (issue 57): a moment's count of busy threads is
averaged with the minute's load average, and the load multiplies the modelled time by eta.LOAD_CAP at most, so a
test suite's burst at the start of a run does not make its estimate several times long. /proc/stat and the load
average are injected: nothing here reads this machine's load or its clock."""
from __future__ import annotations

import builtins
import io

import pytest

from lnbench.run import calibration, eta, upfront
from lnbench.verify.estimate import Estimate


@pytest.fixture
def machine(monkeypatch):
    """Set the machine's running tasks now (procs_running, lnbench's own process among them) and its 1-minute load
    average: machine(running, loadavg)."""
    real_open = builtins.open

    def set_load(running: int, loadavg: float) -> None:
        stat = f"cpu 1 2\nprocs_running {running}\n"
        monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(stat) if path == "/proc/stat"
                            else real_open(path, *a, **k))
        monkeypatch.setattr(eta.os, "getloadavg", lambda: (loadavg, loadavg, loadavg))
    return set_load


def _wall(others: float) -> float:
    """A 2-job verify of 20 units of 1 s on 2 cores with `others` busy threads: its modelled wall seconds."""
    return Estimate({i: 1.0 for i in range(20)}, 2, others=others, cpus=2, startup_s=0.0).wall_s


def test_a_burst_at_the_start_is_averaged_with_the_minute_and_capped(machine):
    """The held-out perf's case: 8 busy threads counted at the start on 2 cores (a test suite's burst, gone a
    second later) had priced the run 5× an idle one and made its estimate 1.93× long. With the minute's load at 2
    the count is 5, and the load multiplies the estimate by LOAD_CAP (2) at most."""
    machine(9, 2.0)
    others = eta.busy_threads(samples=2, interval_s=0)
    assert others == pytest.approx((8 + 2) / 2)
    assert _wall(others) == pytest.approx(eta.LOAD_CAP * _wall(0.0))
    assert _wall(8.0) / _wall(0.0) == eta.LOAD_CAP < (8 + 2) / 2             # the count alone, capped too


def test_a_load_that_has_stayed_is_counted(machine):
    """Two busy processes for the last minute (the issue's case, `python3 -c 'while 1: pass'` twice): both readings
    say 2, and a 2-job run on 2 cores is priced twice an idle one."""
    machine(3, 2.0)
    others = eta.busy_threads(samples=2, interval_s=0)
    assert others == pytest.approx(2.0)
    assert _wall(others) == pytest.approx(2 * _wall(0.0))


def test_a_lagging_minute_after_a_busy_spell_is_averaged_with_the_quiet_now(machine):
    """The load average still counts a previous run's finished workers (12 in the minute, 0 other threads now):
    averaged, and the slowdown capped."""
    machine(1, 12.0)
    others = eta.busy_threads(samples=2, interval_s=0)
    assert others == pytest.approx(6.0)
    assert _wall(others) == pytest.approx(eta.LOAD_CAP * _wall(0.0))


def test_the_history_point_of_a_run_is_at_most_the_cap_off_its_idle_runs(tmp_path, monkeypatch):
    """Runs of a kind recorded idle (actual = model): the next, started in a burst the start reading counts as 8
    busy threads, is priced at most LOAD_CAP × their time (it was 5× before the cap), and the running estimate's
    prior is the history's ratio (1), not the load's."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "calibration.json"))
    key = upfront.run_key("verify", ["torch"], "cpu", "tiny")
    for _ in range(3):
        assert upfront.record_run(upfront.estimate(key, _wall(0.0), ()), _wall(0.0))
    busy = upfront.estimate(key, _wall(8.0), ())
    assert busy.point_s == pytest.approx(eta.LOAD_CAP * _wall(0.0)) and busy.ratio == pytest.approx(1.0)
