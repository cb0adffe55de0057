"""Run worker processes (start-up side by side, timed turns one at a time), each with a timeout, and read their
JSON results from files: one spec per worker, in a pool of lnbench.run.pool (how workers start, what a dead
one left on stderr, how all are stopped).

Used by `lnbench perf` and `lnbench abi-compare`. The worker contract:

    python -m <module> SPEC_JSON RESULT_JSON PROGRESS_TXT

* SPEC_JSON is the spec dict, written by `run_workers` (read it with `read_spec`); a typed spec (a `Wire`,
  such as lnbench.perf.messages.PerfWorkerSpec) is written as its `to_wire()`.
* The worker writes its result dict to RESULT_JSON with `write_result` (temp file + rename). It may write it
  several times (after each finished unit) so that a later crash or hang still leaves partial results.
* The worker may append one line per finished unit to PROGRESS_TXT (`report_progress`); `on_progress` sees
  the line count and the last line while the worker runs (drives lnbench.run.progress).
* Environment: LNBENCH_WORKER_INDEX / LNBENCH_WORKER_COUNT; the folder holding the `lnbench` package is put
  first on PYTHONPATH so a checkout runs without installing.

Compile caches: every worker gets its OWN fresh cache folders (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR,
FLYDSL_RUNTIME_CACHE_DIR under a private temp root, removed afterwards), so no two workers ever share or
race on an on-disk cache and each worker compiles from scratch (its compile time lands in its warm-up, never
in a timed run). A caller that wants a shared, pre-warmed cache passes those variables in `env`; values
in `env` win.

Start-up together, measurement one at a time: up to MAX_TOGETHER workers are started at once, and each one
does its start-up (importing torch and the backends, creating the device context: seconds per process) side
by side with the others, then calls `wait_turn()`, which blocks it on its stdin. What follows is a list of
`phases`, each begun by one `wait_turn()` in the worker: in a SEQUENTIAL phase the parent lets the workers
go one after another (worker i+1 when worker i waits for its next phase, or has exited); in a PARALLEL
phase all of them at once (work that must happen after every timed turn of a phase but needs no
measurement, such as a profiler's set-up). A phase begins only when every worker of the batch is waiting
for it (or has exited). So no timed work ever overlaps another worker's start-up or timed work, and each
worker still is its own process with its own caches. A module that never calls `wait_turn` simply runs
when started. `timeout_s` counts per turn (and per start-up or parallel phase), less the time the worker
said it spent waiting for another process (`report_waiting`: perf's host lock on several GPUs), so a worker
held up behind another GPU's hung worker is not killed with it.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, Union

from lnbench.run.pool import Pool, Worker, last_line, stderr_tail, worker_setup
from lnbench.run.processes import ChildProcess, Stopped

CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "FLYDSL_RUNTIME_CACHE_DIR")
_POLL_S = 0.05
#: at most this many workers are started (and held in memory) at once
MAX_TOGETHER = 8
_READY_VAR = "LNBENCH_WORKER_READY_FILE"
_WAITING_VAR = "LNBENCH_WORKER_WAITING_FILE"


class Wire(Protocol):
    """A typed message between parent and worker: a JSON dict only in the files between them."""

    def to_wire(self) -> dict[str, Any]: ...


#: what run_workers sends a worker: a typed spec, or its dict
Spec = Union[Wire, dict[str, Any]]


def known_fields(cls: type, wire: dict[str, Any]) -> dict[str, Any]:
    """The entries of a wire dict that are fields of dataclass `cls` (a name it does not declare is left out)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in wire.items() if k in names}


