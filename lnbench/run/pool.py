"""The one worker mechanism of `verify`, `perf` (and its emulated `--device emu` profile) and `abi-compare`: how a
worker starts, what is read back when one dies, and how every one of them is stopped however a run ends.

A worker is a worker module run again (the pyperf pattern: the same program with a worker entry), started through
one function, `Pool.start(number, module, args, env, folder)`: `python -m <module> ARGS...` (`spawn`), or, where
the command allowed it before importing torch (`allow_fork`), a fork of the parent that calls the module's
`worker_main(ARGS)` (`fork`: verify's emulated workers share the parent's imports of torch, FlyDSL and the
emulator instead of doing them again, ~2 s of CPU each). Either way a worker runs in a session of its own (a
terminal's Ctrl-C reaches only the parent, which stops the workers itself), stdin a pipe from the parent, stdout
and stderr to files in the pool's folder (a worker never writes to the user's terminal), and, where the worker
answers on a pipe, that pipe's write end as its last argument. A command starts workers only once its arguments
are parsed and its plan is built: a usage error starts none. `started()` counts the workers this process started.

A `Pool` owns a temporary folder and every worker started in it. Leaving the pool (done, an exception, Ctrl-C,
SIGTERM: any BaseException) stops every worker still running (processes.kill_group: its whole process group) and
removes the folder (kept with $LNBENCH_KEEP_WORKER_DIRS). What a dead worker leaves behind is read in one way:
`stderr_tail` and its last line, with the exit status (negative: killed by that signal). A worker calls
`worker_setup()` first: it dies with its parent (processes.die_with_parent) and runs on the CPUs of its GPU
(processes.pin_to_gpu_cpus).

Two ways of handing out work are built on it, and the commands pass in what differs (modules, specs, units,
callbacks): lnbench.run.workers (one spec per worker, start-up side by side, timed turns one at a time, results
in files: perf, abi-compare) and lnbench.run.units (a queue of units dealt to workers as they come free, answers
on a pipe: verify --jobs, perf --device emu).

Standard library only.
"""
from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping

from lnbench.run.processes import (PARENT_PID_VAR, ChildProcess, child_environment, die_with_parent, kill_group,
                                   name_process, pin_to_gpu_cpus)

#: characters of a worker's stderr kept when it fails (its last line names the failure)
TAIL_CHARS = 2000
#: the name Linux gives a forked worker (`ps`, `top`, /proc/PID/comm; at most 15 bytes): its command line is its
#: parent's
WORKER_NAME = b"lnbench-worker"
#: set (to anything) to keep the workers' folders (spec, result, stderr files) for debugging
KEEP_VAR = "LNBENCH_KEEP_WORKER_DIRS"
#: OpenMP threads that sleep when idle instead of spinning: torch's threads in one worker would otherwise burn
#: the core another worker's emulation needs (the main job: ~30 s less CPU on 2 cores); values are unchanged.
#: A value the user set wins. Every worker runs with it; a parent that forks must have it before torch loads
#: (libgomp reads it when it loads), which `allow_fork` sees to.
WORKER_ENV = {} if "OMP_WAIT_POLICY" in os.environ else {"OMP_WAIT_POLICY": "PASSIVE"}

_started = 0
_fork_allowed = False


def started() -> int:
    """How many worker processes this process has started (spawned or forked) so far."""
    return _started


def allow_fork(imports: Iterable[str] = ()) -> bool:
    """A command whose run will most likely use workers calls this after parsing its arguments, before it imports
    torch: this process gets the workers' OpenMP setting (WORKER_ENV), and `Pool.start(..., fork=True)` may fork
    it from then on. Once torch is imported without that setting it does nothing (forks would spin: the run
    spawns). Then it imports `imports`, the modules the forks will share (torch, FlyDSL, the emulator), with the
    collector paused and what they made frozen, as the command line imports a command's module (lnbench.cli:
    the collections would walk every imported object; docs/running.md, "One worker mechanism"). Returns whether
    forks are allowed. Starts nothing."""
    global _fork_allowed
    if not _fork_allowed and not ("torch" in sys.modules and WORKER_ENV):
        os.environ.update(WORKER_ENV)
        _fork_allowed = True
        collecting = gc.isenabled()
        gc.disable()
        try:
            for name in imports:
                with contextlib.suppress(ImportError):    # (a missing one is reported where the run needs it)
                    importlib.import_module(name)
        finally:
            gc.freeze()
            if collecting:
                gc.enable()
    return _fork_allowed


def worker_setup() -> None:
    """Worker side, the first thing every worker does: die with the parent, run on its GPU's CPUs."""
    die_with_parent()
    pin_to_gpu_cpus()


def stderr_tail(stderr: Path | IO[bytes] | None, limit: int = TAIL_CHARS) -> str:
    """The last `limit` characters a worker wrote to its stderr: a file, or an open (possibly unnamed) one."""
    if stderr is None:
        return ""
    try:
        if isinstance(stderr, Path):
            with open(stderr, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - limit))
                data = handle.read()
        else:
            fileno = stderr.fileno()
            data = os.pread(fileno, limit, max(0, os.fstat(fileno).st_size - limit))
    except (OSError, ValueError):
        return ""
    return data.decode("utf-8", "replace")


