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
    for start in range(0, 200, 10):
        calibration.record({"s": [{"s": float(i)} for i in range(start, start + 10)]}, path=path, machine="m")
    kept = [o["s"] for o in calibration.load(path, machine="m").get("s")]
    assert kept == [float(i) for i in range(200 - calibration.KEEP, 200)]


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