def set_fields(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a wire dict, in declared order, those still None (not known yet) left out."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


@dataclass
class WorkerResult:
    """What one worker produced.

    ok: exit status 0, no timeout and a result file was read. payload: the worker's result dict (possibly
    partial when it crashed or hung after writing some results), None when it wrote none.
    exit_code: the process's status (negative = killed by that signal; None only if it never started).
    stderr_tail: the last ~2000 characters of its stderr.
    """

    index: int
    ok: bool
    exit_code: int | None
    timed_out: bool
    payload: dict[str, Any] | None
    stderr_tail: str
    duration_s: float
    #: where a timed-out worker was stopped: "in start-up", "before its turn", or "" (in its turn)
    timed_out_where: str = ""
    #: stopped by the parent's interrupt (Ctrl-C, SIGTERM) before it finished: what it had not done is not a fault
    stopped: bool = False

    def problem(self) -> str:
        """One line saying why a worker failed ('' when ok)."""
        if self.ok:
            return ""
        if self.stopped:
            return f"worker {self.index} was stopped with the run before it got here"
        last = last_line(self.stderr_tail)
        if self.timed_out:
            where = f" {self.timed_out_where}" if self.timed_out_where else ""
            head = f"worker {self.index} timed out{where} after {self.duration_s:.3g} s (killed, exit {self.exit_code})"
        elif self.exit_code == 0:
            head = f"worker {self.index} exited 0 without a result file"
        else:
            head = f"worker {self.index} exited with status {self.exit_code}"
        return f"{head}: {last}" if last else head


def read_spec(argv: list[str] | None = None) -> tuple[dict[str, Any], Path, Path | None]:
    """Worker side: (spec, result path, progress path) from the command line. Also makes this worker die with
    its parent and run on its GPU's CPUs (lnbench.run.pool.worker_setup): every worker calls this first."""
    worker_setup()
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        raise SystemExit("usage: python -m <worker module> SPEC_JSON RESULT_JSON [PROGRESS_TXT]")
    spec = json.loads(Path(args[0]).read_text())
    return spec, Path(args[1]), Path(args[2]) if len(args) > 2 else None


def write_result(path: Path, payload: dict[str, Any]) -> None:
    """Worker side: write the result dict atomically (readers never see half a file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, default=str))
    os.replace(tmp, path)


def report_progress(path: Path | None, label: str = "") -> None:
    """Worker side: one finished unit (a line in the progress file)."""
    if path is not None:
        with open(path, "a") as handle:
            handle.write(label.replace("\n", " ") + "\n")


def report_waiting(since: float | None, total_s: float) -> None:
    """Worker side: this worker waits for another process since `since` (time.monotonic(); None: not waiting
    now), after `total_s` seconds of such waits before; the parent does not count waiting against a turn's
    timeout. A no-op outside run_workers."""
    path = os.environ.get(_WAITING_VAR)
    if path:
        tmp = f"{path}.{os.getpid()}.tmp"
        Path(tmp).write_text(f"{'' if since is None else since} {total_s}")
        os.replace(tmp, path)


def _waited(path: Path, now: float) -> float:
    """Seconds a worker has spent waiting for another process, up to `now` (its report_waiting file)."""
    try:
        since, total = path.read_text().split(" ")
    except (OSError, ValueError):
        return 0.0
    return float(total) + (now - float(since) if since else 0.0)


def _lines(path: Path) -> tuple[int, str]:
    """(finished lines, the last one) of a progress file."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return 0, ""
    lines = text.splitlines()
    return text.count("\n"), (lines[-1] if lines else "")


def _child_env(index: int, count: int, root: Path, env: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """`env` (wins over os.environ: lnbench.run.pool.spawn), own cache folders unless `env` names them."""
    child = dict(env or {})
    for var in CACHE_VARS:
        if env and var in env:
            continue
        folder = root / "cache" / var.lower()
        folder.mkdir(parents=True, exist_ok=True)
        child[var] = str(folder)
    child["LNBENCH_WORKER_INDEX"] = str(index)
    child["LNBENCH_WORKER_COUNT"] = str(count)
    return child


#: how a phase of the workers' work runs: one worker at a time, or all of them side by side
SEQUENTIAL, PARALLEL = "sequential", "parallel"
_waits = 0


def wait_turn() -> None:
    """Worker side: say "ready" and block until the parent lets this worker start its next phase (module
    docstring). A no-op outside a gated start; exits quietly when the parent goes away instead."""
    global _waits
    ready = os.environ.get(_READY_VAR)
    if not ready:
        return
    Path(f"{ready}.{_waits}").write_text(str(os.getpid()))
    _waits += 1
    if sys.stdin is None or sys.stdin.readline().strip() != "go":
        raise SystemExit(0)


@dataclass
class _Live:
    """A started worker of the pool (its process None when it could not start), its folder, and timing state."""

    worker: Worker
    root: Path
    seen: int = 0
    turns_s: float = 0.0
    timed_out: bool = False
    timed_out_where: str = ""
    collected: bool = False

    @property
    def index(self) -> int:
        return self.worker.number

    @property
    def proc(self) -> ChildProcess | None:
        return self.worker.proc

    def exited(self) -> bool:
        return self.worker.exited()

    def waited(self, now: float) -> float:
        return _waited(self.root / "waiting", now)

    def ready(self, phase: int) -> bool:
        """Waiting at the start of `phase` (or gone)."""
        return self.exited() or (self.root / f"ready.{phase}").exists()


def _start(pool: Pool, module: str, spec: Spec, index: int, count: int,
           env: Mapping[str, str | None] | None) -> _Live:
    """Write the worker's files and start it (it runs its start-up, then waits in `wait_turn`)."""
    root = pool.folder(f"w{index}")
    wire = spec if isinstance(spec, dict) else spec.to_wire()
    (root / "spec.json").write_text(json.dumps(wire, default=str))
    (root / "progress.txt").write_text("")
    child = _child_env(index, count, root, env)
    child[_READY_VAR] = str(root / "ready")
    child[_WAITING_VAR] = str(root / "waiting")
    args = [str(root / "spec.json"), str(root / "result.json"), str(root / "progress.txt")]
    return _Live(pool.start(index, module, args, child, root, own_stdout=True), root)


def _wait_until(lives: list[_Live], done: Callable[[_Live], bool], timeout_s: float,
                on_progress: Callable[[int, int, str], None] | None,
                stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic,
                start: float | None = None) -> list[_Live]:
    """Poll until done(live) for each of `lives`; one still running after timeout_s since `start` (default: now;
    the moment its phase or turn was given, so that work done before this first looks counts) less the time it
    reported waiting for another process meanwhile is killed (returned). Raises Stopped as soon as `stop` is set."""
    start = clock() if start is None else start
    killed: list[_Live] = []
    waited_before = {id(live): live.waited(start) for live in lives}
    try:
        while not all(done(live) or live.exited() for live in lives):
            if stop is not None and stop.is_set():
                raise Stopped()
            now = clock()
            for live in lives:
                if live in killed or done(live) or live.exited():
                    continue
                if now - start - (live.waited(now) - waited_before[id(live)]) > timeout_s:
                    live.timed_out = True
                    killed.append(live)
                    live.worker.stop()
            _report(lives, on_progress)
            time.sleep(_POLL_S)
    finally:
        _report(lives, on_progress)
    return killed


def _report(lives: list[_Live], on_progress: Callable[[int, int, str], None] | None) -> None:
    if on_progress is None:
        return
    for live in lives:
        done, label = _lines(live.root / "progress.txt")
        if done != live.seen:
            live.seen = done
            on_progress(live.index, done, label)


def _phase(batch: list[_Live], phase: int, mode: str, last: bool, timeout_s: float,
           on_progress: Callable[[int, int, str], None] | None, stop: threading.Event | None,
           clock: Callable[[], float]) -> None:
    """Run one phase: every worker waits at its start; then all go at once, or one after another."""
    start = clock()
    for live in _wait_until(batch, lambda live: live.ready(phase), timeout_s, None, stop, clock, start):
        live.turns_s += clock() - start                   # hung before its turn: its report says how long
        live.timed_out_where = "in start-up" if phase == 0 else "before its turn"
    finished = (lambda live: live.exited()) if last else (lambda live: live.ready(phase + 1))
    groups = [batch] if mode == PARALLEL else [[live] for live in batch]
    for group in groups:
        start = clock()
        for live in group:
            if not live.exited():
                live.worker.send("go", last)   # (one that exited already: its result or crash is collected)
        _wait_until(group, finished, timeout_s, on_progress, stop, clock, start)
        if mode == SEQUENTIAL:
            group[0].turns_s += clock() - start


def _result(live: _Live) -> WorkerResult:
    if live.proc is None:
        return WorkerResult(live.index, False, None, False, None, live.worker.start_error, 0.0)
    try:
        payload = json.loads((live.root / "result.json").read_text())
    except (OSError, ValueError):
        payload = None
    code = live.proc.returncode
    ok = code == 0 and not live.timed_out and isinstance(payload, dict)
    return WorkerResult(live.index, ok, code, live.timed_out, payload if isinstance(payload, dict) else None,
                        stderr_tail(live.worker.stderr), live.turns_s, live.timed_out_where)


def run_workers(module: str, specs: Sequence[Spec], timeout_s: float, env: Mapping[str, str | None] | None = None,
                on_done: Callable[[WorkerResult], None] | None = None, *,
                on_progress: Callable[[int, int, str], None] | None = None,
                phases: tuple[str, ...] = (SEQUENTIAL,), stop: threading.Event | None = None,
                clock: Callable[[], float] = time.monotonic) -> list[WorkerResult]:
    """Run `python -m <module>` once per spec: start-up side by side, then `phases` (module docstring).

    A worker calls `wait_turn()` once at the start of each phase. Returns one WorkerResult per spec, in spec
    order; a crash or timeout never raises, it is reported in its WorkerResult (exit status, stderr tail)
    and the remaining specs still run. `on_done` is called after each worker has finished (and, when run_workers
    is interrupted, for each worker it stopped, with what that worker had written: lnbench.scaffold.sink);
    `on_progress(index, lines, last line)` while one runs, as its progress file grows.
    WorkerResult.duration_s is the time of the worker's sequential turns. Each worker gets its own fresh
    compile-cache folders (see the module docstring). `stop`: when set (by another thread), the workers are
    stopped as on Ctrl-C and `Stopped` is raised (runs on several GPUs: lnbench.run.gpus). `clock`: the seconds
    that turns and timeouts are counted in (tests pass one that moves as their workers say, not with the
    machine's speed); the workers' report_waiting times must be on the same clock.
    """
    results: list[WorkerResult] = []
    with Pool("lnbench-workers-") as pool:
        batch: list[_Live] = []
        try:
            for first in range(0, len(specs), MAX_TOGETHER):
                batch = []
                for i in range(first, min(first + MAX_TOGETHER, len(specs))):
                    batch.append(_start(pool, module, specs[i], i, len(specs), env))   # in `batch` once started
                for number, mode in enumerate(phases):
                    _phase(batch, number, mode, number == len(phases) - 1, timeout_s, on_progress, stop, clock)
                for live in batch:
                    if live.proc is not None:
                        live.proc.wait()
                    result = _result(live)
                    results.append(result)
                    live.collected = True
                    if on_done is not None:
                        on_done(result)
                    pool.forget(live.worker)
                batch = []
        finally:
            pool.stop_all()  # interrupted (Ctrl-C, SIGTERM: any BaseException): no worker outlives the parent
            if on_done is not None:  # what the stopped workers finished (their result files) still counts
                for live in batch:
                    if not live.collected:
                        with contextlib.suppress(Exception):
                            result = _result(live)
                            on_done(result if result.ok else replace(result, stopped=True))
    return results
