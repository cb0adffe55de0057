"""The up-front estimate against the load read at the start (issue 57): a moment's count of busy threads is
averaged with the minute's load average, and the load multiplies the modelled time by eta.LOAD_CAP at most, so a
test suite's burst at the start of a run does not make its estimate several times long. /proc/stat and the load
average are injected: nothing here reads this machine's load or its clock."""
from __future__ import annotations

import builtins
import io
import statistics

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


def test_the_same_work_again_is_priced_by_its_own_earlier_times_whatever_the_model_says_now(tmp_path, monkeypatch):
    """The issue's case: the model of the kind moves between runs (its fit is refitted after each), so model ×
    the kind's actual/model priced a warm main job 0.60× its time. The same work (its signature) is priced by the
    median of its own earlier times, however the model has moved; other work of the kind keeps the ratio."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "calibration.json"))
    key = upfront.run_key("verify", ["flydsl", "torch"], "emu:gfx942", "medium")
    work = upfront.work_signature(["unit a", "unit b"], 2, False)
    for model_s, actual_s in ((25.0, 18.0), (16.0, 22.0), (20.0, 20.0)):
        assert upfront.record_run(upfront.estimate(key, model_s, (), work=work), actual_s)
    again = upfront.estimate(key, 13.0, (), work=work)
    assert again.same_work and again.runs == 3 and again.point_s == pytest.approx(20.0)
    assert again.ratio == pytest.approx(20.0 / 13.0)                    # the live estimate's prior
    assert "from 3 earlier runs of the same work here" in again.line("120 cases, 2 jobs", 1.0, 2)
    other = upfront.estimate(key, 13.0, (), work=upfront.work_signature(["unit a"], 2, False))
    assert not other.same_work
    assert other.point_s == pytest.approx(13.0 * statistics.median([18 / 25, 22 / 16, 20 / 20]))
    assert "of the same work" not in other.line("1 case, 1 job", 1.0, 2)


def test_the_same_work_is_scaled_by_the_load_counted_then_and_now_and_kept_apart_by_cache_state(tmp_path,
                                                                                                monkeypatch):
    """A run of the work recorded with the model counting a 2× slowdown (a busy machine) prices the same work on
    an idle machine at half its time; a cold run (compiles pending) is never priced from warm ones."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "calibration.json"))
    key = upfront.run_key("perf", ["torch"], "cpu", "small")
    work = upfront.work_signature("cases", "protocol")
    assert upfront.record_run(upfront.estimate(key, 30.0, (), work=work, slowdown=2.0), 40.0)
    assert upfront.estimate(key, 15.0, (), work=work, slowdown=1.0).point_s == pytest.approx(20.0)
    cold = upfront.estimate(key, 15.0, ("FlyDSL",), work=work)
    assert cold.point_s is None and cold.low_s < cold.high_s


def test_a_run_recorded_without_a_signature_or_with_a_bad_slowdown_is_not_the_same_work(tmp_path, monkeypatch):
    """Runs recorded before the signature (no "w") price by the kind's ratio; an observation whose "l" is not a
    number is dropped when the file is read (the file may hold anything)."""
    path = tmp_path / "calibration.json"
    monkeypatch.setenv(calibration.ENV, str(path))
    key = upfront.run_key("verify", ["torch"], "cpu", "tiny")
    work = upfront.work_signature("units")
    assert upfront.record_run(upfront.estimate(key, 10.0, ()), 12.0)          # no signature: an older lnbench
    first = upfront.estimate(key, 10.0, (), work=work)
    assert not first.same_work and first.point_s == pytest.approx(12.0)
    text = path.read_text()
    path.write_text(text.replace('"s": 12.0', '"s": 12.0, "w": "%s", "l": "busy"' % work))
    assert not upfront.estimate(key, 10.0, (), work=work).same_work


def test_verify_signs_its_work_by_its_units_jobs_and_process(tmp_path, monkeypatch):
    """The same verify again has the same signature; more jobs, or other units, are other work."""
    from lnbench.run.device import parse_device
    from lnbench.verify.calibrate import estimate_run
    from lnbench.verify.cases import Case

    monkeypatch.setenv(calibration.ENV, str(tmp_path / "calibration.json"))
    cpu = parse_device("cpu")
    units = [("torch", Case("randn", "f32", 4, 64, 1e-5, 1)), ("torch", Case("randn", "f32", 8, 64, 1e-5, 1))]

    def signed(chosen: list, jobs: int) -> str:
        return estimate_run(chosen, cpu, jobs, inline=jobs == 1)[1].upfront.work
    first = signed(units, 1)
    assert first and first == signed(units, 1)
    assert len({first, signed(units, 2), signed(units[:1], 1), signed(units[::-1], 1)}) == 4
