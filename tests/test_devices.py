"""`--devices`: GPU parsing and visibility (lnbench.run.gpus), the scheduler (every GPU at once, host-bound cases
timed alone under the host lock: lnbench.measure.host_lock),
and perf / verify spread over several "GPUs" on the CPU. The stand-in GPUs are CPU slots whose worker
environment carries a marker instead of CUDA_VISIBLE_DEVICES; the real two-GPU run is
test_two_gpus_on_this_host (skipped without two GPUs)."""
from __future__ import annotations

import threading

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from cli_helpers import ABI_TIMING, ONE_THREAD, error_line, invoke, timing
from lnbench.run import gpus
from lnbench.errors import LnbenchUsageError
from lnbench.run.gpus import GpuSlot, deal, parse_devices, run_spread
from lnbench.perf.cases import build_cases
from lnbench.perf.spread import group_spec, host_bound, plan_groups

H200 = [GpuSlot(i, "NVIDIA H200", "CUDA_VISIBLE_DEVICES", str(i)) for i in range(3)]


def cpu_slots(count: int, variable: str = "LNBENCH_TEST_GPU", values: list[str] | None = None) -> list[GpuSlot]:
    """Stand-in GPUs: CPU workers, each with its own value of `variable`."""
    return [GpuSlot(i, "stand-in", variable, (values or [str(i)] * count)[i], device="cpu", worker_device="cpu")
            for i in range(count)]


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))


@pytest.mark.parametrize("text, chosen", [("all", [0, 1, 2]), ("1", [1]), ("cuda:2,0", [2, 0]), (" 0 , cuda:1 ", [0, 1])])
def test_parse_devices_picks_the_listed_gpus(text, chosen):
    assert [s.index for s in parse_devices(text, gpus=H200)] == chosen


@pytest.mark.parametrize("text, fragment", [
    ("cuda:9", "cuda:9 does not exist; torch sees 3 GPU(s) (cuda:0..cuda:2)"), ("0,cuda:0", "listed twice"),
    ("rocm:1", "is not a GPU"), (",", "needs a list"), ("gpu0", "is not a GPU"),
])
def test_parse_devices_refuses_bad_lists(text, fragment):
    with pytest.raises(LnbenchUsageError) as info:
        parse_devices(text, gpus=H200)
    assert fragment in str(info.value)


def test_parse_devices_without_gpus_and_with_mixed_models():
    with pytest.raises(LnbenchUsageError, match="torch sees no GPU here"):
        parse_devices("all", gpus=[])
    mixed = [H200[0], GpuSlot(1, "NVIDIA A100", "CUDA_VISIBLE_DEVICES", "1")]
    with pytest.raises(LnbenchUsageError, match=r"mixes GPU models \(NVIDIA A100 ×1, NVIDIA H200 ×1\).*--force"):
        parse_devices("all", gpus=mixed)
    assert len(parse_devices("all", force=True, gpus=mixed)) == 2
    assert parse_devices(None, gpus=H200) is None


@pytest.mark.parametrize("environ, hip, expected", [
    ({}, False, ("CUDA_VISIBLE_DEVICES", None, ())),
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, False, ("CUDA_VISIBLE_DEVICES", ["2", "3"], ())),
    ({"CUDA_VISIBLE_DEVICES": "GPU-a, GPU-b"}, False, ("CUDA_VISIBLE_DEVICES", ["GPU-a", "GPU-b"], ())),
    ({"CUDA_VISIBLE_DEVICES": "5,6"}, True, ("HIP_VISIBLE_DEVICES", ["5", "6"], ("CUDA_VISIBLE_DEVICES",))),
    ({"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1"}, True,
     ("HIP_VISIBLE_DEVICES", ["1"], ("CUDA_VISIBLE_DEVICES",))),
])
def test_a_worker_sees_only_its_gpu_in_the_parents_numbering(environ, hip, expected):
    assert gpus._visibility(environ, hip) == expected


