"""Workers start up together and take their timed turns one at a time (lnbench.run.workers), loop counts
give way for slow calls (lnbench.measure.timing.choose_iters), and long commands show life in a log
(lnbench.run.progress).

The probe workers here take no real time: each step *spends* seconds on a ledger (a file per worker), and the
parent's clock is the sum of the ledgers (`LedgerClock`), so a turn's duration and a timeout are what the
probes say, on any machine. Orderings (who started after whom) come from the workers' own time stamps, and
"side by side" from a barrier that only workers running at once can pass."""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from lnbench.run import workers
from lnbench.measure.timing import choose_iters
from lnbench.run.progress import CommandProgress

#: what the probes share: spend() moves the test's clock, together() is a barrier, hang() waits to be killed
PROBE_TOOLS = """
import os, time
from pathlib import Path

def spend(spec, seconds, _spent=[0.0]):
    _spent[0] += seconds
    ledger = Path(spec["ledger"])
    tmp = ledger / f"{os.getpid()}.tmp"
    tmp.write_text(repr(_spent[0]))
    os.replace(tmp, ledger / f"{os.getpid()}.s")

def together(folder, count):
    # return once `count` workers have arrived here; the deadline only ends a hung test (the parent's clock
    # does not move while a worker waits, so its timeout would never end one)
    Path(folder).mkdir(exist_ok=True)
    (Path(folder) / str(os.getpid())).write_text("")
    deadline = time.monotonic() + 120
    while len(list(Path(folder).iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.01)

def others_ready(count):
    # every other worker of the run waits for its turn (its ready.0, lnbench.run.workers.wait_turn): what this
    # one spends from now on cannot count against their start-ups (the deadline only ends a hung test)
    mine = Path(os.environ["LNBENCH_WORKER_READY_FILE"]).parent
    others = [mine.parent / f"w{i}" / "ready.0" for i in range(count) if f"w{i}" != mine.name]
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in others) and time.monotonic() < deadline:
        time.sleep(0.01)

def hang():
    time.sleep(3600)                          # hung: only the parent ends it
"""

PROBE = PROBE_TOOLS + """
from lnbench.run.workers import read_spec, report_progress, wait_turn, write_result
spec, out, prog = read_spec()
started = time.time()
if spec.get("together"):
    together(spec["together"], spec["count"])  # the start-ups run side by side, or this never returns
if spec.get("hang") == "start-up":
    others_ready(spec["count"])
spend(spec, spec["startup_s"])                  # stands in for importing torch and creating a context
if spec.get("hang") == "start-up":
    hang()
ready = time.time()
wait_turn()
turn = time.time()
spend(spec, spec["work_s"])
if spec.get("hang") == "turn":
    hang()
report_progress(prog, "case done")
write_result(out, {"started": started, "ready": ready, "turn": turn, "end": time.time()})
"""


PHASED = PROBE_TOOLS + """
from lnbench.run.workers import read_spec, wait_turn, write_result
spec, out, prog = read_spec()
marks = {}
for phase, seconds in (("stream", 0.3), ("setup", 0.6), ("kernel", 0.2)):
    wait_turn()
    marks[phase] = [time.time()]
    if phase == "setup":
        together(spec["together"], spec["count"])   # every worker's set-up is under way at once
    spend(spec, seconds)
    marks[phase].append(time.time())
write_result(out, marks)
"""


