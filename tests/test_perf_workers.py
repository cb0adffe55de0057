"""run_workers with real worker subprocesses: results come back from files, crashes and hangs are reported
with their exit status and stderr tail, and the other workers still run."""
from __future__ import annotations

import time

import pytest

from lnbench.run.workers import CACHE_VARS, run_workers

MODULE = "lnbench.perf.worker_main"
PROTOCOL = {"runs": 2, "warmup_s": 0.0, "min_warmup_calls": 1, "target_run_s": 0.0, "min_iters": 2, "max_iters": 2,
            "cold_factor": 3.0, "cold_mem_fraction": 0.4, "llc_mib": 0.0}


def _spec(cases: list[dict]) -> dict:
    return {"device": "cpu", "protocol": PROTOCOL, "cases": cases}


def _case(case_id: int, op: str = "fwd", backend: str = "torch") -> dict:
    return {"id": case_id, "backend": backend, "op": op, "mode": "hot", "dtype": "f32", "m": 4, "n": 32,
            "eps": 1e-5, "seed": 1}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_crashed_worker_is_reported_and_the_others_still_run():
    specs = [_spec([_case(0), _case(1, "bwd")]), _spec([_case(0)]), _spec([_case(0, "fwd+bwd")])]
    done: list[int] = []
    results = run_workers(MODULE, specs, timeout_s=120.0, env={"LNBENCH_PERF_FAULT": "1:crash"},
                          on_done=lambda r: done.append(r.index))
    assert done == [0, 1, 2] and [r.index for r in results] == [0, 1, 2]
    good, crashed, after = results
    assert good.ok and good.exit_code == 0 and not good.timed_out and good.problem() == ""
    assert [c["status"] for c in good.payload["cases"]] == ["ok", "ok"]
    assert good.payload["complete"] is True
    assert len(good.payload["cases"][0]["measurement"]["run_us"]) == 2
    assert not crashed.ok and crashed.exit_code == 3 and not crashed.timed_out
    assert "worker 1 crash" in crashed.stderr_tail and "status 3" in crashed.problem()
    assert crashed.payload is not None and crashed.payload["cases"] == []  # partial file from before the crash
    assert after.ok and after.payload["cases"][0]["status"] == "ok"  # the worker after the crash still ran


def test_hung_worker_is_killed_at_its_timeout(tmp_path):
    """The timeout is counted on a clock that stands still until the worker has reached its hang (the marker file
    the fault hook creates after its stderr line), then passes it: however slow the machine starts the worker."""
    mark = tmp_path / "hung"
    real_start = time.monotonic()

    def clock() -> float:
        reached = mark.exists() or time.monotonic() - real_start > 300   # (the fallback only ends a broken test)
        return 10.0 if reached else 0.0

    results = run_workers(MODULE, [_spec([_case(0)])], timeout_s=3.0, clock=clock,
                          env={"LNBENCH_PERF_FAULT": "0:hang", "LNBENCH_PERF_FAULT_MARK": str(mark)})
    (hung,) = results
    assert not hung.ok and hung.timed_out and hung.exit_code is not None and hung.exit_code < 0
    assert "worker 0 hang" in hung.stderr_tail
    # (it hangs before its first case: in start-up) the report names how long it ran, as measured; when a
    # worker is cut off, on a clock the test moves: tests/test_perf_worker_turns.py's hung-worker tests
    assert hung.problem().startswith(f"worker 0 timed out in start-up after {hung.duration_s:.3g} s (killed, exit ")


def test_each_worker_gets_its_own_cache_dirs_and_index(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "from lnbench.run.workers import read_spec, write_result, report_progress\n"
        "spec, out, prog = read_spec()\n"
        f"report_progress(prog, 'one')\n"
        f"write_result(out, {{'env': {{k: os.environ.get(k) for k in {list(CACHE_VARS)!r}}},"
        " 'index': os.environ['LNBENCH_WORKER_INDEX'], 'count': os.environ['LNBENCH_WORKER_COUNT'], 'spec': spec})\n")
    seen: list[tuple[int, int]] = []
    results = run_workers("probe", [{"a": 1}, {"a": 2}], timeout_s=30,
                          env={"PYTHONPATH": f"{tmp_path}:" + __import__("os").environ.get("PYTHONPATH", "")},
                          on_progress=lambda i, n, label: seen.append((i, n, label)))
    assert [r.ok for r in results] == [True, True]
    assert [r.payload["spec"]["a"] for r in results] == [1, 2]
    assert [r.payload["index"] for r in results] == ["0", "1"] and results[0].payload["count"] == "2"
    dirs = [set(r.payload["env"].values()) for r in results]
    assert all(None not in d and len(d) == len(CACHE_VARS) for d in dirs)
    assert dirs[0].isdisjoint(dirs[1])  # no shared on-disk compile cache between workers
    assert (0, 1, "one") in seen and (1, 1, "one") in seen