def last_line(text: str) -> str:
    """The last non-empty line of `text`, stripped ('' when none)."""
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


@dataclass
class Worker:
    """A started worker: its process (None when it could not start, with `start_error`), where its stderr goes,
    and the read end of its answer pipe (None when it answers in files)."""

    number: int
    proc: ChildProcess | None
    stderr: Path | IO[bytes] | None
    fd: int | None = None
    start_error: str = ""

    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    @property
    def exit_code(self) -> int | None:
        """Its exit status (negative: killed by that signal); None while it runs or when it never started."""
        return None if self.proc is None else self.proc.returncode

    def tail(self) -> str:
        return self.start_error or stderr_tail(self.stderr)

    def last_line(self) -> str:
        return last_line(self.tail())

    def send(self, line: str, last: bool = False) -> None:
        """Write one line to its stdin (closed after the `last` one); a worker that already exited is skipped:
        its exit is collected as usual."""
        stdin = self.proc.stdin if self.proc is not None else None
        if stdin is None:
            return
        try:
            stdin.write(f"{line}\n".encode())
            stdin.flush()
            if last:
                stdin.close()
        except (AttributeError, OSError, ValueError):
            pass

    def own_fds(self) -> list[int]:
        """This process's ends of the worker's pipes and its unnamed stderr file (what a fork must not keep)."""
        fds = [] if self.fd is None else [self.fd]
        if self.proc is not None and self.proc.stdin is not None:
            fds.append(self.proc.stdin.fileno())
        if self.stderr is not None and not isinstance(self.stderr, Path):
            fds.append(self.stderr.fileno())
        return fds

    def close_stdin(self) -> None:
        stdin = self.proc.stdin if self.proc is not None else None
        if stdin is None:
            return
        try:
            stdin.close()
        except (AttributeError, OSError, ValueError):
            pass

    def stop(self) -> None:
        """Stop it if it still runs (its whole process group); close its answer pipe and unnamed stderr."""
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.stderr is not None and not isinstance(self.stderr, Path):
            self.stderr.close()


def spawn(module: str, args: list[str], env: Mapping[str, str | None] | None, stderr: IO[bytes],
          stdout: IO[bytes] | None = None, answers: bool = False) -> tuple[subprocess.Popen, int | None]:
    """Start `python -m module ARGS` (module docstring) with os.environ + `env` (processes.child_environment);
    stdout goes to `stdout` (default: with stderr). With `answers`, the write end of a fresh pipe is its last
    argument; returns (process, that pipe's read end or None)."""
    read_fd: int | None = None
    pass_fds: tuple[int, ...] = ()
    if answers:
        read_fd, write_fd = os.pipe()
        args = [*args, str(write_fd)]
        pass_fds = (write_fd,)
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
                                stdout=stdout if stdout is not None else stderr, stderr=stderr,
                                env=child_environment(env), pass_fds=pass_fds,
                                start_new_session=True)
    except BaseException:
        if read_fd is not None:
            os.close(read_fd)
        raise
    finally:
        for fd in pass_fds:                     # the answer pipe's write end: the child's now
            os.close(fd)
    return proc, read_fd