class LedgerClock:
    """The parent's clock: the seconds every probe has spent so far (the sum of their ledgers)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self) -> float:
        return sum(float(path.read_text()) for path in self.folder.glob("*.s"))


@pytest.fixture
def probe_env(tmp_path):
    (tmp_path / "turn_probe.py").write_text(PROBE)
    (tmp_path / "phased_probe.py").write_text(PHASED)
    return {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@pytest.fixture
def ledger(tmp_path) -> Path:
    folder = tmp_path / "ledger"
    folder.mkdir()
    return folder


def _spec(ledger: Path, startup_s: float = 0.0, work_s: float = 0.0, **more) -> dict:
    return {"ledger": str(ledger), "startup_s": startup_s, "work_s": work_s, **more}


def test_start_ups_overlap_and_turns_never_do(probe_env, ledger, tmp_path):
    specs = [_spec(ledger, 1.0, 0.3, together=str(tmp_path / "start-ups"), count=3)] * 3
    seen: list[tuple[int, int, str]] = []
    results = workers.run_workers("turn_probe", specs, timeout_s=60, env=probe_env, clock=LedgerClock(ledger),
                                  on_progress=lambda i, n, label: seen.append((i, n, label)))
    assert all(r.ok for r in results), [r.problem() for r in results]
    marks = [r.payload for r in results]
    assert max(m["started"] for m in marks) < min(m["ready"] for m in marks)  # start-ups ran side by side
    assert max(m["ready"] for m in marks) <= min(m["turn"] for m in marks)    # every start-up done before any turn
    for before, after in zip(marks, marks[1:]):
        assert before["end"] <= after["turn"]                                 # turns one after another
    assert [(i, n, label) for i, n, label in seen] == [(0, 1, "case done"), (1, 1, "case done"), (2, 1, "case done")]
    # a worker's time is its turn: 0.3 s each, not the 3 s of start-ups nor the others' turns
    assert [r.duration_s for r in results] == pytest.approx([0.3, 0.3, 0.3])


def test_a_parallel_phase_runs_side_by_side_only_after_every_sequential_turn(probe_env, ledger, tmp_path):
    phases = (workers.SEQUENTIAL, workers.PARALLEL, workers.SEQUENTIAL)
    specs = [_spec(ledger, together=str(tmp_path / "set-ups"), count=3)] * 3
    results = workers.run_workers("phased_probe", specs, timeout_s=60, env=probe_env, phases=phases,
                                  clock=LedgerClock(ledger))
    assert all(r.ok for r in results), [r.problem() for r in results]
    marks = [r.payload for r in results]
    for phase in ("stream", "kernel"):                                        # one at a time
        spans = sorted(m[phase] for m in marks)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    setups = [m["setup"] for m in marks]
    assert max(m["stream"][1] for m in marks) <= min(s[0] for s in setups)   # after every stream turn
    assert max(s[0] for s in setups) < min(s[1] for s in setups)             # side by side
    assert max(s[1] for s in setups) <= min(m["kernel"][0] for m in marks)   # before any kernel turn
    # turns only: 0.3 + 0.2 s of each worker's own, not the 3 x 0.6 s of the parallel set-up
    assert [r.duration_s for r in results] == pytest.approx([0.5, 0.5, 0.5])


def test_a_worker_that_dies_in_start_up_is_reported_and_the_others_run(probe_env, ledger, tmp_path):
    (tmp_path / "dies_probe.py").write_text("import sys\nsys.stderr.write('boom in start-up\\n')\nsys.exit(4)\n")
    specs = [_spec(ledger, 0.1, 0.1)]
    dead = workers.run_workers("dies_probe", specs, timeout_s=30, env=probe_env)
    assert not dead[0].ok and dead[0].exit_code == 4 and "boom in start-up" in dead[0].problem()
    fine = workers.run_workers("turn_probe", specs * 2, timeout_s=30, env=probe_env)
    assert [r.ok for r in fine] == [True, True]


def test_a_worker_hung_in_its_turn_is_killed_and_the_next_one_still_runs(probe_env, ledger):
    """Worker 0's turn passes the 2 s timeout (2.5 s spent, then it hangs): it is killed then, and its report
    says how long its turn ran; worker 1's turn stays under the timeout (1.9 s) and is left to finish."""
    specs = [_spec(ledger, work_s=2.5, hang="turn"), _spec(ledger, work_s=1.9)]
    hung, after = workers.run_workers("turn_probe", specs, timeout_s=2.0, env=probe_env, clock=LedgerClock(ledger))
    assert hung.timed_out and not hung.ok and hung.exit_code is not None and hung.exit_code < 0   # killed
    assert after.ok and not after.timed_out
    assert hung.problem().startswith("worker 0 timed out after 2.5 s")     # in its turn: no phase named


def test_a_worker_hung_in_start_up_says_so(probe_env, ledger):
    specs = [_spec(ledger, startup_s=30.0, hang="start-up", count=2), _spec(ledger, work_s=0.1)]
    slow, fine = workers.run_workers("turn_probe", specs, timeout_s=1.0, env=probe_env, clock=LedgerClock(ledger))
    assert slow.timed_out and slow.problem().startswith("worker 0 timed out in start-up after 30 s") and fine.ok


