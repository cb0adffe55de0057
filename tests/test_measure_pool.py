"""The one worker pool (lnbench.run.pool) under its two ways of handing out work: a worker killed in the
middle of a run loses no other result, for a queue of units (verify --jobs: lnbench.run.units) and for one
spec per worker with timed turns (perf, abi-compare: lnbench.run.workers). Tiny stand-in workers: no torch."""
from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path

import pytest

from lnbench.run import units
from lnbench.run.pool import Pool, last_line, stderr_tail
from lnbench.run.workers import run_workers

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process model")

#: a queue worker: answers unit u with u*u; the unit named by $POOL_TEST_DIE kills its worker (SIGKILL) after a
#: line on stderr, once (a marker file), so the fresh worker that takes over answers the others
UNIT_WORKER = """
import os, signal, sys, time
from pathlib import Path
from lnbench.run.pool import worker_setup
from lnbench.run.units import serve

worker_setup()
mark = Path(os.environ["POOL_TEST_MARK"])

def answer(unit):
    if unit == int(os.environ["POOL_TEST_DIE"]) and not mark.exists():
        mark.write_text("died")
        sys.stderr.write(f"dying on unit {unit}\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    wait_for = os.environ.get("POOL_TEST_WAIT_FOR")      # answer only once this file exists
    deadline = time.monotonic() + 120                    # (only ends a hung test)
    while wait_for and not Path(wait_for).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"square": unit * unit, "pid": os.getpid()}

serve(answer, int(sys.argv[1]))
"""

#: a spec worker: writes its result after each of its items; worker $POOL_TEST_DIE is SIGKILLed after 2 items
SPEC_WORKER = """
import os, signal, sys
from lnbench.run.workers import read_spec, report_progress, wait_turn, write_result

spec, result, progress = read_spec()
wait_turn()
payload = {"items": []}
for item in spec["items"]:
    if int(os.environ["LNBENCH_WORKER_INDEX"]) == int(os.environ["POOL_TEST_DIE"]) and len(payload["items"]) == 2:
        sys.stderr.write("dying after 2 items\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    payload["items"].append(item * 10)
    write_result(result, payload)
    report_progress(progress, str(item))
"""


def _module(tmp_path, name: str, text: str) -> dict[str, str]:
    (tmp_path / f"{name}.py").write_text(text)
    return {"PYTHONPATH": str(tmp_path)}


@linux
def test_a_killed_queue_worker_costs_only_its_own_unit(tmp_path):
    env = {**_module(tmp_path, "pool_unit_worker", UNIT_WORKER), "POOL_TEST_DIE": "3",
           "POOL_TEST_MARK": str(tmp_path / "died")}
    answers: dict[int, dict] = {}
    lost: list[units.Lost] = []
    with Pool("lnbench-pool-test-") as pool:
        def start(number, slot):
            return pool.start(number, "pool_unit_worker", [], env, pool.folder(f"w{number}"), answers=True)

        left = units.run_units(pool, start, units.InOrder(range(8)), [None, None],
                               lambda unit, answer, slot: answers.setdefault(unit, answer),
                               lambda gone, slot: lost.append(gone))
        root = pool.root
    assert left == []
    assert [gone.unit for gone in lost] == [3]
    assert lost[0].exit_code == -signal.SIGKILL and lost[0].last_line == "dying on unit 3"
    assert sorted(answers) == [0, 1, 2, 4, 5, 6, 7]                  # every other unit, answered once
    assert all(answer["square"] == unit * unit for unit, answer in answers.items())
    assert len({answer["pid"] for answer in answers.values()}) >= 2
    assert not root.exists()                                        # the pool's folder is gone