def test_host_gpus_maps_torch_numbering_to_the_parents_visible_list(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: object())     # no PCI ids: not pinned
    monkeypatch.setattr(torch.version, "hip", None)
    slots = gpus.host_gpus({"CUDA_VISIBLE_DEVICES": "4,7"})
    assert [(s.label, s.env()) for s in slots] == [("cuda:0", {"CUDA_VISIBLE_DEVICES": "4"}),
                                                   ("cuda:1", {"CUDA_VISIBLE_DEVICES": "7"})]
    monkeypatch.setattr(torch.version, "hip", "6.2")
    rocm = gpus.host_gpus({"CUDA_VISIBLE_DEVICES": "4,7"})
    assert rocm[1].env() == {"HIP_VISIBLE_DEVICES": "7", "CUDA_VISIBLE_DEVICES": None}


def test_child_environment_unsets_a_none_variable(monkeypatch):
    from lnbench.run.processes import child_environment

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    env = child_environment(H200[1].env() | {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": None})
    assert "CUDA_VISIBLE_DEVICES" not in env and env["HIP_VISIBLE_DEVICES"] == "1"


def test_deal_is_balanced_disjoint_and_complete():
    for count in range(1, 6):
        for size in range(0, 23):
            parts = deal(list(range(size)), count)
            assert sorted(x for p in parts for x in p) == list(range(size))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_deal_keeps_families_together():
    items = [(shape, mode) for shape in "abcde" for mode in ("cold", "hot")]
    parts = deal(items, 2, family=lambda item: item[0])
    assert [sorted({s for s, _ in part}) for part in parts] == [["a", "c", "e"], ["b", "d"]]
    assert sorted(x for part in parts for x in part) == sorted(items)


def test_a_gpus_workers_run_on_the_cpus_of_its_numa_node(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    from types import SimpleNamespace

    from lnbench.run.processes import CPU_AFFINITY_VAR, child_environment, parse_cpu_list

    assert parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11} and parse_cpu_list("x-1") == set()
    node = tmp_path / "0000:1b:00.0"
    node.mkdir()
    cpu = min(os.sched_getaffinity(0))                   # a CPU this test may run on, whatever the host allows
    node.joinpath("local_cpulist").write_text(f"{cpu}\n")
    props = SimpleNamespace(pci_bus_id=0x1B, pci_device_id=0, pci_domain_id=0)
    many = len(os.sched_getaffinity(0)) > 1
    assert gpus.local_cpus(props, tmp_path) == (str(cpu) if many else "")  # all CPUs: nothing to pin
    assert gpus.local_cpus(SimpleNamespace(), tmp_path) == ""                # torch without PCI ids
    assert gpus.local_cpus(SimpleNamespace(pci_bus_id=2), tmp_path) == ""    # no such sysfs entry
    slot = GpuSlot(1, "NVIDIA H200", "CUDA_VISIBLE_DEVICES", "1", cpus=str(cpu))
    assert slot.env()[CPU_AFFINITY_VAR] == str(cpu) and CPU_AFFINITY_VAR not in H200[0].env()
    code = ("import os; from lnbench.run.processes import pin_to_gpu_cpus; pin_to_gpu_cpus(); "
            "print(sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], env=child_environment(slot.env()), capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == f"[{cpu}]"


def test_run_spread_runs_every_gpu_at_once():
    """Each GPU's run waits until every GPU with cases runs: only runs started side by side get past it (runs one
    after another would leave the first waiting; the timeout only ends a test that would hang, as an error)."""
    together = threading.Barrier(2, timeout=120)

    def run(slot, items, stop):
        together.wait()
        return items

    records = run_spread(H200[:3], [["a"], [], ["c"]], run)
    assert sorted((r.slot.label, r.result, r.error) for r in records) == [("cuda:0", ["a"], ""), ("cuda:2", ["c"], "")]


def test_a_gpu_that_fails_loses_only_its_own_cases():
    def run(slot, items, stop):
        if slot.index == 1:
            raise RuntimeError("CUDA error: an illegal memory access")
        return items

    by = {r.slot.index: r for r in run_spread(H200[:2], [["a"], ["b"]], run)}
    assert by[0].result == ["a"] and not by[0].error
    assert by[1].result is None and "illegal memory access" in by[1].error


def test_an_interrupt_stops_every_gpus_run_at_once():
    """Ctrl-C reaches the main thread while the GPUs' groups run: it is raised there, and every other GPU's
    group is stopped at once (its `stop` event), not left to finish."""
    from lnbench.run.processes import Stopped

    def run(slot, items, stop):
        if slot.index == 0:
            return items                      # finishes first: the interrupt arrives as it is reported
        if stop.wait(120):                    # (the limit only ends a hung test: a run not stopped says "")
            raise Stopped()
        return items

    def interrupted(record):
        seen.append(record)
        if record.slot.index == 0:
            raise KeyboardInterrupt

    seen: list = []
    with pytest.raises(KeyboardInterrupt):
        run_spread(H200[:2], [["a"], ["b"]], run, interrupted)
    assert [(r.slot.index, r.error) for r in seen] == [(0, ""), (1, "Stopped")]     # stopped, not left to finish


def test_host_bound_cases_are_planned_alone_and_cases_dealt_over_gpus():
    cases = build_cases(["torch", "liger"], ["fwd", "bwd"], ["bf16"], [(64, 256), (4096, 4096), (8192, 2048)],
                        ["cold", "hot"], 1e-5, 1, {"liger": ("", ("fwd",)), "torch": ("", ("fwd", "bwd"))})
    assert host_bound(cases[0], 64) and not host_bound(cases[2], 64) and not host_bound(cases[0], 0)
    groups = plan_groups(cases, ["torch", "liger"], 3, "cuda:0", H200[:2], 64.0)
    runnable = [c for c in cases if not c.skip]
    assert sorted(c.id for g in groups for c in g.cases) == sorted(c.id for c in runnable)
    assert all(host_bound(c, 64) == (c.id in g.alone_ids) for g in groups for c in g.cases)
    assert any(g.alone_ids for g in groups) and [len(g.orders) for g in groups] == [3, 3]
    per_gpu = [sum(len(g.cases) for g in groups if g.slot.index == i) for i in (0, 1)]
    assert abs(per_gpu[0] - per_gpu[1]) <= 2                          # within one family (its cold and hot)
    for gpu in (0, 1):                                                # each GPU times both modes of its shapes
        mine = [c for g in groups if g.slot.index == gpu for c in g.cases]
        assert {c.mode for c in mine} == {"cold", "hot"}
        assert all(sum(o.shape == c.shape and o.backend == c.backend and o.op == c.op for o in mine) == 2
                   for c in mine)
    plain = plan_groups(cases, ["torch", "liger"], 3, "cpu", None, 64.0)
    assert len(plain) == 1 and plain[0].gpu == "cpu" and not plain[0].alone_ids and len(plain[0].cases) == len(runnable)
    specs = [c for spec in group_spec(groups[0], "cuda:0", {}, 1, 0.7) for c in spec.cases]
    assert {c.id for c in specs if c.alone} == groups[0].alone_ids
    assert group_spec(groups[0], "cuda:0", {}, 1, 0.7)[0].alone_host_fraction == 0.7
    assert all(not c.alone and spec.alone_host_fraction is None for spec in group_spec(plain[0], "cpu", {}, 1, 0.7)
               for c in spec.cases)


@pytest.fixture
def by_size_only(tmp_path) -> list[str]:
    """A config where no case is host-bound by measurement (on the CPU every call is host-bound: host_fraction 1)."""
    path = tmp_path / "by-size.toml"
    path.write_text("[perf]\nalone_host_fraction = 1.5\n")
    return ["--config", str(path)]


TINY = ["--dtype", "f32", *timing(runs=2, min_warmup_calls=1, min_iters=2, max_iters=5), "--llc-mib", "0.05", "-P", "2",
        "--backend", "torch", "--op", "fwd", "--mode", "hot"]


@pytest.fixture
def narrow_console(monkeypatch):
    """The perf summary line wraps on every machine: its length depends on the phases shown (a loaded machine's
    kernel pass passes 0.05 s), so at the tests' 200 columns it wrapped only on a busy CI runner."""
    from lnbench.cli_common import console
    monkeypatch.setattr(console, "width", 60)


def unwrapped(text: str) -> str:
    """The console's output with its line wrapping undone."""
    return " ".join(text.split())


def test_perf_on_two_stand_in_gpus_names_each_rows_gpu_and_times_host_bound_cases_alone(monkeypatch, tmp_path,
                                                                                         by_size_only, narrow_console):
    from lnbench.perf.command import perf_command

    monkeypatch.setattr(gpus, "host_gpus", lambda environ=None: cpu_slots(2))
    out = tmp_path / "p.json"
    result = CliRunner().invoke(perf_command, [*TINY, "--devices", "all", "--shapes", "8x64,3x100,16x32,2048x2048",
                                               "--alone-below-mib", "1", "--json", str(out), "-q", *by_size_only],
                                env=ONE_THREAD)
    assert result.exit_code == 0, result.output
    assert "on 2 GPUs (cuda:0, cuda:1), 3 of 4 cases timed alone (host-bound: 3 by size, 0 measured)" in \
        unwrapped(result.output)
    frame = pd.read_json(out, orient="table")
    agg = frame[frame.row_kind == "aggregate"]
    assert list(agg["shape"]) == ["8x64", "3x100", "16x32", "2048x2048"]          # the plain run's order
    assert list(agg["gpu"]) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert list(agg["timed_alone"]) == [True, True, True, False]
    assert list(agg["alone_reason"].fillna("")) == ["size", "size", "size", ""]
    assert set(agg["status"]) == {"ok"} and (frame[frame.row_kind == "worker"].groupby("shape").size() == 2).all()
    meta = pd.read_json(out, typ="series")["metadata"]
    assert meta["devices"] == "cuda:0,cuda:1" and meta["alone_below_mib"] == 1


def test_perf_times_cases_measured_host_bound_alone(monkeypatch, tmp_path, narrow_console):
    """On the CPU every call is synchronous (host_fraction 1): with the bar at 1 every case is measured
    host-bound and its runs timed holding the host lock exclusive (after a re-warm); above 1 none is."""
    from lnbench.perf.command import perf_command

    monkeypatch.setattr(gpus, "host_gpus", lambda environ=None: cpu_slots(2))
    for bar, alone in ((1.0, [True, True, True]), (1.5, [False, False, False])):
        config = tmp_path / f"c{bar}.toml"
        config.write_text(f"[perf]\nalone_host_fraction = {bar}\nalone_below_mib = 0\n")
        out = tmp_path / f"p{bar}.json"
        result = CliRunner().invoke(perf_command, [*TINY, "--devices", "all", "--shapes", "8x64,3x100,16x32",
                                                   "--config", str(config), "--json", str(out), "-q"],
                                    env=ONE_THREAD)
        assert result.exit_code == 0, result.output
        frame = pd.read_json(out, orient="table")
        agg = frame.query("row_kind == 'aggregate'")
        assert list(agg["timed_alone"]) == alone and set(agg["status"]) == {"ok"}
        assert (agg["host_fraction"] == 1).all()
        assert list(agg["alone_reason"].fillna("")) == ["measured" if a else "" for a in alone]
        assert (f"{sum(alone)} of 3 cases timed alone (host-bound: 0 by size, {sum(alone)} measured)"
                in unwrapped(result.output))
        workers = frame.query("row_kind == 'worker'")
        assert len(workers) == 3 * 2 and list(workers["timed_alone"]) == [a for a in alone for _ in range(2)]
        assert "host-lock waits" in unwrapped(result.output)


def test_no_other_gpu_times_while_a_host_bound_case_is_timed():
    """Real perf workers on two stand-in GPUs, all at once, sharing one host lock: every exclusive span (the
    timed runs of a case host-bound by size) overlaps no span of the other GPU, the two GPUs' timing windows
    overlap (they run side by side, not one after the other), and each case says why it was timed alone."""
    from lnbench.run.workers import run_workers
    from lnbench.perf.protocol import PerfProtocol
    from lnbench.perf.spread import run_groups

    shapes = [(8, 64), (512, 512), (3, 100), (640, 512), (16, 32), (768, 512), (9, 40), (512, 640)]
    cases = build_cases(["torch"], ["fwd"], ["f32"], shapes, ["hot"], 1e-5, 1, {"torch": ("", ("fwd",))})
    groups = plan_groups(cases, ["torch"], 2, "cpu", cpu_slots(2), 0.05)        # < 50 KiB a call: alone
    protocol = PerfProtocol(processes=2, runs=3, warmup_s=0.1, min_warmup_calls=2, target_run_s=0.01,
                            min_iters=2, max_iters=50, llc_mib=0.05).to_dict()

    def run_group(group, stop):
        return run_workers("lnbench.perf.worker_main", group_spec(group, "cpu", protocol, 1, 1.5), 300,
                           env={**ONE_THREAD, **group.env()}, stop=stop)

    run_groups(groups, run_group)
    spans = []
    for group in groups:
        assert [r.ok for r in group.results] == [True, True], [r.problem() for r in group.results]
        for result in group.results:
            for entry in result.payload["cases"]:
                assert entry["alone"] == ("size" if entry["id"] in group.alone_ids else "")
                spans += [(group.gpu, mode, start, end) for mode, start, end in entry["lock_spans"]]
    assert {mode for _, mode, _, _ in spans} == {"shared", "exclusive"}
    for gpu, mode, start, end in spans:
        if mode == "exclusive":
            assert all(e <= start or s >= end for g, _, s, e in spans if g != gpu), (gpu, start, end)
    windows = [(min(s for g, _, s, _ in spans if g == gpu), max(e for g, _, _, e in spans if g == gpu))
               for gpu in ("cuda:0", "cuda:1")]
    assert windows[0][0] < windows[1][1] and windows[1][0] < windows[0][1]    # the GPUs timed at the same time


def test_perf_a_failing_gpu_loses_only_its_cases(monkeypatch, tmp_path, by_size_only):
    from lnbench.perf.command import perf_command

    # the second stand-in GPU's workers all crash at once (the perf worker's test hook, through that GPU's env)
    slots = cpu_slots(2, "LNBENCH_PERF_FAULT", ["", "0:crash:0,1:crash:0"])
    monkeypatch.setattr(gpus, "host_gpus", lambda environ=None: slots)
    out = tmp_path / "p.json"
    result = CliRunner().invoke(perf_command, [*TINY, "--devices", "0,1", "--shapes", "8x64,3x100,16x32",
                                               "--alone-below-mib", "0", "--json", str(out), "-q", *by_size_only],
                                env=ONE_THREAD)
    assert result.exit_code == 1, result.output
    agg = pd.read_json(out, orient="table").query("row_kind == 'aggregate'")
    assert dict(zip(agg["shape"], agg["status"])) == {"8x64": "ok", "3x100": "error", "16x32": "ok"}
    assert list(agg["gpu"]) == ["cuda:0", "cuda:1", "cuda:0"]


def test_verify_units_spread_over_gpus_and_a_dead_gpu_gives_its_units_away(monkeypatch):
    from lnbench.verify.cases import build_cases as verify_cases
    from lnbench.verify.parallel import SLOT_DEATHS, VerifySpec, run_units
    from lnbench.backends.tolerance import Tolerance
    from lnbench import settings as cfg
    from lnbench.results import VerifyRow

    tol = Tolerance.from_config(cfg.section(cfg.load_config(None), "verify"))
    cases = verify_cases([(8, 64), (3, 33)], ["f32"], [1e-5], 7)
    spec = VerifySpec(("torch",), tuple(cases), "cpu", tol, 1)
    # the second stand-in GPU cannot start a Python worker at all
    slots = [cpu_slots(1)[0], GpuSlot(1, "stand-in", "PYTHONHOME", "/nonexistent", device="cpu", worker_device="cpu")]
    rows: dict[int, list[VerifyRow]] = {}
    run_units(spec, list(range(len(cases))), 9, lambda unit, got, s: rows.setdefault(unit, got), slots)
    assert sorted(rows) == list(range(len(cases)))                      # every unit has its rows
    died = [u for u, got in rows.items() if got[0].status == "error"]
    assert 1 <= len(died) <= SLOT_DEATHS and all(rows[u][0].gpu == "cuda:1" for u in died)
    assert all(r.status == "PASS" and r.gpu == "cuda:0" for u, got in rows.items() if u not in died for r in got)


@pytest.mark.parametrize("command, args", [
    ("perf", ["--devices", "all", "--device", "cpu"]), ("verify", ["--devices", "all", "--device", "cpu"]),
    ("verify", ["--devices", "0", "--jobs", "2"]), ("abi-compare", ["--devices", "all", "--device", "cpu"]),
    # --force only mixes GPU models of a --devices run: alone it did nothing, silently
    ("verify", ["--force", "--backend", "torch", "--device", "cpu", "--dtype", "f32", "--shapes", "2x8", "--no-csv"]),
    ("perf", ["--force", "--backend", "torch", "--device", "cpu", "--shapes", "2x8", "--no-csv"]),
    ("abi-compare", ["--force", "--static-only", "--arch", "gfx942", "--shapes", "1x64", "--no-csv"]),
])
def test_devices_conflicts_are_one_line_usage_errors(monkeypatch, command, args):
    monkeypatch.setattr(gpus, "host_gpus", lambda environ=None: cpu_slots(2))
    line = error_line(invoke(command, *args))
    assert "--force" not in args or "--force does nothing without --devices" in line


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs of one host")
def test_two_gpus_on_this_host(tmp_path):
    """On a real two-GPU host: every case runs, each row on the GPU its worker saw, ids as in one process."""
    from lnbench.perf.command import perf_command

    out = tmp_path / "p.json"
    result = CliRunner().invoke(perf_command, ["--devices", "0,1", "--backend", "torch", "--op", "fwd", "--mode", "hot",
                                               "--shapes", "64x256,4096x4096,8192x4096", "-P", "2", "-R", "3",
                                               "--json", str(out), "-q"], env=ONE_THREAD)
    assert result.exit_code == 0, result.output
    agg = pd.read_json(out, orient="table").query("row_kind == 'aggregate'")
    assert set(agg["gpu"]) == {"cuda:0", "cuda:1"} and set(agg["status"]) == {"ok"}
    assert list(agg["timed_alone"]) == [True, False, False]


def test_abi_compare_on_two_stand_in_gpus_starts_them_together_and_times_one_at_a_time(monkeypatch, tmp_path):
    """abi-compare --devices: the shapes dealt over the GPUs, every GPU's workers started at once, each worker's
    timed turn holding the host lock exclusive; every row names its GPU and says it was timed alone."""
    from lnbench.abi.command import abi_compare_command

    monkeypatch.setattr(gpus, "host_gpus", lambda environ=None: cpu_slots(2))
    out = tmp_path / "a.json"
    result = CliRunner().invoke(abi_compare_command, [
        "--pair", "torch-entry", "--runtime-only", "--devices", "all", "-P", "2", "--shapes", "8x64,16x128,32x256",
        "--op", "fwd", "--metric", "direct,wrapper", *ABI_TIMING, "--json", str(out)], env=ONE_THREAD)
    assert result.exit_code == 0, result.output
    frame = pd.read_json(out, orient="table")
    assert set(frame["status"]) == {"ok"} and len(frame) == 3 * 2
    assert dict(zip(frame["shape"], frame["gpu"])) == {"8x64": "cuda:0", "16x128": "cuda:1", "32x256": "cuda:0"}
    assert frame["timed_alone"].all()
