"""A busy machine is seen and recorded: the load average against the cores, other lnbench timing runs (lock
files), perf's and peak's `--if-loaded warn|refuse`, compare's warning; and peak's size rule and history."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner

from lnbench.compare.command import compare_command
from lnbench.errors import LnbenchUsageError
from lnbench.run.metadata import device_name
from lnbench.measure import load
from lnbench.perf import peak, workloads
from lnbench.perf.command import peak_command, perf_command
from cli_helpers import ONE_THREAD as ENV, error_line, timing

TINY = ["--device", "cpu", "--dtype", "f32", "--backend", "torch", "--op", "fwd", "--mode", "hot", "--shapes", "4x64",
        "-P", "2", *timing(), "-q"]
MIB = 1 << 20


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))


def _quiet_machine(monkeypatch, load_avg: float = 0.5, cpus: int = 4) -> None:
    monkeypatch.setattr(load, "load_average", lambda: load_avg)
    monkeypatch.setattr(load, "cpus_available", lambda: cpus)


def test_a_live_lock_of_another_process_is_seen_and_a_stale_one_removed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from lnbench.measure.load import TimingLock\n"
        f"with TimingLock('perf', {str(tmp_path)!r}):\n    print('held', flush=True); time.sleep(3600)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        stale = tmp_path / "999999-dead.lock"
        stale.write_text(json.dumps({"pid": 999999, "command": "perf"}))      # nobody holds it
        with load.TimingLock("peak", tmp_path) as mine:
            assert mine.path is not None and mine.path.exists()
            assert mine.others() == [f"pid {holder.pid} (perf)"]
            assert not stale.exists()
        assert mine.path is None and len(list(tmp_path.glob("*.lock"))) == 1    # ours gone, the holder's kept
    finally:
        holder.kill()
        holder.wait()
    with load.TimingLock("perf", tmp_path) as mine:
        assert mine.others() == []                                             # the dead holder's file is stale


def test_problems_name_the_load_and_the_other_runs():
    assert load.LoadCheck(1.5, 2, ()).problems() == []
    busy = load.LoadCheck(7.25, 2, ("pid 12 (perf)",))
    assert busy.problems() == ["load average 7.25 above the 2 core(s) lnbench may use",
                               "1 other lnbench timing run(s): pid 12 (perf)"]
    meta = load.metadata(load.LoadCheck(0.5, 2, ()), busy)
    assert meta.load_before == 0.5 and meta.load_after == 7.25 and meta.other_timing_runs == 1
    assert "load average 7.25" in meta.load_flag and "busy machine" in load.warning(meta.load_flag)
    assert load.warning(load.metadata(load.LoadCheck(None, 2, ()), load.LoadCheck(None, 2, ())).load_flag) == ""
    with pytest.raises(LnbenchUsageError, match="timing refused"):
        load.refuse_if_loaded(busy, load.REFUSE)
    load.refuse_if_loaded(busy, load.WARN)


def test_perf_refuses_a_busy_machine_before_timing(tmp_path, monkeypatch):
    _quiet_machine(monkeypatch, load_avg=9.0, cpus=2)
    result = CliRunner().invoke(perf_command, [*TINY, "--if-loaded", "refuse", "--json", str(tmp_path / "p.json")],
                                env=ENV)
    error_line(result, "load average 9.00 above the 2 core(s)", "timing refused")
    assert not (tmp_path / "p.json").exists()


def test_perf_records_the_load_and_flags_a_busy_run(tmp_path, monkeypatch):
    _quiet_machine(monkeypatch)
    quiet = CliRunner().invoke(perf_command, [*TINY, "--json", str(tmp_path / "quiet.json")], env=ENV)
    assert quiet.exit_code == 0, quiet.output
    meta = json.loads((tmp_path / "quiet.json").read_text())["metadata"]
    assert meta["load_before"] == 0.5 and meta["cpus_available"] == 4 and meta["load_flag"] == ""
    assert "busy machine" not in quiet.output
    _quiet_machine(monkeypatch, load_avg=9.0, cpus=2)
    busy = CliRunner().invoke(perf_command, [*TINY, "--json", str(tmp_path / "busy.json")], env=ENV)
    assert busy.exit_code == 0, busy.output
    meta = json.loads((tmp_path / "busy.json").read_text())["metadata"]
    assert meta["load_flag"].startswith("load average 9.00 above the 2 core(s)")
    assert "lnbench: warning: timed on a busy machine" in busy.output
    compared = CliRunner().invoke(compare_command, [str(tmp_path / "quiet.json"), str(tmp_path / "busy.json"),
                                                    "--csv", str(tmp_path / "c.csv")])
    assert compared.exit_code == 0, compared.output
    assert "warning: NEW was timed on a busy machine" in compared.output and "BASE was timed" not in compared.output


def test_a_bad_if_loaded_setting_is_one_line(tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text('[perf]\nif_loaded = "ignore"\n')
    result = CliRunner().invoke(perf_command, [*TINY, "--config", str(config)], env=ENV)
    assert result.exit_code == 2 and "if_loaded must be one of warn, refuse, got 'ignore'" in result.output


# --- peak ---------------------------------------------------------------------------------------------------------

def test_the_default_copy_follows_the_last_level_cache(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(workloads, "free_memory", lambda device: 64 << 30)
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (32 * MIB, "test"))
    assert peak.copy_size(cpu, None) == 256 * MIB                          # the default already dwarfs it
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (480 * MIB, "test"))
    assert peak.copy_size(cpu, None) == 960 * MIB                          # raised: 2 × 960 ≥ 4 × 480
    with pytest.raises(LnbenchUsageError, match="use at least 960 MiB"):
        peak.copy_size(cpu, 256.0)                                           # the same rule for --size-mib
    assert peak.copy_size(cpu, 960.0) == 960 * MIB
    monkeypatch.setattr(workloads, "free_memory", lambda device: 1 << 30)
    with pytest.raises(LnbenchUsageError, match=r"the default copy \(960 MiB.*a copy needs 1920 MiB"):
        peak.copy_size(cpu, None)


def _record(gbps_runs: list[float], stamp: str) -> dict:
    nbytes = 2 * MIB
    runs_us = [nbytes / (g * 1e9) * 1e6 for g in gbps_runs]
    median = sorted(gbps_runs)[len(gbps_runs) // 2]
    return {"gbps": median, "bytes": nbytes, "runs_us": runs_us, "timestamp": stamp}


def test_a_change_beyond_the_noise_is_reported_and_history_kept(tmp_path):
    cpu, path = torch.device("cpu"), tmp_path / "peak.json"
    _, change = peak.store_peak(cpu, _record([24.0, 24.1, 24.3], "t1"), path)
    assert change == ""
    _, change = peak.store_peak(cpu, _record([23.8, 24.2, 24.5], "t2"), path)   # overlapping runs: noise
    assert change == ""
    _, change = peak.store_peak(cpu, _record([11.0, 11.2, 11.3], "t3"), path)
    assert "changed beyond the noise: 24.2 GB/s" in change and "→ 11.2 GB/s" in change and "-53.7%" in change
    entry = json.loads(path.read_text())[device_name(cpu)]
    assert entry["timestamp"] == "t3" and [h["timestamp"] for h in entry["history"]] == ["t1", "t2"]
    assert all("history" not in h for h in entry["history"])
    loaded = peak.load_peak(cpu, path)
    assert loaded["gbps"] == pytest.approx(11.2) and "history" not in loaded


@pytest.mark.parametrize("gbps", ["-5", "0", "NaN", "Infinity", "true"])
def test_a_hand_edited_peak_that_is_no_bandwidth_is_no_peak(tmp_path, gbps):
    """% peak divides by the cached gbps: a negative, zero, NaN, infinite or boolean one (hand-edited) gave
    -1.4 % peak or blank cells; it counts as no measured peak (perf says to run `lnbench peak`)."""
    cpu, path = torch.device("cpu"), tmp_path / "peak.json"
    path.write_text(f'{{"{device_name(cpu)}": {{"gbps": {gbps}}}}}')
    assert peak.load_peak(cpu, path) is None
    path.write_text(f'{{"{device_name(cpu)}": {{"gbps": 24.5}}}}')
    assert peak.load_peak(cpu, path)["gbps"] == 24.5


def test_peak_twice_keeps_the_first_in_the_history(tmp_path, monkeypatch):
    _quiet_machine(monkeypatch)
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (MIB // 2, "test"))
    path = tmp_path / "peak.json"
    for _ in range(2):
        result = CliRunner().invoke(peak_command, ["--device", "cpu", "--size-mib", "2", "--runs", "3",
                                                   "--peak-file", str(path)])
        assert result.exit_code == 0, result.output
    entry = json.loads(path.read_text())[device_name(torch.device("cpu"))]
    assert len(entry["history"]) == 1 and entry["history"][0]["timestamp"] <= entry["timestamp"]
    assert entry["load_before"] == 0.5 and entry["load_flag"] == ""


def test_peak_refused_on_a_busy_machine_lets_its_timing_lock_go(tmp_path, monkeypatch):
    """peak's run step releases the host's timing lock when the load policy refuses (before, the refusal left
    it held until the process ended, so the other timing runs of a long-lived process saw a phantom peak)."""
    _quiet_machine(monkeypatch, load_avg=9.0, cpus=2)
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (MIB // 2, "test"))
    monkeypatch.setenv("LNBENCH_LOCK_DIR", str(tmp_path / "locks"))
    path = tmp_path / "peak.json"
    result = CliRunner().invoke(peak_command, ["--device", "cpu", "--size-mib", "2", "--runs", "2",
                                               "--if-loaded", "refuse", "--peak-file", str(path)])
    assert result.exit_code == 2 and "timing refused" in result.output, result.output
    assert not path.exists() and list((tmp_path / "locks").glob("*.lock")) == []


def test_nothing_timed_gives_no_busy_machine_warning(tmp_path, monkeypatch):
    """perf with nothing runnable (FlyDSL kernels on the CPU) warned "timed on a busy machine" though nothing was
    timed; the run that times on the same busy machine still warns."""
    _quiet_machine(monkeypatch, load_avg=9.0, cpus=2)
    untimed = [*TINY[:TINY.index("--backend")], "--backend", "flydsl", *TINY[TINY.index("--backend") + 2:]]
    result = CliRunner().invoke(perf_command, [*untimed, "--json", str(tmp_path / "none.json")], env=ENV)
    assert result.exit_code == 1 and "nothing could run here" in result.output, result.output
    assert "busy machine" not in result.output
    timed = CliRunner().invoke(perf_command, [*TINY, "--json", str(tmp_path / "busy.json")], env=ENV)
    assert timed.exit_code == 0 and "lnbench: warning: timed on a busy machine" in timed.output, timed.output