@linux
def test_a_slot_whose_workers_keep_dying_leaves_its_units_to_the_others(tmp_path):
    given_up = tmp_path / "bad slot given up"
    env = {**_module(tmp_path, "pool_unit_worker", UNIT_WORKER), "POOL_TEST_DIE": "-1",
           "POOL_TEST_MARK": str(tmp_path / "died"), "POOL_TEST_WAIT_FOR": str(given_up)}  # the bad slot dies first
    broken = {**env, "PYTHONPATH": str(tmp_path / "nowhere")}      # its module cannot be found: exits at once
    answers: dict[int, dict] = {}
    lost: list[units.Lost] = []

    def on_lost(gone, slot) -> None:
        lost.append(gone)
        if len(lost) == units.SLOT_DEATHS:
            given_up.write_text("")                                # the good slot answers from now on

    with Pool("lnbench-pool-test-") as pool:
        def start(number, slot):
            return pool.start(number, "pool_unit_worker", [], broken if slot == "bad" else env,
                              pool.folder(f"w{number}"), answers=True)

        left = units.run_units(pool, start, units.InOrder(range(10)), ["good", "bad"],
                               lambda unit, answer, slot: answers.setdefault(unit, answer), on_lost)
    assert left == []
    assert len(lost) == units.SLOT_DEATHS and all(gone.exit_code == 1 for gone in lost)
    assert "No module named" in lost[0].last_line
    assert sorted([*answers, *(gone.unit for gone in lost)]) == list(range(10))  # none dropped, none twice


@linux
def test_a_killed_spec_worker_keeps_what_it_finished_and_the_others_all_theirs(tmp_path):
    env = {**_module(tmp_path, "pool_spec_worker", SPEC_WORKER), "POOL_TEST_DIE": "1"}
    specs = [{"items": [1, 2, 3]}, {"items": [4, 5, 6, 7]}, {"items": [8, 9]}]
    done: list[int] = []
    results = run_workers("pool_spec_worker", specs, timeout_s=60.0, env=env, on_done=lambda r: done.append(r.index))
    assert done == [0, 1, 2]
    first, killed, after = results
    assert first.ok and first.payload == {"items": [10, 20, 30]}
    assert not killed.ok and killed.exit_code == -signal.SIGKILL
    assert killed.payload == {"items": [40, 50]}                     # what it finished before it died
    assert "dying after 2 items" in killed.stderr_tail and "dying after 2 items" in killed.problem()
    assert after.ok and after.payload == {"items": [80, 90]}         # the worker after it still ran


def test_stderr_tail_reads_a_named_or_an_unnamed_file(tmp_path):
    path = tmp_path / "err.txt"
    path.write_bytes(b"x" * 5000 + b"\nfirst\nlast line  \n\n")
    assert stderr_tail(path).endswith("last line  \n\n") and len(stderr_tail(path)) == 2000
    assert last_line(stderr_tail(path)) == "last line"
    with open(path, "rb") as handle:
        assert stderr_tail(handle, 20) == stderr_tail(path, 20)
    assert stderr_tail(tmp_path / "missing") == "" and last_line("") == ""


@linux
def test_leaving_the_pool_stops_every_worker_it_holds(tmp_path):
    env = _module(tmp_path, "pool_sleeper", "import time\ntime.sleep(600)\n")
    with pytest.raises(KeyboardInterrupt):
        with Pool("lnbench-pool-test-") as pool:
            workers = [pool.start(n, "pool_sleeper", [], env, pool.folder(f"w{n}")) for n in range(2)]
            raise KeyboardInterrupt
    assert all(worker.proc.returncode is not None for worker in workers)
    for worker in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(worker.proc.pid, 0)


# ---------------------------------------------------------------- forked workers (verify's first ones)

