"""verify's workers as forks of the parent (lnbench.run.pool, one worker mechanism): allowed only where the run will
most likely use workers on the emulated device, and only before torch is imported; a run whose workers are forks
gives the rows of --jobs 1; a run that uses no worker (a usage error) starts none and leaves no file behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import verify_workers
from lnbench.run import pool
from lnbench.run.device import emulator_status
from lnbench.verify import parallel

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
emulated = pytest.mark.skipif(not emulator_status()[0], reason=f"needs the emulated device: {emulator_status()[1]}")


@pytest.mark.parametrize("device, jobs, devices, self_test, wanted", [
    (None, 2, None, False, True), ("emu:gfx950", 2, None, False, True), ("emu", None, None, False, True),
    (None, 1, None, False, False), ("cpu", 2, None, False, False), ("cuda:0", 2, None, False, False),
    (None, 2, None, True, False), (None, None, "0,1", False, False), (None, None, "all", False, False),
])
def test_workers_are_forks_only_where_the_run_will_use_them(monkeypatch, device, jobs, devices, self_test, wanted):
    monkeypatch.setattr(parallel, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(parallel, "_emulator_installed", lambda: True)
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: {0, 1})
    asked = []
    monkeypatch.setattr(parallel, "allow_fork", lambda imports: asked.append(imports) or True)
    assert parallel.may_fork(device, jobs, devices, self_test) is wanted
    assert asked == ([parallel.WORKER_IMPORTS] if wanted else [])


def test_with_a_gpu_node_only_an_explicit_emulated_device_forks(monkeypatch, tmp_path):
    node = tmp_path / "kfd"
    node.write_text("")
    monkeypatch.setattr(parallel, "_GPU_NODES", (str(node),))
    monkeypatch.setattr(parallel, "_emulator_installed", lambda: True)
    monkeypatch.setattr(parallel, "allow_fork", lambda imports: True)
    assert parallel.may_fork(None, 2, None, False) is False
    assert parallel.may_fork("emu", 2, None, False) is True


def test_one_core_or_no_emulator_forks_nothing(monkeypatch):
    monkeypatch.setattr(parallel, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(parallel, "allow_fork", lambda imports: True)
    monkeypatch.setattr(parallel, "_emulator_installed", lambda: False)
    assert parallel.may_fork("emu", 2, None, False) is False
    monkeypatch.setattr(parallel, "_emulator_installed", lambda: True)
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: {5})
    assert parallel.may_fork(None, None, None, False) is False      # one core: the run goes in one process


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "200", "LNBENCH_RESULTS_DIR": str(tmp_path / "results")}
    return subprocess.run([sys.executable, "-m", "lnbench.cli", "verify", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def _workers_of(tmp_path: Path) -> list[int]:
    """This test's verify workers (their TMPDIR is this test's)."""
    return verify_workers(tmp_path / "tmp")


@linux
@emulated
def test_forked_workers_give_the_rows_of_one_process(tmp_path):
    common = ["--device", "emu", "--backend", "torch", "--dtype", "f32", "--shapes", "4x8,3x5", "-q"]
    one = _run([*common, "--jobs", "1", "--json", str(tmp_path / "one.json")], tmp_path)
    two = _run([*common, "--jobs", "2", "--json", str(tmp_path / "two.json")], tmp_path)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    rows = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two")]
    assert rows[0]["data"] == rows[1]["data"] and len(rows[0]["data"]) >= 20
    assert rows[1]["metadata"]["jobs"] == 2


@linux
@emulated
def test_a_run_that_uses_no_worker_leaves_none_behind(tmp_path):
    result = _run(["--device", "emu", "--jobs", "2", "--emu-checks", "bogus"], tmp_path)
    assert result.returncode == 2 and "unknown emulator check" in result.stderr, result.stderr
    # none was started; the limit only ends a test that would hang
    deadline = time.monotonic() + 120
    while _workers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers_of(tmp_path)
    # lnbench's own cache, where a HOME that cannot be written sends it, is no worker's leftover
    assert not [p for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("lnbench-cache-")], \
        "files left behind"


def test_the_fork_decision_comes_before_torch_loads():
    """verify's command imports lnbench.verify.parallel for may_fork before anything imports torch: that import
    must not load torch itself (it once did, through the spec's field types, and no worker was a fork)."""
    done = subprocess.run([sys.executable, "-c", "import sys, lnbench.verify.parallel; print('torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr


def test_no_fork_once_torch_is_imported_without_the_workers_openmp_setting(monkeypatch):
    """libgomp reads OMP_WAIT_POLICY when it loads: a process that imported torch before the command could set it
    would fork workers whose idle threads spin, so forks are not allowed (the run spawns its workers)."""
    import torch  # noqa: F401  (imported, as by whatever imported lnbench.verify before the command line did)

    monkeypatch.setattr(pool, "WORKER_ENV", {"OMP_WAIT_POLICY": "PASSIVE"})
    monkeypatch.setattr(pool, "_fork_allowed", False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert pool.allow_fork() is False and "OMP_WAIT_POLICY" not in os.environ
    # with the setting already the user's (WORKER_ENV empty), the forks inherit it: they are allowed
    monkeypatch.setattr(pool, "WORKER_ENV", {})
    assert pool.allow_fork() is True
    monkeypatch.setattr(pool, "_fork_allowed", False)   # (this test process forks nothing)


def test_the_autograd_cases_backward_imports_no_symbolic_shapes():
    """runner.backward_with: a verify worker's autograd cases never import torch's symbolic-shape helpers (sympy,
    ~0.3 s a worker), which y.backward(dy) itself imports."""
    script = """
import sys, torch
from lnbench.verify.runner import backward_with
x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
backward_with(torch.nn.functional.layer_norm(x, (8,)), torch.randn(3, 8, dtype=torch.float64))
before = "torch.fx.experimental.symbolic_shapes" in sys.modules
x.grad = None
torch.nn.functional.layer_norm(x, (8,)).backward(torch.randn(3, 8, dtype=torch.float64))
print(before, "torch.fx.experimental.symbolic_shapes" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]      # (the second: the import is real, and is y.backward's)
