"""Run-time estimates (lnbench.eta, verify/estimate.py, perf/estimate.py): the model against recorded runs, the
running estimate's stability, and a real short run's printed estimate against its wall time."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time

import pytest

from lnbench import eta
from lnbench.device import emu_device, parse_device
from lnbench.verify.cases import Case, build_cases
from lnbench.verify.estimate import Estimate, compile_seconds, unit_costs, unit_seconds

#: a finished run recorded on the 2-core development machine (December 2026): `verify --device cpu --dtype bf16
#: --shapes 3x7,2048x8192,4096x8192` (torch, in one process): per unit (kind, M, N, wall seconds), the load
#: average while it ran, and the wall time from the estimate to the end
RECORDED_CPU = ([("randn", 3, 7, 3.79), ("offset", 3, 7, 0.79), ("constant", 3, 7, 0.65), ("eps2", 3, 7, 0.72),
                 ("autograd-3d", 3, 7, 0.48), ("randn", 2048, 8192, 16.30), ("offset", 2048, 8192, 14.48),
                 ("constant", 2048, 8192, 15.06), ("eps2", 2048, 8192, 10.06), ("autograd-3d", 2048, 8192, 13.84),
                 ("randn", 4096, 8192, 36.66), ("offset", 4096, 8192, 39.00), ("constant", 4096, 8192, 39.95),
                 ("eps2", 4096, 8192, 43.86), ("autograd-3d", 4096, 8192, 50.69)], 12.6, 286.7)
#: emulated runs in 2 workers, recorded the same way: (shapes, dtype, backends, load, wall seconds)
RECORDED_EMU = [([(8, 64)], "f32", ["flydsl"], 12.1, 6.6),
                ([(64, 256), (3, 257)], "bf16", ["flydsl", "flydsl-tensor", "flydsl-atomic", "torch"], 13.9, 20.2),
                ([(64, 256), (3, 257), (1, 1024), (16, 1), (37, 2000), (128, 8192)], "bf16",
                 ["flydsl", "flydsl-tensor", "flydsl-atomic", "torch"], 14.6, 66.9)]
#: `verify --device emu --dtype bf16 --shapes 256x4096,1024x2048` (the run whose estimate came out 2.1× long),
#: recorded in 2 workers at load 1.4: per unit in the order they finished (backend, kind, M, N, worker seconds,
#: the first unit of each worker with its start-up and each new kernel's with its compile), and the wall time
#: from the estimate to the end
RECORDED_MID = ([(backend, kind, int(m), int(n), float(seconds)) for backend, kind, m, n, seconds in (
    re.fullmatch(r"(\S+) (\S+) (\d+)x(\d+) (\S+)", unit.strip()).groups() for unit in """
