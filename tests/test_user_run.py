"""A user's run (issue 24): signals stop every command, also inside an emulated launch, and are never a kernel
result; finished cases are in the result files as they come and an interrupted run's file says it is
incomplete; verify --jobs gives the rows of --jobs 1; estimates; the default summary; one rule when nothing ran.

Signal tests use real processes and set the dispositions they rely on (a test runner may start with SIGINT or
SIGHUP ignored)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import invoke, verify_workers
from lnbench.run.pool import WORKER_NAME
from lnbench.run import processes
from lnbench.run.device import emulator_status
from lnbench.errors import LnbenchUsageError
from lnbench.output.files import release_outputs
from lnbench.run.processes import Terminated, terminate_on_signals
from lnbench.scaffold.sink import ResultSink

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
#: a stopped run that has not exited after this is hung (the limit ends the test; it judges no speed)
STOP_S = 120
#: test kernel sources (tests/kernel_sources), and the one whose rows of 4096 or more never finish building
SOURCES = Path(__file__).parent / "kernel_sources"
STALLS = "module:lnbench_test_sources.stalls_wide"
emulated = pytest.mark.skipif(not emulator_status()[0], reason=f"needs the emulated device: {emulator_status()[1]}")
main_thread = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                 reason="signals need the main thread")


# ---------------------------------------------------------------- helpers for real processes

def _reset_signals() -> None:
    """In the child: SIGINT, SIGTERM and SIGHUP at their default dispositions, whatever the runner inherited."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _start(args: list[str], tmp_path: Path, preexec=_reset_signals, env: dict[str, str] | None = None
           ) -> subprocess.Popen:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "200", "LNBENCH_RESULTS_DIR": str(tmp_path / "results"),
           **(env or {})}
    env.pop("LNBENCH_DEBUG", None)
    for channel in ("LNBENCH_BACKEND_SOURCES", "LNBENCH_KERNEL_SRC"):    # a parent's to its workers, which an
        env.pop(channel, None)     # in-process test leaves in os.environ: a command line starts without them
    return subprocess.Popen([sys.executable, "-m", "lnbench.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout_s: float) -> str:
    """Read stderr until a line holding `needle` (the progress of a finished case); fail after timeout_s."""
    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            seen.append(line)
            if needle in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout_s):
        proc.kill()
        pytest.fail(f"no stderr line with {needle!r} in {timeout_s} s: {''.join(seen)[-3000:]}")
    return "".join(seen)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _verify_workers(tmp_path: Path) -> list[int]:
    """This test's verify workers (their TMPDIR is under tmp_path)."""
    return verify_workers(tmp_path / "tmp")


def _finish(proc: subprocess.Popen, timeout_s: float) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"did not stop within {timeout_s} s of the signal: {err[-2000:]}")
    return proc.returncode, out + err, time.monotonic() - start


