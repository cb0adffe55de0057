"""lnbench.run.calibration and lnbench.flydsl.compile_log: the fit of a model's constants to observations, this
process's start, which compiles FlyDSL's disk cache had and which kernels a later run will find there. Times are
injected: nothing here measures this machine."""
from __future__ import annotations

import builtins
import io
import os

import pytest

from lnbench.run import calibration
from lnbench.run.calibration import Calibration, fit


def test_the_fit_recovers_a_fixed_part_and_a_slope_from_units_of_several_sizes():
    sizes = [512, 64_000, 1 << 20, 8 << 20, 32 << 20]
    seconds = [0.2 + 3e-7 * x for x in sizes]
    assert fit([[1.0, x] for x in sizes], seconds, (0.06, 5e-7)) == pytest.approx([0.2, 3e-7], rel=1e-9)


def test_one_size_only_scales_the_first_guess_to_the_observed_total():
    seconds = [2.0, 2.2, 1.8]
    fixed, per = fit([[1.0, 1 << 20]] * 3, seconds, (0.06, 5e-7))
    assert per / fixed == pytest.approx(5e-7 / 0.06)                        # the first guess's shape
    assert 3 * (fixed + per * (1 << 20)) == pytest.approx(sum(seconds))     # the observed level


def test_a_unit_far_off_the_others_is_left_out():
    """A worker's first unit with the process's start-up in it: out of the fit and of its level."""
    sizes = [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24] * 2
    seconds = [0.1 + 1e-7 * x for x in sizes]
    seconds[0] += 30.0
    assert fit([[1.0, x] for x in sizes], seconds, (0.06, 5e-7)) == pytest.approx([0.1, 1e-7], rel=1e-6)


def test_a_fit_with_a_negative_part_keeps_the_first_guess_shape():
    sizes = [1 << 10, 1 << 20, 1 << 24]
    seconds = [0.001, 0.5, 16.0]                         # a straight line through them starts below zero
    fixed, per = fit([[1.0, x] for x in sizes], seconds, (0.06, 5e-7))
    assert fixed > 0 and per > 0


def test_no_usable_observation_is_the_first_guess():
    assert fit([], [], (0.06, 5e-7)) == [0.06, 5e-7]
    assert fit([[1.0, 10.0]], [0.0], (0.06, 5e-7)) == [0.06, 5e-7]


def test_series_statistics_and_the_first_guess_without_them():
    recorded = Calibration({"a": [{"s": 1.0, "m": 2.0}, {"s": 3.0, "m": 2.0}, {"s": 2.0}], "b": [{"s": 4.0, "x": 8}]})
    assert recorded.median("a", 9.0) == 2.0 and recorded.median("missing", 9.0) == 9.0
    assert recorded.ratio("a") == 1.0 and recorded.ratio("b", 0.5) == 0.5
    assert recorded.linear("b", (1.0, 1.0)) == pytest.approx((4.0 / 9, 4.0 / 9))   # one point: the prior, scaled
    assert recorded.linear("missing", (1.0, 2.0)) == (1.0, 2.0)


def test_the_observations_kept_are_the_newest(tmp_path):
    path = tmp_path / "c.json"
    total = calibration.KEEP // 50 * 50 + 100                            # more than KEEP, in runs of 50
    for start in range(0, total, 50):
        calibration.record({"s": [{"s": float(i)} for i in range(start, start + 50)]}, path=path, machine="m")
    kept = [o["s"] for o in calibration.load(path, machine="m").get("s")]
    assert kept == [float(i) for i in range(total - calibration.KEEP, total)]


def test_each_machine_keeps_its_own(tmp_path):
    path = tmp_path / "c.json"
    calibration.record({"s": [{"s": 1.0}]}, path=path, machine="one")
    calibration.record({"s": [{"s": 2.0}]}, path=path, machine="two")
    assert calibration.load(path, machine="one").get("s") == [{"s": 1.0}]
    assert calibration.load(path, machine="two").get("s") == [{"s": 2.0}]
    assert calibration.load(path, machine="three") == Calibration()