def test_more_workers_than_start_together_go_in_batches(probe_env, ledger, monkeypatch):
    monkeypatch.setattr(workers, "MAX_TOGETHER", 2)
    results = workers.run_workers("turn_probe", [_spec(ledger, 0.2, 0.05)] * 3, timeout_s=30, env=probe_env)
    marks = [r.payload for r in results]
    assert all(r.ok for r in results)
    assert marks[2]["started"] >= max(marks[0]["end"], marks[1]["end"])       # the third starts after the first batch


def test_wait_turn_is_a_no_op_outside_a_gated_start(monkeypatch, tmp_path):
    monkeypatch.delenv("LNBENCH_WORKER_READY_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", None)                                    # reading it would exit
    assert workers.wait_turn() is None and list(tmp_path.iterdir()) == []    # returns at once, writes nothing


@pytest.mark.parametrize("per_call_s, expected", [
    (30e-6, 667),        # GPU-sized call: I from the 20 ms target
    (1e-6, 1000),        # clamped to max_iters
    (50e-6, 400),
    (400e-6, 150),       # the floor holds while a run stays within 0.1 s (60 ms)
    (1e-3, 100),         # the floor gives way: 150 calls would take 150 ms
    (17e-3, 5),          # CPU 4096x4096: 5 calls, not 150 (2.5 s)
    (0.5, 1),            # never fewer than one
])
def test_choose_iters_floor_gives_way_for_slow_calls(per_call_s, expected):
    assert choose_iters(per_call_s, 0.02, 150, 1000, 0.1) == expected


def _log_console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=200), buffer


def test_progress_in_a_log_is_one_line_per_finished_unit():
    console, buffer = _log_console()
    with CommandProgress(console, "worker 1/2", 3) as progress:
        progress.update(1, "torch fwd bf16 64x256 cold ok")
        progress.update(1, "torch fwd bf16 64x256 cold ok")                  # no new unit: no new line
        progress.update(2, "torch fwd bf16 64x256 hot ok", "worker 2/2")
        progress.advance("torch bwd bf16 64x256 cold ok")
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("[1/3 33%] worker 1/2: torch fwd bf16 64x256 cold ok (")
    assert lines[1].startswith("[2/3 66%] worker 2/2: torch fwd") and lines[2].startswith("[3/3 100%] worker 2/2")


def test_progress_with_many_units_is_throttled_but_always_ends(monkeypatch):
    console, buffer = _log_console()
    with CommandProgress(console, "verifying", 500) as progress:
        for _ in range(500):
            progress.advance("case")
    lines = buffer.getvalue().splitlines()
    assert 1 <= len(lines) <= 3 and lines[-1].startswith("[500/500 100%] verifying")
    quiet_console, quiet_buffer = _log_console()
    with CommandProgress(quiet_console, "verifying", 3, quiet=True) as progress:
        progress.advance("case")
    assert quiet_buffer.getvalue() == ""


def test_perf_in_a_log_prints_a_line_per_finished_case(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "lnbench.cli", "perf", "--backend", "torch", "--shapes", "8x32",
                           "--op", "fwd", "--mode", "hot", "--dtype", "f32", "-P", "2", "-R", "1",
                           "--csv", str(tmp_path / "p.csv")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split(" (")[0] for line in proc.stderr.splitlines() if line.startswith("[")]
    assert [line for line in lines if "worker" in line] == [
        "[1/2 50%] worker 1/2: torch fwd f32 8x32 hot ok", "[2/2 100%] worker 2/2: torch fwd f32 8x32 hot ok"]
    # between them, on a slow machine, the time-left lines a log gets when no unit finished for 2 s
    assert all(line.endswith("] timing") for line in lines if "worker" not in line)


def test_a_turn_counts_from_when_it_was_given_not_from_when_the_parent_starts_watching():
    """CI under load: the parent gave worker 0 its turn, the worker spent its 2.5 s (the ledger clock moved) before
    the parent first read the clock to watch it, and the 2 s timeout counted from there never came: the suite hung.
    The wait now counts from the moment the turn was given."""
    class Hung:
        timed_out, stopped = False, False

        def exited(self) -> bool:
            return self.stopped

        def waited(self, now: float) -> float:
            return 0.0

        def stop(self) -> None:
            self.stopped = True

    live = Hung()
    live.worker = live
    killed = workers._wait_until([live], lambda _: False, 2.0, None, clock=lambda: 2.5, start=0.0)
    assert killed == [live] and live.timed_out
