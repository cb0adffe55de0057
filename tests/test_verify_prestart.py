"""verify's early workers (lnbench.verify.prestart): started only where the run will most likely use them;
a run that adopts them gives the rows of --jobs 1; a run that uses none (a usage error) leaves no worker
process and no file behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import verify_workers
from lnbench.run.device import emulator_status
from lnbench.verify import prestart

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
emulated = pytest.mark.skipif(not emulator_status()[0], reason=f"needs the emulated device: {emulator_status()[1]}")


@pytest.mark.parametrize("argv, wanted", [
    (["--jobs", "2"], 2), (["-j", "3", "--dtype", "bf16"], 3), (["--jobs=2", "--device", "emu:gfx950"], 2),
    (["-j2"], 2), (["--jobs", "1"], 0), (["-j1"], 0), (["--jobs", "x"], 0),
    (["--jobs", "2", "--device", "cpu"], 0), (["--jobs", "2", "--device=cuda:0"], 0),
    (["--jobs", "2", "--self-test"], 0), (["--jobs", "2", "--help"], 0), (["--devices", "0,1"], 0),
    (["--devices=all"], 0),
])
def test_workers_start_early_only_where_the_run_will_use_them(monkeypatch, argv, wanted):
    monkeypatch.setattr(prestart, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(prestart, "_emulator_installed", lambda: True)
    assert prestart._wanted(argv) == wanted


def test_with_a_gpu_node_only_an_explicit_emulated_device_starts_workers(monkeypatch, tmp_path):
    node = tmp_path / "kfd"
    node.write_text("")
    monkeypatch.setattr(prestart, "_GPU_NODES", (str(node),))
    monkeypatch.setattr(prestart, "_emulator_installed", lambda: True)
    assert prestart._wanted(["--jobs", "2"]) == 0
    assert prestart._wanted(["--jobs", "2", "--device", "emu"]) == 2


def test_without_the_emulator_no_worker_starts_early(monkeypatch):
    monkeypatch.setattr(prestart, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(prestart, "_emulator_installed", lambda: False)
    assert prestart._wanted(["--jobs", "2", "--device", "emu"]) == 0


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
def test_adopted_early_workers_give_the_rows_of_one_process(tmp_path):
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
    # the early workers go once their parent has gone; the limit only ends a test that would hang
    deadline = time.monotonic() + 120
    while _workers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers_of(tmp_path)
    # lnbench's own cache, where a HOME that cannot be written sends it, is no worker's leftover
    assert not [p for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("lnbench-cache-")], \
        "files left behind"


def test_many_cores_start_at_most_max_early_workers(monkeypatch):
    monkeypatch.setattr(prestart, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(prestart, "_emulator_installed", lambda: True)
    monkeypatch.setattr(prestart.os, "sched_getaffinity", lambda pid: set(range(128)))
    assert prestart._wanted([]) == prestart.MAX_EARLY == 8
    monkeypatch.setattr(prestart.os, "sched_getaffinity", lambda pid: {5})
    assert prestart._wanted([]) == 0                       # one core: the run goes in one process


def test_no_fork_once_torch_is_imported_without_the_workers_openmp_setting(monkeypatch):
    """libgomp reads OMP_WAIT_POLICY when it loads: a process that imported torch before prestart could set it
    would fork workers whose idle threads spin, so it forks none (the run starts fresh workers itself)."""
    import torch  # noqa: F401  (imported, as by whatever imported lnbench.verify before the command line did)

    monkeypatch.setattr(prestart, "_GPU_NODES", ("/nonexistent/gpu",))
    monkeypatch.setattr(prestart, "_emulator_installed", lambda: True)
    monkeypatch.setattr(prestart, "WORKER_ENV", {"OMP_WAIT_POLICY": "PASSIVE"})
    monkeypatch.setattr(prestart, "_started", False)
    monkeypatch.setattr(prestart, "_to_fork", 0)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    prestart.prestart(["--jobs", "2"])
    assert prestart._to_fork == 0 and "OMP_WAIT_POLICY" not in os.environ
    prestart.fork_workers(lambda argv: None)
    assert prestart.pids() == []
    # with the setting already the user's (WORKER_ENV empty), the forks inherit it: they are made
    monkeypatch.setattr(prestart, "WORKER_ENV", {})
    monkeypatch.setattr(prestart, "_started", False)
    prestart.prestart(["--jobs", "2"])
    assert prestart._to_fork == 2
    monkeypatch.setattr(prestart, "_to_fork", 0)        # (not forked here: a test process is no command line)


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