def _forked_main(args: list[str]) -> None:
    """A forked stand-in worker: echoes each stdin line, upper-cased, on its answer pipe (its last argument) until
    stdin ends; the line `exit N` exits with N, `raise` raises, `hang` waits for a signal (SIGKILL: the test's),
    `signals` answers its handlers of SIGINT, SIGTERM and SIGHUP, `gc` whether its garbage collector is on."""
    with os.fdopen(int(args[-1]), "w") as answers:
        for line in sys.stdin:
            word = line.strip()
            if word.startswith("exit"):
                raise SystemExit(int(word.split()[1]))
            if word == "raise":
                raise ValueError("stand-in failure")
            if word == "hang":
                signal.pause()
            if word == "signals":                       # how it handles SIGINT, SIGTERM, SIGHUP
                names = {signal.SIG_DFL: "default", signal.SIG_IGN: "ignored"}
                word = " ".join(names[handler] if handler in names else handler.__name__
                                for handler in map(signal.getsignal, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)))
            if word == "gc":                            # whether its garbage collector runs
                word = "on" if gc.isenabled() else "off"
            answers.write(f"{args[0]} {word.upper()} parent={os.environ['LNBENCH_PARENT_PID']}\n")
            answers.flush()


def _read_all(fd: int) -> str:
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read().decode()


@linux
def test_a_forked_worker_answers_until_its_stdin_ends_and_exits_0(tmp_path):
    """Two forks, the second made after the first: the first still sees the end of its stdin when the parent closes
    it (the second does not hold its write end), each in a session of its own, named for `ps`."""
    from lnbench.run.pool import WORKER_NAME, Worker, fork

    first_err, second_err = (open(tmp_path / f"err{i}", "w+b") for i in (1, 2))
    proc1, fd1 = fork(_forked_main, ["one"], first_err)
    first = Worker(0, proc1, first_err, fd1)
    proc2, fd2 = fork(_forked_main, ["two"], second_err, first.own_fds())
    second = Worker(1, proc2, second_err, fd2)
    first.send("a")
    second.send("c")
    answers1, answers2 = os.fdopen(fd1, "rb"), os.fdopen(fd2, "rb")
    assert answers1.readline() == f"one A parent={os.getpid()}\n".encode()   # (both have set themselves up)
    assert answers2.readline() == f"two C parent={os.getpid()}\n".encode()
    for proc in (proc1, proc2):
        assert open(f"/proc/{proc.pid}/comm", "rb").read().strip() == WORKER_NAME
        assert os.getsid(proc.pid) == proc.pid
    first.send("b", last=True)
    assert answers1.read() == f"one B parent={os.getpid()}\n".encode()
    assert proc1.wait() == 0 and proc1.poll() == 0
    assert proc2.poll() is None                      # still waiting on its own stdin
    second.close_stdin()
    assert answers2.read() == b"" and proc2.wait() == 0
    answers1.close()
    answers2.close()
    first_err.close()
    second_err.close()


@linux
def test_a_fork_of_a_parent_with_the_collector_off_runs_its_own(tmp_path):
    """The command line forks while its imports have the garbage collector off (lnbench.cli): the worker turns
    it on again, as a fresh interpreter has it."""
    from lnbench.run.pool import Worker, fork

    err = open(tmp_path / "err", "w+b")
    gc.disable()
    try:
        proc, fd = fork(_forked_main, ["w"], err)
    finally:
        gc.enable()
    Worker(0, proc, err, fd).send("gc", last=True)
    assert _read_all(fd) == f"w ON parent={os.getpid()}\n" and proc.wait() == 0
    err.close()


@linux
@pytest.mark.parametrize("line, code, tail", [("exit 3", 3, ""), ("raise", 1, "ValueError: stand-in failure")])
def test_a_forked_worker_exits_with_its_status_and_leaves_its_error(tmp_path, line, code, tail):
    from lnbench.run.pool import Worker, fork

    err = open(tmp_path / "err", "w+b")
    proc, fd = fork(_forked_main, ["w"], err)
    worker = Worker(0, proc, err, fd)
    worker.send(line)
    assert _read_all(fd) == "" and proc.wait() == code and worker.exit_code == code
    assert worker.last_line() == tail
    worker.fd = None
    worker.stop()


@linux
def test_a_killed_forked_worker_reports_the_signal_and_wait_times_out_before(tmp_path):
    import subprocess

    from lnbench.run.pool import Worker, fork

    err = open(tmp_path / "err", "w+b")
    proc, fd = fork(_forked_main, ["w"], err)
    worker = Worker(0, proc, err, fd)
    worker.send("hang")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.05)
    assert worker.exited() is False
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=120) == -signal.SIGKILL and worker.exited()   # (a wait with a time limit ends at the exit)
    worker.stop()


