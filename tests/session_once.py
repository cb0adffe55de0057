"""Work done once per test session, whichever test process (pytest-xdist worker) needs it first.

    built_once(tmp_path_factory, name, build)   the folder build(folder) filled: built by the first process to ask,
                                                read by the others (they wait while it is being built)

A module-scoped fixture runs once per worker that gets one of the module's tests: with `-n 2` the same commands ran
twice. Here the folder lives in the session's temporary folder (the parent of each worker's own), a lock file makes
the other workers wait for the build, and a marker written after a successful build tells them it is there. A build
that raised leaves no marker: the next process to ask builds it again (and fails in its own tests the same way).
Tests read the folder; what they write goes to their own tmp_path.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` of this session, filled by build(folder) in the first process that asks for it."""
    root = _session_root(tmp_path_factory)
    folder, done = root / f"once-{name}", root / f"once-{name}.done"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                build(folder)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder
