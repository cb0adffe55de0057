"""The null device: FlyDSL's real launch path, launches complete unexecuted; abi-compare's host rows on it."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from cli_helpers import ABI_TIMING as FAST, error_line
from lnbench.abi import null_device as null_pair
from lnbench.abi.aggregate import HOST_ONLY_NULL, NOT_RUN_NULL_DEVICE_TIME, aggregate
from lnbench.abi.cases import PAIRS, PairCase, Side
from lnbench.abi.checks import CheckResult
from lnbench.abi.command import abi_compare_command
from lnbench.abi.plan import choose_device
from lnbench.abi.pair_timing import run_worker
from lnbench.abi.messages import AbiWorkerSpec
from lnbench.abi.worker_main import run_spec
from lnbench.run.device import emulator_status, parse_device, resolve_device
from lnbench.errors import LnbenchUsageError
from lnbench.measure.protocol import Protocol
from lnbench.machine.rocm import has_rocm_gpu

CPU = torch.device("cpu")
TINY = Protocol(processes=1, runs=3, warmup_s=0.0, min_warmup_calls=3, target_run_s=0.002, min_iters=5,
                max_iters=40)
needs_stand_in = pytest.mark.skipif(not emulator_status()[0],
                                    reason=f"the null device needs the HIP stand-in: {emulator_status()[1]}")


@pytest.fixture
def null_gfx942():
    """The null device, active in this process; the process's earlier emulated device is restored after."""
    from lnbench.emu import runtime
    before = runtime.current_arch()
    dev = resolve_device("null")
    yield dev
    runtime.deactivate()
    if before is not None:
        runtime.activate(before)


def _inputs(m: int, n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=gen).to(torch.bfloat16)  # noqa: E731
    return make(m, n), make(n), make(n), make(m, n)


def test_null_device_names_and_what_it_answers():
    dev = parse_device("null")
    assert (dev.name, dev.kind, dev.arch, dev.torch_device) == ("null:gfx942", "null", "gfx942", CPU)
    assert dev.is_null and dev.launches_flydsl and not dev.executes_flydsl
    assert dev.host_times_are_real and not dev.times_are_real and not dev.emulated and dev.stream() is None
    assert parse_device("null:gfx950").arch == "gfx950"
    assert "null device" in dev.label
    emu, cpu = parse_device("emu"), parse_device("cpu")
    assert emu.launches_flydsl and not emu.host_times_are_real and not cpu.launches_flydsl and cpu.host_times_are_real
    with pytest.raises(LnbenchUsageError, match="unsupported null-device arch 'gfx1100'"):
        parse_device("null:gfx1100")


@needs_stand_in
def test_null_launches_go_through_flydsl_and_execute_nothing(null_gfx942):
    from lnbench.emu import hip
    from lnbench.flydsl import launch
    x, w, b, dy = _inputs(16, 256)
    call = launch.direct_forward_call(x, w, b, 1e-5, True, "pointer")
    y, mean, rstd = call.outputs
    for t in (y, mean, rstd):
        t.fill_(float("nan"))
    before = hip.launch_count()
    call()
    assert hip.launch_count() - before == 1
    assert torch.isnan(y.float()).all() and torch.isnan(mean).all()      # launched, never executed
    _, mean, rstd = launch.forward(x, w, b, 1e-5, True, "tensor")
    for strategy, launches in (("deterministic", 2), ("atomic", 1)):
        before = hip.launch_count()
        launch.backward(dy, x, w, mean, rstd, "tensor", strategy)
        assert hip.launch_count() - before == launches, strategy
    resolve_device("emu")                                                  # the same kernels, executed
    y2, _, _ = launch.forward(x, w, b, 1e-5, True, "pointer")
    assert torch.isfinite(y2.float()).all()


@needs_stand_in
def test_null_worker_checks_by_execution_then_times_the_host_side(null_gfx942):
    spec = {"pair": "flydsl", "ops": ["fwd", "bwd"], "dtypes": ["bf16"], "shapes": [[8, 256], [16, 512]],
            "probe_shapes": [], "device": "cpu", "lnbench_device": "null:gfx942", "eps": 1e-5, "seed": 7,
            "metrics": ["direct", "wrapper"], "protocol": TINY.to_dict(),
            "pair_options": {"dgamma_strategy": "deterministic"}, "check_elements": 2048}
    payload = run_spec(AbiWorkerSpec.from_wire(spec))
    checks = pd.DataFrame(payload.checks)
    assert checks["ok"].all(), checks[~checks["ok"]]
    assert set(checks["check"]) == {"agreement", "reference", "alternation", "launches"}
    executed = checks[checks["check"] != "launches"]
    assert executed["detail"].str.contains("executed on emu:gfx942").all()
    # 16x512 is checked on 2048 // 512 = 4 of its 16 rows
    assert executed[executed["case"] == "fwd/bf16/16x512"]["detail"].str.contains("4 of 16 rows").all()
    for key, entry in payload.cases.items():
        for metric in ("direct", "wrapper"):
            record = entry.metrics[metric]
            assert len(record.tensor) == len(record.pointer) == TINY.runs and min(record.tensor) > 0
    rows = aggregate("flydsl", PAIRS["flydsl"].labels, [payload], ["direct", "wrapper"], n_boot=200)
    assert len(rows) == 2 * 2 * 2 and {r.status for r in rows} == {"ok"}