@linux
def test_a_fork_from_a_process_without_stdin_and_stdout_keeps_its_pipes(tmp_path):
    """A parent whose stdin and stdout are closed gets new pipes at fds 0 and 1, which the fork's own stdin and
    stdout would replace: the fork still answers on its pipe and exits 0."""
    import subprocess

    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from lnbench.run.pool import Worker, fork
from test_measure_pool import _forked_main
err = open({str(tmp_path / "err")!r}, "w+b")
os.close(0)
os.close(1)          # the pipes fork makes come at fds 0 and 1 now
proc, fd = fork(_forked_main, ["w"], err)
worker = Worker(0, proc, err, fd)
worker.send("x", last=True)
with os.fdopen(fd, "rb") as answers:
    got = answers.read().decode()
code = proc.wait()
with open({str(tmp_path / "out")!r}, "w") as out:
    out.write(f"{{got!r}} {{code}}")
"""
    done = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    answer, code = (tmp_path / "out").read_text().rsplit(" ", 1)
    assert answer.startswith("'w X parent=") and code == "0"


@linux
@pytest.mark.parametrize("hup", ["ignored", "handled"])
def test_a_fork_has_python_s_signal_handlers_and_keeps_an_ignored_one_ignored(tmp_path, hup):
    """The parent's own handlers (the command line's quiet exit, its stop handlers) are not the fork's: SIGINT raises
    KeyboardInterrupt, SIGTERM and SIGHUP end it, as in a fresh interpreter, except a signal the parent ignores
    (SIGHUP under nohup), which stays ignored, as it would across an exec."""
    import subprocess

    script = f"""
import os, signal, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from lnbench.run.pool import Worker, fork
from test_measure_pool import _forked_main
def quiet(signum, frame):
    os._exit(99)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, quiet)
if {hup == "ignored"!r}:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
err = open({str(tmp_path / "err")!r}, "w+b")
proc, fd = fork(_forked_main, ["w"], err)
Worker(0, proc, err, fd).send("signals", last=True)
with os.fdopen(fd, "rb") as answers:
    sys.stdout.write(answers.read().decode())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    hup_handler = "IGNORED" if hup == "ignored" else "DEFAULT"
    assert done.stdout.split(" parent=")[0] == f"w DEFAULT_INT_HANDLER DEFAULT {hup_handler}"


#: a worker module that writes to its stdout and its stderr, and exits
NOISY_WORKER = """
import sys

def worker_main(argv):
    print("noisy worker: on stdout")
    print("noisy worker: on stderr", file=sys.stderr)

if __name__ == "__main__":
    worker_main(sys.argv[1:])
"""


@linux
def test_a_worker_never_writes_to_the_users_terminal(tmp_path):
    """Whatever a worker prints, spawned or forked, goes to its files in the pool's folder, which the parent reads
    (Worker.tail): nothing of it reaches the parent's own stdout or stderr."""
    import subprocess

    (tmp_path / "noisy_worker.py").write_text(NOISY_WORKER)
    script = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from lnbench.run import pool
assert pool.allow_fork()
with pool.Pool("lnbench-test-") as workers:
    for number, fork in enumerate((False, True)):
        worker = workers.start(number, "noisy_worker", [], {{"PYTHONPATH": {str(tmp_path)!r}}},
                               workers.folder(f"w{{number}}"), answers=True, fork=fork)
        assert worker.proc.wait() == 0
        print("tail", type(worker.proc).__name__, worker.tail().split("\\n"))
print("started", pool.started())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tail Popen ") and lines[1].startswith("tail ForkedProcess "), done.stdout
    for line in lines[:2]:                   # what the worker printed is in its file, and only there
        assert "noisy worker: on stdout" in line and "noisy worker: on stderr" in line
    assert lines[2:] == ["started 2"]