class ForkedProcess:
    """A worker forked from this process (`fork`), with what the pools use of subprocess.Popen: pid, stdin,
    poll, wait and returncode (negative: killed by that signal)."""

    def __init__(self, pid: int, stdin: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:        # collected elsewhere: its status is lost
                self.returncode = -int(signal.SIGKILL)
            else:
                if done:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = time.monotonic() + (timeout or 0.0)
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            _until_exit(self.pid, left)
        assert self.returncode is not None
        return self.returncode


def _until_exit(pid: int, seconds: float) -> None:
    """Return when child `pid` has exited or after `seconds`, whichever is first: a wait on its pidfd (Linux 5.3+),
    else a short sleep (the caller polls again)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        time.sleep(min(seconds, 0.01))
        return
    try:
        select.select([fd], [], [], seconds)
    finally:
        os.close(fd)


def fork(main: Callable[[list[str]], None], args: list[str], stderr: IO[bytes],
         close: Iterable[int] = (), env: Mapping[str, str] | None = None) -> tuple[ForkedProcess, int]:
    """Fork a worker that runs main(ARGS + [its answer pipe's write end]) with stdin a pipe from this process,
    stdout and stderr to `stderr`, in a session of its own, and exits when main returns (os._exit: no atexit
    handler of this process runs twice). `close`: this process's ends of earlier workers' pipes, which the new
    one must not hold (a worker sees the end of its stdin only when no process holds its write end). `env`: the
    worker's whole environment (processes.child_environment), as a spawned one would get it; default: this one's.

    Only fork a process that has run no torch operation yet (libgomp's threads do not survive a fork; OpenBLAS's
    stop and restart around one). Returns (process, the answer pipe's read end)."""
    read_fd, write_fd = (_above_stdio(fd) for fd in os.pipe())
    in_read, in_write = (_above_stdio(fd) for fd in os.pipe())
    for stream in (sys.stdout, sys.stderr):     # nothing buffered here may be written twice
        with contextlib.suppress(Exception):
            stream.flush()
    parent = os.getpid()
    # the stop signals wait until the fork has its own handlers and streams: none reaches the user's terminal
    # through this process's handlers (the child unblocks them; the parent right after the fork)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for fd in (read_fd, write_fd, in_read, in_write):
            os.close(fd)
        raise
    if pid == 0:
        _forked_child(main, [*args, str(write_fd)], parent, in_read, stderr.fileno(),
                      {*close, read_fd, in_write}, env, blocked)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    os.close(write_fd)
    os.close(in_read)
    return ForkedProcess(pid, os.fdopen(in_write, "wb")), read_fd


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _above_stdio(fd: int) -> int:
    """`fd`, or a copy of it numbered 3 or more: a process whose stdin, stdout or stderr is closed gets new pipes
    there, which the fork's own stdin, stdout and stderr would replace."""
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _forked_child(main: Callable[[list[str]], None], args: list[str], parent: int, stdin_fd: int, stderr_fd: int,
                  close: set[int], env: Mapping[str, str] | None, mask: Iterable[int]) -> None:
    """The forked worker: the set-up a fresh interpreter would have (its own session and streams, Python's
    default signal handlers where the signal is not ignored, $LNBENCH_PARENT_PID), then main(args); never returns."""
    code = 1
    try:
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(stderr_fd, 1)
        os.dup2(stderr_fd, 2)
        for fd in close | {stdin_fd, stderr_fd}:
            if fd > 2:
                with contextlib.suppress(OSError):
                    os.close(fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
        for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                             (signal.SIGHUP, signal.SIG_DFL)):
            if signal.getsignal(sig) != signal.SIG_IGN:     # one ignored stays ignored, as across an exec (nohup)
                signal.signal(sig, default)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.environ[PARENT_PID_VAR] = str(parent)
        name_process(WORKER_NAME)
        gc.enable()                  # (a parent still importing forks with the collector off: lnbench.cli)
        main(args)
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:       # noqa: BLE001 - its last line reaches the parent (Worker.last_line)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _worker_main(module: str) -> Callable[[list[str]], None]:
    """A worker module's entry for a fork, after importing what its workers need (its WORKER_IMPORTS; one that
    cannot be imported is the business of whoever uses it)."""
    mod = importlib.import_module(module)
    for name in getattr(mod, "WORKER_IMPORTS", ()):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    return mod.worker_main


_fork = fork


class Pool:
    """Workers started in one temporary folder; leaving the `with` block stops every one still running and removes
    the folder (module docstring)."""

    def __init__(self, prefix: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.workers: list[Worker] = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def folder(self, name: str) -> Path:
        """A worker's own folder in the pool's."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def start(self, number: int, module: str, args: list[str], env: Mapping[str, str | None] | None, folder: Path,
              *, answers: bool = False, own_stdout: bool = False, fork: bool = False) -> Worker:
        """Start a worker (the module docstring): `python -m module ARGS`, or with `fork` (where `allow_fork` was
        called; `answers` only) a fork calling the module's `worker_main(ARGS + [answer pipe])` after importing
        its WORKER_IMPORTS here. Its stderr goes to FOLDER/stderr.txt (its stdout too, unless `own_stdout`:
        then FOLDER/stdout.txt). A worker that cannot start is returned with proc None and `start_error`."""
        global _started
        stderr = folder / "stderr.txt"
        with open(stderr, "wb") as err, \
                open(folder / "stdout.txt", "wb") if own_stdout else contextlib.nullcontext() as out:
            proc: ChildProcess
            fd: int | None
            try:
                if fork and answers and _fork_allowed:
                    main = _worker_main(module)
                    gc.freeze()     # what the parent made so far: a fork's collections skip it (walking it would
                    #                 copy the shared pages)
                    proc, fd = _fork(main, args, err, [f for w in self.workers for f in w.own_fds()],
                                     child_environment(env))
                else:
                    proc, fd = spawn(module, args, env, err, out, answers)
            except OSError as exc:
                return self._add(Worker(number, None, stderr, start_error=f"cannot start worker: {exc}"))
        _started += 1
        return self._add(Worker(number, proc, stderr, fd))

    def _add(self, worker: Worker) -> Worker:
        self.workers.append(worker)
        return worker

    def forget(self, worker: Worker) -> None:
        """A worker that is gone and collected: close what the pool holds of it."""
        worker.stop()
        self.workers.remove(worker)

    def stop_all(self) -> None:
        """Stop every worker still running (and close their pipes); their files stay until `close`."""
        for worker in self.workers:
            worker.stop()

    def close(self) -> None:
        self.stop_all()
        self.workers.clear()
        if not os.environ.get(KEEP_VAR):
            shutil.rmtree(self.root, ignore_errors=True)