def _counted_case(shape: tuple[int, int], counter: list[int], launches_made: int) -> PairCase:
    x = torch.randn(*shape)

    def call():
        counter[0] += launches_made
        return (torch.nn.functional.layer_norm(x, (shape[1],)),)

    side = Side(direct=call, wrapper=call)
    return PairCase(op="fwd", dtype="f32", shape=shape, sides={"tensor": side, "pointer": side},
                    reference=lambda: (torch.nn.functional.layer_norm(x, (shape[1],)),),
                    launch_counter=lambda: counter[0], launches_per_call=1)


def test_null_checker_never_times_a_case_that_failed_by_execution_or_skipped_its_launch():
    counter = [0]
    good, failed, silent = (_counted_case((4, 32), counter, 1), _counted_case((4, 64), counter, 1),
                            _counted_case((4, 96), counter, 0))
    executed = [CheckResult(c.key, "agreement", True, "ok (executed)") for c in (good, silent)]
    executed.append(CheckResult(failed.key, "agreement", False, "planted: sides differ (executed)"))
    payload = run_worker([good, failed, silent], TINY, CPU, metrics=["direct"], checker=null_pair.checker(executed))
    timed = {key: bool(entry.metrics["direct"].tensor) for key, entry in payload.cases.items()}
    assert timed == {good.key: True, failed.key: False, silent.key: False}
    launches = {c["case"]: c for c in payload.checks if c["check"] == "launches"}
    assert launches[good.key]["ok"] and not launches[silent.key]["ok"]
    assert "0 launch(es) per call, expected 1" in launches[silent.key]["detail"]
    # a timed case no executed check stands for is not timed either
    lonely = _counted_case((8, 32), counter, 1)
    payload = run_worker([lonely], TINY, CPU, metrics=["direct"], checker=null_pair.checker([]))
    assert payload.cases[lonely.key].failed_check


def test_executed_check_rows_stay_within_the_budget():
    assert null_pair.check_rows(32, 1024, 1 << 16) == 32
    assert null_pair.check_rows(4096, 4096, 1 << 16) == 16
    assert null_pair.check_rows(4, 1 << 20, 1 << 16) == 1


@pytest.mark.skipif(has_rocm_gpu(), reason="the default device is the ROCm GPU here")
def test_default_device_of_the_flydsl_pair_without_rocm_is_null():
    ok, _ = emulator_status()
    assert choose_device(None, "flydsl").is_null == ok
    assert choose_device("auto", "flydsl").is_null == ok
    assert not choose_device(None, "torch-entry").is_null
    assert choose_device("cpu", "flydsl").kind == "cpu"
    assert choose_device("null:gfx950", "torch-entry").name == "null:gfx950"


@pytest.mark.parametrize("args, needle", [
    (["--device", "null", "--pair", "torch-entry"], "use it with --pair flydsl"),
    (["--device", "null:gfx1100"], "unsupported null-device arch 'gfx1100'"),
])
def test_null_device_usage_errors_exit_2_one_line(args, needle, results_dir):
    error_line(CliRunner().invoke(abi_compare_command, [*args, "--runtime-only"]), needle)


@needs_stand_in
@pytest.mark.skipif(has_rocm_gpu(), reason="the default device is the ROCm GPU here")
def test_default_abi_compare_measures_host_rows_on_the_null_device_in_worker_processes(tmp_path, results_dir):
    """The real worker path: each worker process activates the null device itself (before FlyDSL loads)."""
    csv, js = tmp_path / "n.csv", tmp_path / "n.json"
    result = CliRunner().invoke(abi_compare_command, [
        "--pair", "flydsl", "--runtime-only", "-P", "2", "--shapes", "8x256,16x512", "--op", "fwd",
        "--metric", "direct,wrapper,device", *FAST, "--csv", str(csv), "--json", str(js)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    assert list(frame["metric"]) == ["direct", "wrapper", "device"] * 2
    device_rows = frame[frame["metric"] == "device"]
    assert set(device_rows["status"]) == {NOT_RUN_NULL_DEVICE_TIME}
    host = frame[frame["metric"] != "device"]
    assert set(host["status"]) == {"ok"} and set(host["scope"]) == {HOST_ONLY_NULL}
    assert set(host["workers"]) == {2} and (host["ci_low"] <= host["speedup"]).all()
    assert (host["speedup"] <= host["ci_high"]).all() and set(frame["device"]) == {"null:gfx942"}
    payload = json.loads(js.read_text())
    assert payload["worker_problems"] == [] and len(payload["workers"]) == 2
    checks = pd.DataFrame(payload["checks"])
    assert checks["ok"].all() and set(checks["check"]) == {"agreement", "reference", "alternation", "launches"}