def _stop_when(proc: subprocess.Popen, needle: str, sig: int, wait_s: float) -> tuple[int, str]:
    """Once stderr shows `needle`, send `sig`; (exit status, stderr up to `needle` + all output after)."""
    try:
        head = _wait_for_line(proc, needle, wait_s)
        proc.send_signal(sig)
        code, text, _ = _finish(proc, STOP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return code, head + text


# ---------------------------------------------------------------- signals inside the emulator

@main_thread
@emulated
def test_sigint_inside_an_emulated_launch_is_a_stop_not_a_kernel_fault(monkeypatch):
    """A signal arriving while the emulator runs a launch (inside FlyDSL's C launch path, whose callback may
    not unwind) raises KeyboardInterrupt out of the backend call, never an EmulatorFault, and stops that launch
    (not after it, nor after more launches); then nothing is pending. The signal is sent from the emulator's
    own between-steps check, at step 20 of the first timed launch (of a few hundred): in the middle of it."""
    import torch

    import lnbench.emu.machine as machine
    from lnbench.backends import get_backend
    from lnbench.run.device import resolve_device

    dev = resolve_device("emu:gfx942")
    backend = get_backend("flydsl")
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(256, 8192, generator=gen)
    w, b = torch.randn(8192, generator=gen), torch.randn(8192, generator=gen)
    backend.forward(x[:1], w, b, 1e-5)               # compiled before the signal is armed
    steps, launched, signal_at = [], [], 20
    real_check = machine.check_stop

    def check_stop() -> None:
        steps.append(len(launched))                  # a step of the launch under way
        if len(steps) == signal_at:
            os.kill(os.getpid(), signal.SIGINT)
        real_check()

    monkeypatch.setattr(machine, "check_stop", check_stop)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with terminate_on_signals():
                for _ in range(3):
                    backend.forward(x, w, b, 1e-5)
                    launched.append(1)
    finally:
        signal.signal(signal.SIGINT, before)
    assert processes.pending_stop() is None
    assert launched == [] and set(steps) == {0}      # it came out of the first launch, the one it landed in
    assert signal_at <= len(steps) <= signal_at + 1  # at most the next between-steps check, which raises again
    y = backend.forward(x[:4], w, b, 1e-5)[0]        # the device still works afterwards
    assert torch.allclose(y, torch.nn.functional.layer_norm(x[:4], (8192,), w, b, 1e-5), atol=1e-4)
    assert dev.emulated


@main_thread
def test_check_stop_raises_the_pending_signal_again():
    """The emulator's between-steps check: after the first signal raised (and was swallowed), check_stop raises
    the same kind again (KeyboardInterrupt for SIGINT, Terminated for SIGTERM)."""
    for sig, kind in ((signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)):
        before = signal.signal(sig, signal.SIG_DFL)
        try:
            with pytest.raises(kind):
                with terminate_on_signals():
                    try:
                        os.kill(os.getpid(), sig)     # (os.kill runs the handler before it returns)
                        pytest.fail(f"{sig!r} raised nothing")
                    except kind:
                        pass                          # swallowed, as the launch callback does
                    processes.check_stop()
        finally:
            signal.signal(sig, before)
        assert processes.pending_stop() is None


# ---------------------------------------------------------------- the CLI stopped by signals

@linux
@emulated
@pytest.mark.parametrize("sig,jobs", [(signal.SIGINT, "1"), (signal.SIGTERM, "2"), (signal.SIGHUP, "2")],
                         ids=["sigint-jobs1", "sigterm-jobs2", "sighup-jobs2"])
def test_signal_stops_verify_and_keeps_the_finished_cases(sig, jobs, tmp_path):
    """The run cannot end before the signal, however fast the machine: the stalling test source's 256x8192 case
    never finishes (tests/kernel_sources/lnbench_test_sources/stalls_wide.py)."""
    out, js = tmp_path / "v.csv", tmp_path / "v.json"
    proc = _start(["verify", "--backend", f"flydsl,torch,{STALLS}", "--kernel-src", str(SOURCES), "--dtype", "f32",
                   "--shapes", "3x257,256x8192", "--jobs", jobs, "--csv", str(out), "--json", str(js)], tmp_path)
    try:
        _wait_for_line(proc, "PASS", 240)         # a case finished
        if jobs != "1":
            assert _verify_workers(tmp_path), "no worker process"
        proc.send_signal(sig)
        code, text, _ = _finish(proc, STOP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 128 + sig, text
    assert "Traceback" not in text and "EmulatorFault" not in text, text
    assert "stopped after" in text and "marked incomplete" in text, text
    payload = json.loads(js.read_text())
    rows, meta = payload["data"], payload["metadata"]
    assert meta["complete"] is False and meta["stopped"].startswith(
        {signal.SIGINT: "interrupted (SIGINT)", signal.SIGTERM: "terminated (SIGTERM)",
         signal.SIGHUP: "terminated (SIGHUP)"}[sig]), meta
    assert rows and all(row["status"] == "PASS" for row in rows), rows     # a stop is never a kernel result
    frame = pd.read_csv(out)
    assert len(frame) == len(rows) and not frame["complete"].any()
    assert not any(_alive(pid) for pid in _verify_workers(tmp_path) if pid != proc.pid)
    assert not list((tmp_path / "tmp").glob("lnbench-verify-*")), "temporary folder left behind"
    assert not [p for p in tmp_path.glob(".v.*")], "temporary output files left behind"


@linux
@emulated
def test_interrupted_inspect_execute_exits_130_without_an_error_row(tmp_path):
    js = tmp_path / "i.json"
    proc = _start(["inspect", "--execute", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd,bwd",
                   "--dtype", "f32", "--shapes", "1x256,512x8192", "--json", str(js)], tmp_path)
    code, text = _stop_when(proc, "1x256 ok", signal.SIGINT, 240)
    assert code == 130, text
    payload = json.loads(js.read_text())
    assert payload["metadata"]["complete"] is False
    assert all(row["status"] == "ok" for row in payload["data"]), payload["data"]


@linux
@emulated
def test_a_crashed_verify_worker_costs_only_its_own_case(tmp_path):
    """SIGKILL one worker in the middle of a run: its case is one `error` row naming the exit, every other case
    is there with its verdict, in order."""
    js = tmp_path / "v.json"
    proc = _start(["verify", "--backend", "flydsl", "--dtype", "f32", "--shapes", "3x257,64x256", "--jobs", "2",
                   "--json", str(js)], tmp_path)
    try:
        _wait_for_line(proc, "PASS", 240)
        victims = _verify_workers(tmp_path)
        assert victims
        # the workers are forks of the parent (lnbench.run.pool), which Linux names for them
        assert {Path(f"/proc/{pid}/comm").read_bytes().strip() for pid in victims} == {WORKER_NAME}
        os.kill(victims[0], signal.SIGKILL)
        code, text, _ = _finish(proc, 600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 1, text
    rows = json.loads(js.read_text())["data"]
    died = [r for r in rows if r["status"] == "error"]
    assert len(died) == 1 and "worker process died (exit -9)" in died[0]["detail"], died
    assert len({(r["case"], r["shape"]) for r in rows}) == 10            # 5 kinds x 2 shapes, none lost
    assert all(r["status"] == "PASS" for r in rows if r["status"] != "error")


# ---------------------------------------------------------------- --jobs: the same rows

@emulated
def test_jobs_2_gives_the_rows_of_jobs_1_bitwise(tmp_path, results_dir):
    files = {}
    for jobs in ("1", "2"):
        files[jobs] = tmp_path / f"j{jobs}.json"
        result = invoke("verify", "--backend", "flydsl-atomic,torch", "--dtype", "bf16", "--shapes", "3x257,16x1",
                        "--jobs", jobs, "--json", str(files[jobs]), "-q")
        assert result.exit_code == 0, result.output
    one, two = (json.loads(files[j].read_text()) for j in ("1", "2"))
    assert one["data"] == two["data"] and len(one["data"]) > 40
    assert two["metadata"]["jobs"] == 2 and one["metadata"]["jobs"] == 1
    assert (tmp_path / "j1.json").read_text().split('"data"')[1] == (tmp_path / "j2.json").read_text().split('"data"')[1]


def test_jobs_must_be_a_positive_integer_and_writes_nothing(results_dir):
    result = invoke("verify", "--backend", "torch", "--shapes", "4x8", "--jobs", "0")
    assert result.exit_code == 2 and "--jobs must be an integer in 1..256" in result.output
    assert not results_dir.exists() or not list(results_dir.iterdir())


# ---------------------------------------------------------------- estimates

@linux
@emulated
def test_a_long_emulated_run_is_announced_with_an_estimate_and_advice(tmp_path, monkeypatch):
    """A run estimated above verify's WARN_S says so before it starts, with its largest shape and what makes it
    shorter; Ctrl-C then stops it before any case finished, with no result file. The run is long by a calibration
    file in which this machine's emulated 4096x4096 units took 50 s (not by this machine's speed)."""
    from lnbench.run import calibration

    path = tmp_path / "calibration.json"
    assert calibration.record({"verify.emulated@emu:gfx942": [{"x": 4096 * 4096, "s": 50.0}]}, path=path)
    monkeypatch.setenv("LNBENCH_CALIBRATION", str(path))
    proc = _start(["verify", "--device", "emu:gfx942", "--dtype", "f32,f16,bf16", "--shapes", "4096x4096",
                   "--jobs", "2"], tmp_path)
    code, text = _stop_when(proc, "estimated to take", signal.SIGINT, 120)
    assert code == 130
    assert "smaller shapes" in text and "--jobs" in text and (" h " in text or " min" in text), text
    assert not list((tmp_path / "results").glob("*.csv")), "no case finished, so no result file"


def test_estimate_grows_with_elements_and_refines_with_measured_time(monkeypatch):
    """A unit costs its kind's fixed part plus its part per element (this machine's constants, injected); the run
    is its start plus its units spread over the jobs; a first unit twice as slow as modelled (a fake clock) moves
    what is left toward the observed speed, the model holding it back."""
    from lnbench.run.device import emu_device
    from lnbench.verify.cases import Case
    from lnbench.verify.estimate import Estimate, VerifyCosts, unit_seconds

    emu = emu_device("gfx942")
    costs = VerifyCosts(units={"emulated": (0.1, 4e-7), "emulated-autograd": (0.07, 3e-7), "host": (0.01, 1e-7),
                               "host-shared": (0.01, 1e-8), "gpu": (0.05, 2e-9)}, startup_s=0.5)
    small, big = Case("randn", "f32", 64, 256, 1e-5, 1), Case("randn", "f32", 4096, 4096, 1e-5, 1)
    assert unit_seconds("flydsl", small, emu, costs=costs) == pytest.approx(0.1 + 4e-7 * 64 * 256)
    assert unit_seconds("flydsl", big, emu, costs=costs) == pytest.approx(0.1 + 4e-7 * 4096 * 4096)
    assert unit_seconds("torch", big, emu, costs=costs) == pytest.approx(0.01 + 1e-7 * 4096 * 4096)
    assert unit_seconds("flydsl", big, emu, inline=True, costs=costs) == pytest.approx(
        costs.inline * unit_seconds("flydsl", big, emu, costs=costs))
    est = Estimate({0: 10.0, 1: 30.0}, jobs=2, others=0, cpus=2, startup_s=costs.startup_s)   # longest first
    assert est.wall_s == pytest.approx(0.5 + 30.0)
    clock = [est.running.start + 0.5 + 20.0]   # the first unit (10 modelled s) took 20 s: twice as slow
    monkeypatch.setattr(est.running, "clock", lambda: clock[0])
    est.finished(0)
    # 25 modelled s left; the run so far went 3.7× slower than modelled, the model (a tenth of it) pulls that down
    assert 2 * 25.0 < est.remaining_s() < 3.7 * 25.0


def test_progress_lines_show_remaining_time():
    from io import StringIO

    from rich.console import Console

    from lnbench.run.progress import CommandProgress

    buf = StringIO()
    with CommandProgress(Console(file=buf, width=200), "verifying", 3, remaining=lambda: 125.0) as progress:
        progress.advance("one PASS")
    assert "~2 min left" in buf.getvalue()


# ---------------------------------------------------------------- results as they come

def _row(backend: str, status: str, **more) -> dict:
    """A verify row (lnbench.results.VERIFY: its required columns)."""
    return {"backend": backend, "case": "randn", "dtype": "f32", "shape": "2x8", "tensor": "y", "status": status,
            **more}


def _meta(**more):
    from lnbench.results import VERIFY
    return VERIFY.run(**more)


def _sink_paths(tmp_path: Path) -> tuple[Path, Path]:
    from lnbench.output.files import check_writable

    return check_writable(tmp_path / "r.csv"), check_writable(tmp_path / "r.json")


def test_sink_checkpoints_are_loadable_files_marked_running(tmp_path, monkeypatch):
    monkeypatch.setattr("lnbench.scaffold.sink.CHECKPOINT_S", 0.0)
    csv_path, json_path = _sink_paths(tmp_path)
    with ResultSink(csv_path, json_path, _meta(device="x"), total=3) as sink:
        sink.add(1, [_row("b", "PASS", max_abs_err=2.5)])
        sink.add(0, [_row("a", "FAIL", max_abs_err=1.5)])
        payload = json.loads(json_path.read_text())
        assert [r["backend"] for r in payload["data"]] == ["a", "b"]           # in unit order
        assert payload["metadata"]["complete"] is False
        assert payload["metadata"]["stopped"] == "running (or crashed) after 2 of 3 cases"
        assert list(pd.read_csv(csv_path)["backend"]) == ["a", "b"]
        sink.add(2, [_row("c", "PASS", max_abs_err=0.5)])
        sink.finish()
    release_outputs()                            # the end of the command (cli_common.guarded)
    payload = json.loads(json_path.read_text())
    assert payload["metadata"]["complete"] is True and len(payload["data"]) == 3
    assert not list(tmp_path.glob(".r.*")), "temporary files left"


@main_thread
def test_sink_on_interrupt_writes_the_finished_units_marked_incomplete(tmp_path):
    csv_path, json_path = _sink_paths(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with ResultSink(csv_path, json_path, _meta(), total=4) as sink:
            sink.add(0, [_row("a", "PASS")])
            raise KeyboardInterrupt
    payload = json.loads(json_path.read_text())
    assert payload["metadata"]["stopped"] == "interrupted (SIGINT) after 1 of 4 cases"
    assert payload["data"] == [_row("a", "PASS")]


@main_thread
def test_sink_on_interrupt_without_result_files_names_no_empty_path(capsys):
    """--no-csv without --json: the stop line says no file was asked for, not "the finished ones are in  "."""
    with pytest.raises(KeyboardInterrupt):
        with ResultSink(None, None, _meta(), total=4) as sink:
            sink.add(0, [_row("a", "PASS")])
            raise KeyboardInterrupt
    err = capsys.readouterr().err
    assert "stopped after 1 of 4 cases; no result file was asked for (--no-csv)" in err, err
    assert "are in " not in err, err


def test_sink_on_a_usage_error_leaves_no_result_file(tmp_path, monkeypatch):
    monkeypatch.setattr("lnbench.scaffold.sink.CHECKPOINT_S", 0.0)
    csv_path, json_path = _sink_paths(tmp_path)
    with pytest.raises(LnbenchUsageError):
        with ResultSink(csv_path, json_path, _meta(), total=2) as sink:
            sink.add(0, [_row("a", "PASS")])
            assert json_path.exists()
            raise LnbenchUsageError("bad")
    assert not csv_path.exists() and not json_path.exists()


def test_compare_refuses_an_incomplete_run_and_plot_warns(tmp_path, results_dir):
    pytest.importorskip("matplotlib")
    perf = ["perf", "--device", "cpu", "--backend", "torch", "--shapes", "2x64", "--op", "fwd", "--mode", "hot",
            "-P", "1", "-R", "3", "--warmup-s", "0", "-q"]
    base = tmp_path / "base.json"
    assert invoke(*perf, "--json", str(base)).exit_code == 0
    payload = json.loads(base.read_text())
    payload["metadata"].update(complete=False, stopped="interrupted (SIGINT) after 1 of 3 workers")
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(payload))
    refused = invoke("compare", str(base), str(cut))
    assert refused.exit_code == 2 and "holds an incomplete run (interrupted (SIGINT) after 1 of 3 workers)" \
        in refused.output, refused.output
    forced = invoke("compare", str(base), str(cut), "--force", "-q")
    assert forced.exit_code == 0, forced.output
    plotted = invoke("plot", str(cut), "--out", str(tmp_path / "png"))
    assert plotted.exit_code == 0 and "holds an incomplete run" in plotted.output, plotted.output


# ---------------------------------------------------------------- output and consistency

def test_verify_prints_a_summary_by_default_and_every_row_with_details(results_dir):
    args = ["verify", "--backend", "torch", "--device", "cpu", "--dtype", "f32", "--shapes", "4x64"]
    short, full = invoke(*args), invoke(*args, "--details")
    assert short.exit_code == full.exit_code == 0
    assert "summary (every row: --details)" in short.output and "worst err/allowed" in short.output
    assert "max abs err" in full.output and "every row: --details" not in full.output
    assert len(full.output.splitlines()) > len(short.output.splitlines())


def test_summary_rows_count_and_locate_the_worst():
    from lnbench.verify.summary import summary_rows, worth_a_look

    rows = [{"backend": "b", "dtype": "f32", "case": "randn", "shape": "4x64", "tensor": t, "eps": 1e-5,
             "status": s, "_used": u} for t, s, u in (("y", "PASS", 0.2), ("dx", "PASS", 0.95), ("mean", "FAIL", 3.0))]
    rows.append({"backend": "b", "dtype": "f32", "case": "randn", "shape": "8x64", "tensor": "-", "eps": 1e-5,
                 "status": "error", "_used": None})
    (row,) = summary_rows(rows)
    assert (row["checks"], row["PASS"], row["FAIL"], row["error"], row["status"]) == (4, 2, 1, 1, "error")
    assert row["worst"] == 3.0 and row["where"] == "4x64 mean eps=1e-05"
    assert [r["tensor"] for r in rows if worth_a_look(r)] == ["dx", "mean", "-"]


def test_progress_outcome_says_error_for_no_verdict_and_fail_for_a_value_outside_its_bar():
    from lnbench.verify.runner import outcome

    from lnbench.results import VerifyRow

    def rows(*statuses: str) -> list[VerifyRow]:
        return [VerifyRow().set(status=s) for s in statuses]

    assert outcome(rows("PASS", "FAIL")) == "FAIL"
    assert outcome(rows("FAIL", "error", "PASS")) == "error"          # no verdict before a value outside its bar
    assert outcome(rows("error")) == "error"
    assert outcome(rows("PASS")) == "PASS"


def test_perf_with_nothing_runnable_follows_the_one_rule(results_dir):
    result = invoke("perf", "--device", "cpu", "--backend", "flydsl", "--shapes", "2x64", "-q")
    assert result.exit_code == 1, result.output
    assert "nothing could run here: " in result.output


@emulated
def test_env_shows_backends_on_the_device_verify_uses():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is the default device here")
    result = invoke("env")
    assert result.exit_code == 0, result.output
    assert "what `lnbench verify` uses here" in result.output and "emu:gfx942 (emulated)" in result.output


def test_install_hints_name_packages_not_unpublished_extras():
    from lnbench.machine.install import install_hint

    assert install_hint("plot") == "pip install 'matplotlib>=3.7'"
    assert "lnbench[" not in install_hint("emu") and "ziglang" in install_hint("emu")


@linux
def test_sigterm_during_perf_keeps_the_finished_workers_cases(tmp_path):
    """perf: worker 1 finished its turn, worker 2 is in its own when SIGTERM comes: the JSON holds worker 1's
    timed cases, marked incomplete, and the run exits 143. The cases worker 2 had not reached are `not run`,
    never `error` rows: a stop is no fault of a case."""
    js = tmp_path / "p.json"
    # worker 2 hangs after its first case (lnbench.perf.worker_main's test hook): the signal finds it in its turn
    proc = _start(["perf", "--device", "cpu", "--backend", "torch", "--shapes", "2x64,3x257", "--op", "fwd,bwd",
                   "--mode", "hot", "-P", "2", "-R", "5", "--warmup-s", "0", "--json", str(js)], tmp_path,
                  env={"LNBENCH_PERF_FAULT": "1:hang:1"})
    code, text = _stop_when(proc, "worker 2/2", signal.SIGTERM, 120)
    assert code == 143, text
    payload = json.loads(js.read_text())
    assert payload["metadata"]["complete"] is False
    assert payload["metadata"]["stopped"].startswith("terminated (SIGTERM) after 1 of 2 workers")
    first = [r for r in payload["data"] if r["row_kind"] == "worker" and r["worker"] == 0]
    assert len(first) == 4 and all(r["status"] == "ok" for r in first), first
    second = [r for r in payload["data"] if r["row_kind"] == "worker" and r["worker"] == 1]
    assert {r["status"] for r in second} <= {"ok", "not run"} and second[-1]["status"] == "not run", second
    assert "stopped with the run" in second[-1]["detail"]
    assert all(r["status"] != "error" for r in payload["data"]), payload["data"]


@linux
def test_a_signal_during_start_up_is_one_line_not_a_traceback(tmp_path):
    """Ctrl-C while the command line still imports torch: `lnbench: interrupted`, exit 130, no traceback."""
    proc = _start(["verify", "--backend", "torch", "--device", "cpu", "--shapes", "4x8"], tmp_path)
    try:
        hup = 1 << (signal.SIGHUP - 1)

        def caught() -> bool:       # the start-up handlers are in (SIGHUP is caught only from then on)
            try:
                text = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                return False
            return bool(int(next(line for line in text.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
                        & hup)

        deadline = time.monotonic() + STOP_S       # (only ends a hung test)
        while not caught():
            assert time.monotonic() < deadline and proc.poll() is None, "the start-up handlers never came"
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        code, text, _ = _finish(proc, STOP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130, text
    assert "Traceback" not in text and "lnbench: interrupted" in text, text
