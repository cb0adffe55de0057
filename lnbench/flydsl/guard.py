"""Run a FlyDSL compile with the process's stderr captured: an LLVM `error:` line is a failure.

FlyDSL can print an LLVM error (LDS overflow, missing libcall) and still return normally
(primer pitfall 7), so every compile lnbench does goes through guarded_compile(), which also notes its seconds
and whether FlyDSL's disk cache had the kernel (lnbench.flydsl.compile_log).
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterator

from lnbench.flydsl import compile_log

_LOCK = threading.RLock()          # fd 2 and os.environ are process-wide
_ERROR = re.compile(r"(^|\s)error:", re.IGNORECASE | re.MULTILINE)


class FlyDSLCompileError(RuntimeError):
    """A FlyDSL compile raised, or printed an `error:` line on stderr."""


@contextlib.contextmanager
def compile_environment(env: dict[str, str] | None) -> Iterator[None]:
    """`env` set in os.environ (under the process-wide lock) while the block runs, the earlier values back after."""
    with _LOCK:
        old_env = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update(env or {})
        try:
            yield
        finally:
            for key, val in old_env.items():
                if val is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = val


def guarded_compile(fn: Callable[..., Any], *args: Any, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """Call fn(*args) (normally flyc.compile) with fds 1 and 2 redirected to a temp file and `env` set;
    raise FlyDSLCompileError when it raises or when the captured output has an `error:` line."""
    with compile_environment(env):
        sys.stdout.flush()
        sys.stderr.flush()
        saved_out, saved = os.dup(1), os.dup(2)
        with tempfile.TemporaryFile(mode="w+b") as cap:
            os.dup2(cap.fileno(), 1)           # FlyDSL's dump chatter goes to stdout
            os.dup2(cap.fileno(), 2)
            err: BaseException | None = None
            folder = compile_log.launcher_folder(args[0]) if args else None   # (None: the whole cache)
            files, start = compile_log.cache_files(folder), time.monotonic()   # cold: the compile adds a cached kernel
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - re-raised below with the captured text
                err = exc
            finally:
                compile_log.note(time.monotonic() - start, compile_log.cache_files(folder) > files)
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved_out, 1)
                os.dup2(saved, 2)
                os.close(saved_out)
                os.close(saved)
            cap.seek(0)
            text = cap.read().decode(errors="replace")
    if err is not None:
        raise FlyDSLCompileError(f"FlyDSL compile failed: {err}\n{_tail(text)}") from err
    if _ERROR.search(text):
        raise FlyDSLCompileError(f"FlyDSL printed an error while compiling:\n{_tail(text)}")
    return result


def _tail(text: str, lines: int = 20) -> str:
    keep = [ln for ln in text.splitlines() if not ln.startswith("[flydsl.compile] dump")]
    return "\n".join(keep[-lines:])
