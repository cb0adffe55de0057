"""Run worker processes one after another, each with a timeout, and read their JSON results from files.

Shared with `lnbench abi-compare`. The worker contract:

    python -m <module> SPEC_JSON RESULT_JSON PROGRESS_TXT

* SPEC_JSON is the spec dict, written by `run_workers` (read it with `read_spec`).
* The worker writes its result dict to RESULT_JSON with `write_result` (temp file + rename). It may write it
  several times (after each finished unit) so that a later crash or hang still leaves partial results.
* The worker may append one line per finished unit to PROGRESS_TXT (`report_progress`); `on_progress` sees
  the line count while the worker runs (drives a progress bar).
* Environment: LNBENCH_WORKER_INDEX / LNBENCH_WORKER_COUNT; the folder holding the `lnbench` package is put
  first on PYTHONPATH so a checkout runs without installing.

Compile caches: every worker gets its OWN fresh cache folders (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR,
FLYDSL_RUNTIME_CACHE_DIR under a private temp root, removed afterwards), so no two workers ever share or
race on an on-disk cache and each worker compiles from scratch (its compile time lands in its warm-up, never
in a timed run). A caller that wants a shared, pre-warmed cache passes those variables in `env`; values
in `env` win. Workers run sequentially (one GPU: never concurrently).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import lnbench

CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "FLYDSL_RUNTIME_CACHE_DIR")
_TAIL_CHARS = 2000
_POLL_S = 0.05
_TERM_GRACE_S = 3.0


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

    def problem(self) -> str:
        """One line saying why a worker failed ('' when ok)."""
        if self.ok:
            return ""
        last = next((line.strip() for line in reversed(self.stderr_tail.splitlines()) if line.strip()), "")
        if self.timed_out:
            head = f"worker {self.index} timed out after {self.duration_s:.0f} s (killed, exit {self.exit_code})"
        elif self.exit_code == 0:
            head = f"worker {self.index} exited 0 without a result file"
        else:
            head = f"worker {self.index} exited with status {self.exit_code}"
        return f"{head}: {last}" if last else head


def read_spec(argv: list[str] | None = None) -> tuple[dict[str, Any], Path, Path | None]:
    """Worker side: (spec, result path, progress path) from the command line."""
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


def _tail(path: Path, limit: int = _TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as handle:
            return handle.read().count(b"\n")
    except OSError:
        return 0


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's own process group (it is a session leader), then SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _child_env(index: int, count: int, root: Path, env: dict[str, str] | None) -> dict[str, str]:
    """os.environ + `env` (wins), own cache folders unless `env` names them, lnbench importable."""
    child = {**os.environ, **(env or {})}
    pkg_parent = str(Path(lnbench.__file__).resolve().parent.parent)
    child["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, child.get("PYTHONPATH", "")) if p)
    for var in CACHE_VARS:
        if env and var in env:
            continue
        folder = root / "cache" / var.lower()
        folder.mkdir(parents=True, exist_ok=True)
        child[var] = str(folder)
    child["LNBENCH_WORKER_INDEX"] = str(index)
    child["LNBENCH_WORKER_COUNT"] = str(count)
    return child


def run_one(module: str, spec: dict[str, Any], index: int, count: int, timeout_s: float,
            env: dict[str, str] | None, root: Path,
            on_progress: Callable[[int, int], None] | None = None) -> WorkerResult:
    """Run one worker to completion or timeout; see the module docstring for the contract."""
    root.mkdir(parents=True, exist_ok=True)
    spec_path, result_path, progress_path = root / "spec.json", root / "result.json", root / "progress.txt"
    stderr_path, stdout_path = root / "stderr.txt", root / "stdout.txt"
    spec_path.write_text(json.dumps(spec, default=str))
    progress_path.write_text("")
    cmd = [sys.executable, "-m", module, str(spec_path), str(result_path), str(progress_path)]
    start = time.monotonic()
    timed_out, seen = False, 0
    with open(stderr_path, "wb") as err, open(stdout_path, "wb") as out:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    env=_child_env(index, count, root, env), start_new_session=True)
        except OSError as exc:
            return WorkerResult(index, False, None, False, None, f"cannot start worker: {exc}", 0.0)
        try:
            while proc.poll() is None:
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                    _kill_group(proc)
                    break
                if on_progress is not None:
                    done = _lines(progress_path)
                    if done != seen:
                        seen = done
                        on_progress(index, done)
                time.sleep(_POLL_S)
        except BaseException:
            _kill_group(proc)
            raise
    duration = time.monotonic() - start
    if on_progress is not None and _lines(progress_path) != seen:
        on_progress(index, _lines(progress_path))
    payload = None
    try:
        payload = json.loads(result_path.read_text())
    except (OSError, ValueError):
        payload = None
    code = proc.returncode
    ok = code == 0 and not timed_out and isinstance(payload, dict)
    return WorkerResult(index, ok, code, timed_out, payload if isinstance(payload, dict) else None,
                        _tail(stderr_path), duration)


def run_workers(module: str, specs: list[dict], timeout_s: float, env: dict[str, str] | None = None,
                on_done: Callable[[WorkerResult], None] | None = None, *,
                on_progress: Callable[[int, int], None] | None = None) -> list[WorkerResult]:
    """Run `python -m <module>` once per spec, sequentially, each under `timeout_s` seconds.

    Returns one WorkerResult per spec, in spec order; a crash or timeout never raises, it is reported in
    its WorkerResult (exit status, stderr tail) and the remaining specs still run. `on_done` is called
    after each worker; `on_progress(index, lines)` while it runs, as its progress file grows.
    Each worker gets its own fresh compile-cache folders (see the module docstring).
    """
    results: list[WorkerResult] = []
    root = Path(tempfile.mkdtemp(prefix="lnbench-workers-"))
    try:
        for index, spec in enumerate(specs):
            result = run_one(module, spec, index, len(specs), timeout_s, env, root / f"w{index}", on_progress)
            results.append(result)
            if on_done is not None:
                on_done(result)
    finally:
        if not os.environ.get("LNBENCH_KEEP_WORKER_DIRS"):
            shutil.rmtree(root, ignore_errors=True)
    return results