def test_calibration_off_reads_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.ENV, "off")
    assert calibration.default_path() is None and calibration.record({"s": [{"s": 1.0}]}) is False
    monkeypatch.setenv(calibration.ENV, "")
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path))
    assert calibration.default_path() == tmp_path / "calibration.json"


def test_process_age_is_the_uptime_less_the_process_start(monkeypatch):
    real_open = builtins.open
    stat = "4242 (py thon) S " + " ".join(["0"] * 18) + " 1500 0 0"      # field 22: started at 1500 ticks
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(
        stat if path == "/proc/self/stat" else "20.5 10.0\n" if path == "/proc/uptime" else real_open(path, *a, **k)))
    assert calibration.process_age_s() == pytest.approx(20.5 - 1500 / os.sysconf("SC_CLK_TCK"))
    monkeypatch.setattr(builtins, "open", lambda *a, **k: (_ for _ in ()).throw(OSError("no /proc")))
    assert calibration.process_age_s() is None


# ---------------------------------------------------------------- FlyDSL compiles, cold and cached

def test_a_compile_that_adds_a_kernel_to_the_disk_cache_is_cold(tmp_path, monkeypatch):
    from lnbench.flydsl import compile_log
    from lnbench.flydsl.guard import guarded_compile
    from lnbench.flydsl.toolkit import FLYDSL_CACHE_VAR

    cache = tmp_path / "cache"
    monkeypatch.setenv(FLYDSL_CACHE_VAR, str(cache))
    monkeypatch.setattr(compile_log, "COMPILES", [])

    def compile_into_cache(key: str) -> str:
        (cache / "launch").mkdir(parents=True, exist_ok=True)
        (cache / "launch" / f"{key}.pkl").write_bytes(b"kernel")
        (cache / "launch" / f"{key}.lock").write_bytes(b"")
        return key

    assert guarded_compile(compile_into_cache, "a") == "a" and compile_log.cache_files() == 1
    guarded_compile(compile_into_cache, "a")             # FlyDSL found it: nothing added
    guarded_compile(compile_into_cache, "b")
    assert [cold for _, cold in compile_log.COMPILES] == [True, False, True]
    seconds, count, cold = compile_log.since(1)
    assert (count, cold) == (2, 1) and seconds >= 0


def test_a_launcher_s_compile_counts_only_its_own_folder_of_the_cache(tmp_path, monkeypatch):
    """FlyDSL keeps a @flyc.jit launcher's kernels in the cache folder named after its function: guarded_compile
    counts that folder alone (a kernel another launcher's folder gains meanwhile does not make it cold)."""
    from lnbench.flydsl import compile_log
    from lnbench.flydsl.guard import guarded_compile
    from lnbench.flydsl.toolkit import FLYDSL_CACHE_VAR

    cache = tmp_path / "cache"
    monkeypatch.setenv(FLYDSL_CACHE_VAR, str(cache))
    monkeypatch.setattr(compile_log, "COMPILES", [])

    def launch_rows() -> None:
        """a launcher's Python function"""

    class Launcher:                          # what @flyc.jit gives: the function as `func`
        func = launch_rows

    def compile_into(launcher: Launcher, own: str, other: str) -> None:
        for folder, key in (("launch_rows", own), ("launch_other", other)):
            (cache / folder).mkdir(parents=True, exist_ok=True)
            if key:
                (cache / folder / f"{key}.pkl").write_bytes(b"kernel")

    assert compile_log.launcher_folder(Launcher()) == cache / "launch_rows"
    assert compile_log.launcher_folder(object()) is None
    guarded_compile(compile_into, Launcher(), "k1", "")
    guarded_compile(compile_into, Launcher(), "k1", "x1")       # only the other launcher's folder gained one
    guarded_compile(compile_into, Launcher(), "k2", "")
    assert [cold for _, cold in compile_log.COMPILES] == [True, False, True]


def test_kernels_compiled_before_are_cached_while_the_cache_keeps_its_files(tmp_path, monkeypatch):
    """The kernels a run compiled are warm for the next estimate while the cache holds at least as many files;
    an emptied cache, another FlyDSL or changed kernels (another identity) have none."""
    from lnbench.flydsl import compile_log
    from lnbench.flydsl.toolkit import FLYDSL_CACHE_VAR

    cache = tmp_path / "cache"
    monkeypatch.setenv(FLYDSL_CACHE_VAR, str(cache))
    (cache / "launch").mkdir(parents=True)
    for key in "abc":
        (cache / "launch" / f"{key}.pkl").write_bytes(b"")
    path, identity = tmp_path / "c.json", compile_log.cache_identity()
    assert str(cache) in identity
    calibration.record({}, {identity: {"files": compile_log.cache_files(), "keys": ["k1", "k2"]}}, path=path,
                       machine="m")
    recorded = calibration.load(path, machine="m")
    assert recorded.warm(identity, compile_log.cache_files()) == {"k1", "k2"}
    assert recorded.warm(identity + " other", 3) == set()
    (cache / "launch" / "a.pkl").unlink()
    assert recorded.warm(identity, compile_log.cache_files()) == set()
    calibration.record({}, {identity: {"files": 2, "keys": ["k3"]}}, path=path, machine="m")   # refilled: k3 only
    assert calibration.load(path, machine="m").warm(identity, 2) == {"k3"}


def test_a_corrupt_entry_of_compiled_kernels_is_replaced(tmp_path):
    import json

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": "lnbench-calibration", "version": 1, "machines": {"m": {
        "series": {"s": "none"}, "compiled": {"cache": {"files": "x", "keys": "abc"}, "other": 5}}}}))
    assert calibration.load(path, machine="m").warm("cache", 3) == set()
    assert calibration.record({"s": [{"s": 1.0}]}, {"cache": {"files": 3, "keys": ["k"]}}, path=path, machine="m")
    recorded = calibration.load(path, machine="m")
    assert recorded.warm("cache", 3) == {"k"} and recorded.get("s") == [{"s": 1.0}]


def test_a_cost_the_free_fit_makes_negative_is_held_at_zero_and_the_others_refitted():
    """A 16-core host's perf set-ups (H200 machine, December 2026): hot cases of 1 set took 0.08-0.1 s, cold
    1024x1024 cases of 24 rotated sets (0.1 GB) 2.6-3.6 s. A free fit made the fixed and per-GB parts negative and
    was refused; the first guess scaled to the hot majority priced a cold set-up at 0.26 s. Now: per set only."""
    rows = [((1.0, 6.7e-5, 1.0), s) for s in (0.078, 0.084, 0.095, 0.102)]
    rows += [((1.0, 0.0042, 1.0), s) for s in (0.077, 0.08, 0.105, 0.088)]
    rows += [((1.0, 0.1007, 24.0), s) for s in (2.889, 3.077, 3.6, 2.593)]
    fixed, per_gb, per_set = calibration.fit([f for f, _ in rows], [s for _, s in rows], (0.15, 3.0, 2.5e-4))
    assert fixed == 0.0 and per_gb == 0.0
    assert 2.5 <= fixed + 0.1007 * per_gb + 24 * per_set <= 3.5


# ---------------------------------------------------------------- issue 57: one writer at a time, nothing lost

WRITER = """
import sys
from pathlib import Path
from lnbench.run import calibration
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(count):
    assert calibration.record({f"{name}.{i}": [{"s": float(i)}]}, path=path, machine="m")
"""


def test_two_processes_recording_at_once_lose_nothing(tmp_path):
    """Two real processes each add 40 series, one record at a time, to one file: every series of both is there
    (read, merge and write hold the file's lock; a record without it lost the other's series between its read
    and its write)."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "calibration.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, "40"], env=env,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    series = calibration.load(path, machine="m").series
    assert set(series) == {f"{name}.{i}" for name in ("a", "b") for i in range(40)}
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]          # whole files, renamed


def test_a_record_that_cannot_get_the_lock_gives_up_and_writes_nothing(tmp_path, monkeypatch):
    """Another holder of the lock past LOCK_WAIT_S: the record is False, the file as it was (a clock injected:
    the wait ends at once)."""
    import fcntl

    path = tmp_path / "calibration.json"
    assert calibration.record({"s": [{"s": 1.0}]}, path=path, machine="m")
    before = path.read_text()
    monkeypatch.setattr(calibration, "LOCK_WAIT_S", 0.0)
    with open(tmp_path / ".calibration.json.lock", "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert calibration.record({"s": [{"s": 2.0}]}, path=path, machine="m") is False
        ticks = iter([0.0, 0.0, 5.0])
        with pytest.raises(BlockingIOError):
            with calibration.locked(path, wait_s=1.0, clock=lambda: next(ticks)):
                pass
    assert path.read_text() == before
    assert calibration.record({"s": [{"s": 2.0}]}, path=path, machine="m")            # released: it records
    assert calibration.load(path, machine="m").get("s") == [{"s": 1.0}, {"s": 2.0}]


# ---------------------------------------------------------------- issue 57: the up-front estimate

def test_a_kind_never_run_here_gets_a_range_that_widens_with_the_compiles_pending():
    from lnbench.run import upfront

    key = upfront.run_key("perf", ["torch", "liger"], "NVIDIA H100", "medium")
    assert key == "perf|liger,torch|NVIDIA H100|medium"
    fresh = upfront.estimate(key, 30.0, (), Calibration())
    assert fresh.point_s is None and fresh.fresh
    assert fresh.low_s == pytest.approx(30.0 * upfront.RANGE_LOW)
    assert fresh.high_s == pytest.approx(30.0 * upfront.RANGE_HIGH + upfront.FRESH_S)
    cold = upfront.estimate(key, 30.0, ("Triton (Liger)",), Calibration())
    assert cold.high_s == pytest.approx(fresh.high_s + upfront.PENDING_S["Triton (Liger)"])
    line = cold.line("3 workers, 16 cases", 1.0, 16)                   # 6 s – 155 s
    assert line.startswith("estimated time: first run here: 6 s – 3 min (compiles pending: Triton (Liger); ")
    assert _kept(cold) == {"estimate_s": pytest.approx((6.0 * cold.high_s) ** 0.5, abs=0.01),
                             "estimate_range": "6 s – 3 min"}
    known = Calibration({"perf.call@NVIDIA H100": [{"s": 1e-5}]})       # perf has run on this device: not fresh
    assert upfront.estimate(key, 30.0, (), known).high_s == pytest.approx(30.0 * upfront.RANGE_HIGH)


def _kept(ahead, actual_s=None) -> dict:
    """What Upfront.keep sets on a perf run record: its estimate columns that are set."""
    from lnbench.results.runs import PerfRun

    run = PerfRun()
    ahead.keep(run, actual_s)
    return {name: run.value(name) for name in ("estimate_s", "estimate_range", "actual_s") if run.has(name)}


def test_earlier_runs_of_the_kind_in_the_same_cache_state_make_a_point(tmp_path, monkeypatch):
    """The issue's H100 perf: the model said 32-38 s, the runs took 42-54 s (1.2-1.5× short every time). Recorded,
    the next estimate is the model times the median of actual/model of the newest HISTORY warm runs; a cold run
    (compiles pending) does not count for a warm one, nor a warm one for a cold one."""
    from lnbench.run import upfront

    monkeypatch.setenv("LNBENCH_CALIBRATION", str(tmp_path / "c.json"))
    key = upfront.run_key("perf", ["torch", "liger"], "NVIDIA H100", "medium")
    cold_run = upfront.estimate(key, 24.0, ("Triton (Liger)",))
    assert upfront.record_run(cold_run, 48.5)
    for model, actual in ((32.0, 42.0), (38.0, 54.0), (35.0, 47.0)):
        assert upfront.record_run(upfront.estimate(key, model, ()), actual)
    warm = upfront.estimate(key, 36.0, ())
    ratios = sorted(a / m for m, a in ((32.0, 42.0), (38.0, 54.0), (35.0, 47.0)))
    assert warm.point_s == pytest.approx(36.0 * ratios[1]) and warm.runs == 3 and warm.ratio == pytest.approx(ratios[1])
    assert warm.line("3 workers, 16 cases", 0.0, 16).startswith("estimated time: ~48 s (from 3 earlier runs here; ")
    assert _kept(warm, 47.26) == {"estimate_s": pytest.approx(warm.point_s, abs=0.01), "estimate_range": "",
                                 "actual_s": 47.26}
    cold = upfront.estimate(key, 24.0, ("Triton (Liger)",))
    assert cold.point_s == pytest.approx(48.5) and cold.runs == 1
    other_size = upfront.estimate(upfront.run_key("perf", ["torch", "liger"], "NVIDIA H100", "small"), 10.0, ())
    assert other_size.point_s is None and not other_size.fresh                        # a range, not a first run
    monkeypatch.setenv("LNBENCH_CALIBRATION", "off")
    assert upfront.record_run(warm, 40.0) is False


def test_size_classes_and_the_compile_caches_looked_at(tmp_path, monkeypatch):
    from lnbench.run import upfront

    assert [upfront.size_class([e]) for e in (64 * 256, 1 << 20, 4096 * 4096, 8192 * 8192)] == [
        "tiny", "small", "medium", "large"]
    assert upfront.size_class([64 * 256, 8192 * 8192]) == "large" and upfront.size_class([]) == "tiny"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    everything = ["torch", "liger", "compile", "flydsl"]
    assert upfront.pending_compiles(everything, True, False, True) == (
        "Triton (Liger)", "Inductor (torch.compile)", "FlyDSL")
    assert upfront.pending_compiles(everything, False, True, False) == (
        "Inductor (torch.compile)", "emulator build (zig)")                 # no Liger off a GPU
    (tmp_path / "triton" / "ab12").mkdir(parents=True)
    (tmp_path / "triton" / "ab12" / "_layer_norm_forward_kernel.cubin").write_bytes(b"")
    (tmp_path / "inductor" / "fx").mkdir(parents=True)
    (tmp_path / "inductor" / "fx" / "graph").write_bytes(b"")
    (tmp_path / "xdg" / "lnbench" / "emu" / "0123").mkdir(parents=True)
    (tmp_path / "xdg" / "lnbench" / "emu" / "0123" / "libamdhip64.so.7").write_bytes(b"")
    assert upfront.pending_compiles(everything, True, True, False) == ()


def test_the_shape_fit_follows_units_that_grow_more_slowly_than_their_elements():
    """Emulated units of 16 elements to 1 M (issue 57's cause 1): seconds 0.08 + 4e-4·√x, ±10%, are fitted
    within 1.25× at every size by the (1, √x, x) shape, where a fixed part and a part per element (the line of
    before) misses some size by 1.44×; two sizes alone fit two of the columns (the subsets)."""
    import math
    import random

    from lnbench.run.calibration import Calibration

    rng = random.Random(57)
    sizes = [16, 771, 1024, 16384, 74000, 1 << 20]
    truth = {x: 0.08 + 4e-4 * math.sqrt(x) for x in sizes}
    observed = [{"x": x, "s": truth[x] * rng.uniform(0.9, 1.1)} for x in sizes for _ in range(6)]
    cal = Calibration({"verify.emulated@emu": observed})
    fixed, root, per = cal.shape(["verify.emulated@emu"], (0.06, 0.0, 5e-7))
    assert all(1 / 1.25 <= (fixed + root * math.sqrt(x) + per * x) / truth[x] <= 1.25 for x in sizes)
    line_fixed, line_per = cal.linear("verify.emulated@emu", (0.06, 5e-7))
    assert max(max(r, 1 / r) for r in ((line_fixed + line_per * x) / truth[x] for x in sizes)) > 1.4
    two = Calibration({"s": [o for o in observed if o["x"] in (16384, 1 << 20)]})
    fixed, root, per = two.shape(["s"], (0.06, 0.0, 5e-7))
    assert all(1 / 1.25 <= (fixed + root * math.sqrt(x) + per * x) / truth[x] <= 1.25 for x in (16384, 1 << 20))