flydsl randn 256x4096 1.48, flydsl randn 1024x2048 2.00, flydsl offset 256x4096 0.59,
flydsl constant 256x4096 0.60, flydsl offset 1024x2048 1.17, flydsl eps2 256x4096 0.68,
flydsl autograd-3d 256x4096 0.42, flydsl constant 1024x2048 1.14, flydsl-tensor randn 256x4096 0.83,
flydsl-tensor offset 256x4096 0.55, flydsl eps2 1024x2048 1.17, flydsl-tensor constant 256x4096 0.63,
flydsl autograd-3d 1024x2048 0.67, flydsl-tensor eps2 256x4096 0.61, flydsl-tensor autograd-3d 256x4096 0.34,
flydsl-atomic randn 256x4096 0.56, flydsl-tensor randn 1024x2048 1.29, flydsl-atomic offset 256x4096 0.54,
flydsl-atomic constant 256x4096 0.52, flydsl-tensor offset 1024x2048 1.00, flydsl-atomic eps2 256x4096 0.52,
flydsl-atomic autograd-3d 256x4096 0.35, torch randn 256x4096 0.02, torch offset 256x4096 0.02,
torch constant 256x4096 0.02, torch eps2 256x4096 0.02, torch autograd-3d 256x4096 0.02,
flydsl-tensor constant 1024x2048 0.98, flydsl-tensor autograd-3d 1024x2048 0.67,
flydsl-tensor eps2 1024x2048 1.49, flydsl-atomic randn 1024x2048 0.95, flydsl-atomic constant 1024x2048 0.80,
flydsl-atomic offset 1024x2048 1.27, flydsl-atomic eps2 1024x2048 0.88, torch randn 1024x2048 0.01,
torch offset 1024x2048 0.09, flydsl-atomic autograd-3d 1024x2048 0.85, torch constant 1024x2048 0.08,
torch eps2 1024x2048 0.04, torch autograd-3d 1024x2048 0.08
""".split(",") if unit.strip())], 1.4, 13.2)


def _cases(units: list[tuple[str, int, int, float]]) -> list[Case]:
    return [Case(kind, "bf16", m, n, 1e-2 if kind == "eps2" else 1e-5, 1) for kind, m, n, _ in units]


def _jumps(values: list[float]) -> float:
    return max(max(a, b) / min(a, b) for a, b in zip(values, values[1:]) if min(a, b) > 0)


def test_verify_model_is_within_1_5x_of_recorded_runs():
    units, load, wall = RECORDED_CPU
    cpu = parse_device("cpu")
    costs = {i: unit_seconds("torch", case, cpu, inline=True) for i, case in enumerate(_cases(units))}
    assert 1 / 1.5 <= Estimate(costs, 1, 0.0, others=load, cpus=2).wall_s / wall <= 1.5
    emu = emu_device("gfx942")
    for shapes, dtype, backends, load, wall in RECORDED_EMU:
        pairs = [(b, c) for b in backends for c in build_cases(shapes, [dtype], [1e-5, 1e-2], 1)]
        modelled = Estimate(unit_costs(pairs, emu), 2, compile_seconds(pairs, emu), others=load, cpus=2).wall_s
        assert 1 / 1.5 <= modelled / wall <= 1.5, (shapes, modelled, wall)


def test_verify_model_prices_each_kind_of_unit_of_the_mid_sized_emulated_run_from_its_recorded_costs():
    """The run that came out 2.1× long: its torch units (after the FlyDSL units of the same case, whose set-up
    they share) took 0.01–0.09 s and were modelled at 0.25–0.44 s each as if they set their case up; its
    autograd-3d units (forward and backward once) took 0.65× a 2-D unit. Each kind's modelled seconds within
    1.25× of the recorded ones (the first units' start-up and compiles in the 2-D FlyDSL ones), the run's within
    1.25× of its wall time. Fails with the model before (torch 8×, autograd-3d 1.5×)."""
    units, load, wall = RECORDED_MID
    emu = emu_device("gfx942")
    pairs = [(b, c) for b in ["flydsl", "flydsl-tensor", "flydsl-atomic", "torch"]
             for c in build_cases([(256, 4096), (1024, 2048)], ["bf16"], [1e-5, 1e-2], 1)]
    costs = unit_costs(pairs, emu)
    modelled = {(b, c.kind, c.rows, c.n, c.eps): costs[i] for i, (b, c) in enumerate(pairs)}
    assert len(modelled) == len(units) == 40

    def kind_of(backend: str, kind: str) -> str:
        return "host" if backend == "torch" else "autograd" if kind == "autograd-3d" else "2-D"
    model_s: dict[str, float] = {}
    recorded_s: dict[str, float] = {}
    for backend, kind, m, n, seconds in units:
        key = next(k for k in modelled if k[:4] == (backend, kind, m, n))
        model_s[kind_of(backend, kind)] = model_s.get(kind_of(backend, kind), 0.0) + modelled[key]
        recorded_s[kind_of(backend, kind)] = recorded_s.get(kind_of(backend, kind), 0.0) + seconds
    for name in recorded_s:
        assert 1 / 1.25 <= model_s[name] / recorded_s[name] <= 1.25, (name, model_s[name], recorded_s[name])
    estimate = Estimate(costs, 2, compile_seconds(pairs, emu), others=0, cpus=2).wall_s     # load 1.4: others 0
    assert 1 / 1.25 <= estimate / wall <= 1.25, estimate


def test_a_host_unit_shares_the_set_up_of_its_case_only_where_the_runner_keeps_it():
    emu = emu_device("gfx942")
    small, big = Case("randn", "bf16", 256, 4096, 1e-5, 1), Case("randn", "bf16", 2048, 4096, 1e-5, 1)
    costs = unit_costs([("flydsl", small), ("torch", small), ("flydsl", big), ("torch", big)], emu)
    assert costs[1] == unit_seconds("torch", small, emu, set_up=True) < unit_seconds("torch", small, emu) / 5
    assert costs[3] == unit_seconds("torch", big, emu)          # above SETUP_SHARE_ELEMENTS: set up again
    from lnbench.verify import estimate, runner
    assert estimate.SETUP_SHARE_ELEMENTS == runner.SETUP_SHARE_ELEMENTS


def test_running_estimate_replays_a_recorded_run_within_1_5x_and_without_jumps(monkeypatch):
    units, load, wall = RECORDED_CPU
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    cases = _cases(units)
    est = Estimate({i: unit_seconds("torch", c, parse_device("cpu"), inline=True) for i, c in enumerate(cases)}, 1,
                   others=load, cpus=2)
    left = []
    for i, (*_, seconds) in enumerate(units):
        clock[0] += seconds
        est.finished(i)
        if est.done_cost >= 0.1 * sum(est.costs.values()) and i < len(units) - 1:
            left.append(est.remaining_s())
            assert 1 / 1.5 <= left[-1] / (wall - clock[0]) <= 1.5
    assert _jumps(left) <= 2


def test_first_units_far_over_their_model_do_not_make_the_estimate_jump(monkeypatch):
    """The issue's run: tiny first cases cost 10× their model (first calls), the big ones a quarter of theirs; the
    wall-over-model ratio of the finished units alone went from ~49 min left to ~46 s. With the model as a prior,
    no update after the first tenth of the work moves the estimate by more than 2×, for that run and for 50
    random ones: neither the time left shown (until the last tenth, where finishing half of what is left halves
    it) nor the speed it assumes (wall over modelled seconds)."""
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    issue = [(0.06, 0.7)] * 15 + [(6.0, 1.5)] * 30
    rng = random.Random(7)
    runs = [issue] + [[(m, m * rng.lognormvariate(0, 0.7)) for m in (rng.uniform(0.05, 20) for _ in range(60))]
                      for _ in range(50)]
    for run in runs:
        clock[0] = 0.0
        est = Estimate({i: m for i, (m, _) in enumerate(run)}, 1, others=0, cpus=2)
        total = sum(est.costs.values())
        left, speed = [], []
        for i, (_, seconds) in enumerate(run):
            clock[0] += seconds
            est.finished(i)
            shares = (est.done_cost / total, (i + 1) / len(run))       # of the modelled work, of the cases
            if max(shares) >= 0.1:
                speed.append(est.running.ratio)
                if min(shares) <= 0.9:
                    left.append(est.remaining_s())
        assert _jumps(left) <= 2 and _jumps(speed) <= 2


def test_makespan_and_slowdown():
    assert eta.makespan([10, 30], 2) == 30 and eta.makespan([3, 3, 2, 2, 2], 2) == 7
    assert eta.slowdown(2, others=0, cpus=2) == 1 and eta.slowdown(1, others=13, cpus=2) == 7


def test_perf_estimate_follows_the_protocol():
    from lnbench.perf.cases import PerfCase
    from lnbench.perf.estimate import PerfEstimate, case_seconds
    from lnbench.perf.protocol import PerfProtocol

    protocol = PerfProtocol()
    small = PerfCase(0, "torch", "fwd", "bf16", 64, 256, "hot", 1e-5, 1)
    # a fast call: a warm-up of warmup_s, then R runs of I = max_iters calls
    assert case_seconds(small, protocol, "cpu") == pytest.approx(0.35 + protocol.warmup_s, rel=0.3)
    cases = [PerfCase(i, "torch", op, "bf16", 1024, 1024, mode, 1e-5, 1)
             for i, (op, mode) in enumerate([("fwd", "cold"), ("fwd", "hot"), ("bwd", "cold"), ("bwd", "hot")])]
    # recorded: `perf --shapes 1024x1024` on this machine, 3 workers, load 14.4 on 2 cores: 76.5 s; at load 3 the
    # same run took 17.4 s, 4.4x less, where the runnable threads per core (eta.slowdown) say 3x: on a machine
    # that busy the model comes out short (0.64x), within 2x
    est = PerfEstimate([[cases] * 3], protocol, "cpu", others=14.4, cpus=2)
    assert 1 / 2 <= est.wall_s / 76.5 <= 1.5
    assert 1 / 1.5 <= PerfEstimate([[cases] * 3], protocol, "cpu", others=2, cpus=2).wall_s / 17.4 <= 1.5
    assert PerfEstimate([[cases] * 3], protocol, "cpu", kernel_pass=True, others=14.4, cpus=2).wall_s > est.wall_s
    est.update(0, 0, 4)
    assert est.running.done_s == pytest.approx(est.startup + sum(est.costs[0][0]))


def test_perf_model_prices_the_cases_of_a_recorded_tiny_run():
    """`perf --shape-set tiny` (64x256, 37x1000; fwd, bwd; cold, hot) at load 2.8, nothing else counted busy:
    each worker's turn took 5.6 and 6.1 s (recorded per case below), and the estimate said 32 s for an 18 s run:
    a case's set-up, its GB filled and its rotated sets (1536 of them for a cold 64x256 forward) were priced 2-4x
    what they took. Each worker's modelled turn within 1.25x of the recorded ones, the run within 1.25x."""
    from lnbench.perf.cases import PerfCase
    from lnbench.perf.estimate import PerfEstimate
    from lnbench.perf.protocol import PerfProtocol

    cases = [PerfCase(i, "torch", op, "bf16", m, n, mode, 1e-5, 1) for i, (m, n, op, mode) in enumerate(
        (m, n, op, mode) for m, n in ((64, 256), (37, 1000)) for op in ("fwd", "bwd") for mode in ("cold", "hot"))]
    turns = [[0.96, 0.35, 0.61, 0.35, 0.51, 0.30, 2.07, 0.46], [0.96, 0.45, 0.96, 0.36, 0.50, 0.35, 0.51, 2.03]]
    est = PerfEstimate([[cases] * 3], PerfProtocol(), "cpu", others=0, cpus=2)
    for turn in turns:
        assert 1 / 1.25 <= sum(est.costs[0][0]) / sum(turn) <= 1.25, (est.costs[0][0], turn)
    assert 1 / 1.25 <= est.wall_s / 18.1 <= 1.25, est.wall_s


def test_finish_times_hand_costs_out_in_order_to_the_first_free_worker():
    assert eta.finish_times([3, 10, 1, 1], 2) == [3, 10, 4, 5] and eta.finish_times([], 2) == []
    assert eta.makespan([1, 1, 10, 3], 2) == 10 < max(eta.finish_times([1, 1, 10, 3], 2))     # in order: 12


def test_modelled_perf_estimate_replays_a_recorded_run(monkeypatch):
    """`perf --device emu` (its default cases: fwd and bwd of 4096x4096, 32768x8192, 8192x1024, 1024x16384 in
    2 workers taking them in order) took 191 s on this machine at load 2.4 and printed no estimate. Recorded:
    the cases reported at 7.7 s (1), 89.2 s (2–5) and 189.1 s (6–8). The model: within 1.5× of the wall time
    before it starts, of the time left after the first report, and its time left never grows."""
    from lnbench.perf.estimate import ModelledEstimate

    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    shapes = [(4096, 4096), (32768, 8192), (8192, 1024), (1024, 16384)]
    est = ModelledEstimate([(op, m, n) for op in ("fwd", "bwd") for m, n in shapes], 2, others=1, cpus=2)
    assert 1 / 1.5 <= est.wall_s / 191.1 <= 1.5, est.wall_s
    left = [est.remaining_s()]
    for at, done in [(7.7, 1), (89.2, 2), (89.2, 5), (189.1, 8)]:
        clock[0] = at
        est.update(done)
        left.append(est.remaining_s())
        if done < 8:
            assert 1 / 1.5 <= left[-1] / (191.1 - at) <= 1.5, (at, left[-1])
    assert left == sorted(left, reverse=True) and left[-1] == 0


def _timed_run(args: list[str], tmp_path) -> tuple[float, float, str]:
    """(printed estimate, seconds from that line to the exit, stderr) of a real lnbench run."""
    env = {**os.environ, "COLUMNS": "200", "LNBENCH_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.Popen([sys.executable, "-m", "lnbench.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    estimate, seen, lines = None, 0.0, []
    for line in proc.stderr:
        lines.append(line)
        found = re.search(r"estimated time: ~(\d+) s", line)
        if found and estimate is None:
            estimate, seen = float(found.group(1)), time.monotonic()
    proc.wait(timeout=300)
    text = "".join(lines)
    assert proc.returncode == 0 and estimate is not None, text
    return estimate, time.monotonic() - seen, text


def _close(estimate: float, actual: float) -> bool:
    """The printed estimate is of the right size: within 3× (or 3 s) of the wall time. A unit test shares its
    2 cores with the suite's other worker (`pytest -n 2`), which made a 4 s estimate of a perf run take 7 s;
    the 1.5× goal is measured on a quiet machine, in the runs table of docs/running.md, not asserted here."""
    return 1 / 3 <= max(estimate, 1) / max(actual, 1) <= 3 or abs(estimate - actual) <= 3


def test_a_short_emulated_verify_prints_an_estimate_of_its_wall_time(tmp_path):
    estimate, actual, text = _timed_run(["verify", "--device", "emu", "--shapes", "8x64", "--dtype", "f32",
                                         "--backend", "flydsl"], tmp_path)
    assert _close(estimate, actual), text


def test_perf_prints_an_estimate_of_its_wall_time(tmp_path):
    estimate, actual, text = _timed_run(["perf", "--device", "cpu", "--shapes", "64x256", "--op", "fwd", "--mode",
                                         "hot", "-P", "2", "-R", "3"], tmp_path)
    assert _close(estimate, actual), text


def test_emulated_perf_prints_an_estimate_of_its_wall_time(tmp_path):
    estimate, actual, text = _timed_run(["perf", "--device", "emu", "--shapes", "64x256", "--op", "fwd", "--no-csv"],
                                        tmp_path)
    assert _close(estimate, actual), text


def test_busy_threads_counts_running_tasks_less_lnbench_and_its_own_workers(monkeypatch):
    import builtins
    import io

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)
        assert eta._running(busy.pid) and not eta._running(idle.pid)
    finally:
        busy.kill(), idle.kill()
        busy.wait(), idle.wait()
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO("cpu 1 2\nprocs_running 9\n")
                        if path == "/proc/stat" else real_open(path, *a, **k))
    monkeypatch.setattr(eta, "_running", lambda pid: pid == 101)
    assert eta.busy_threads(samples=2, interval_s=0) == 8            # 9 running, one of them lnbench itself
    assert eta.busy_threads([101, 102], samples=2, interval_s=0) == 7  # and one of its early workers


def test_a_one_job_emulated_perf_run_pays_no_worker_start():
    """One job runs in lnbench's own process (imports done before the estimate prints): a 64x256 forward took
    0.8-0.9 s after its estimate line, two spawned workers 2.6-2.8 s; a 2 s start for both made the first ~2 s."""
    from lnbench.perf.estimate import ModelledEstimate

    one = ModelledEstimate([("fwd", 64, 256)], 1, others=0, cpus=2)
    two = ModelledEstimate([("fwd", 64, 256), ("fwd", 64, 512)], 2, others=0, cpus=2)
    assert one.wall_s < 1.0 and 2.5 < two.wall_s < 3.5, (one.wall_s, two.wall_s)
