"""The abi-compare timing core and checks on the CPU, with the torch stand-in pairs and planted fakes."""
from __future__ import annotations

import json

import pytest
import torch

from lnbench.abi import checks
from lnbench.abi.aggregate import aggregate
from lnbench.abi.cases import PAIRS, PairCase, Side, build_cases
from lnbench.abi.messages import AbiWorkerPayload
from lnbench.abi.pair_timing import run_worker
from lnbench.measure.protocol import Protocol
from virtual_clock import VirtualClock

CPU = torch.device("cpu")
TINY = Protocol(processes=1, runs=3, warmup_s=0.0, min_warmup_calls=3, target_run_s=0.002, min_iters=5,
                max_iters=40)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_torch_entry_sides_are_bitwise_identical_and_match_reference():
    cases = build_cases("torch-entry", ["fwd", "fwd-nostats", "bwd"], ["bf16", "f32"], [(8, 64), (3, 40)],
                        CPU, 1e-5, 1)
    assert len(cases) == 12
    for case in cases:
        assert checks.check_agreement(case, CPU).ok, case.key
        assert checks.check_reference(case, CPU).ok, case.key


def test_worker_times_every_unit_in_abba_order():
    cases = build_cases("torch-entry", ["fwd", "bwd"], ["f32"], [(8, 64), (16, 128)], CPU, 1e-5, 1)
    payload = run_worker(cases, TINY, CPU, worker_index=0)
    assert all(c["ok"] for c in payload.checks)
    assert {c["check"] for c in payload.checks} == {"agreement", "reference", "alternation"}
    assert payload.rounds_done == TINY.runs
    for key, entry in payload.cases.items():
        for metric in ("direct", "wrapper"):
            record = entry.metrics[metric]
            assert len(record.tensor) == len(record.pointer) == TINY.runs
            assert all(v > 0 for v in record.tensor + record.pointer)
            assert TINY.min_iters <= record.iters <= TINY.max_iters
        assert entry.metrics["device"].skipped == "no device events on the CPU"
    assert AbiWorkerPayload.from_wire(json.loads(json.dumps(payload.to_wire()))) == payload    # across the pipe
    rows = aggregate("torch-entry", PAIRS["torch-entry"].labels, [payload, payload])
    measured = [r for r in rows if r.status == "ok"]
    assert len(measured) == 2 * 2 * 2
    for row in measured:
        assert row.ci_low <= row.speedup <= row.ci_high
        assert row.verdict in ("FASTER", "SAME", "SLOWER")
        assert row.tensor_min_us <= row.tensor_us <= row.tensor_max_us


def test_planted_slow_pair_comes_out_slower(monkeypatch):
    """The planted-slow pair through the whole timing core and the aggregation, on a clock that only the calls
    move: every entry call costs 100 µs and the pointer side's planted spin 300 µs more, so every run measures
    exactly that (4 times the time: SLOWER), on any machine."""
    clock = VirtualClock.install(monkeypatch)
    clock.plant_abi_costs(monkeypatch, call_us=100.0)
    cases = build_cases("planted-slow", ["fwd"], ["f32"], [(4, 32), (4, 64)], CPU, 1e-5, 1, {"delay_us": 300.0})
    payloads = [run_worker(cases, TINY, CPU, worker_index=w, metrics=["direct", "wrapper"]) for w in range(2)]
    rows = aggregate("planted-slow", PAIRS["planted-slow"].labels, payloads, ["direct", "wrapper"], n_boot=1000)
    assert len(rows) == 4
    for row in rows:
        assert row.verdict == "SLOWER", row
        assert (row.tensor_us, row.pointer_us) == (pytest.approx(100.0), pytest.approx(400.0)), row
        assert row.speedup == row.ci_low == row.ci_high == pytest.approx(0.25), row


def _fake_case(shape: tuple[int, int], store: dict, stale: bool) -> PairCase:
    """A forward whose 'compiled function cache' is keyed wrongly when stale: the first shape's result
    is handed back for every later shape (FlyDSL PR #562's bug)."""
    x = torch.randn(*shape)

    def compute() -> tuple[torch.Tensor, ...]:
        if stale and "first" in store:
            return store["first"]
        out = (torch.nn.functional.layer_norm(x, (shape[1],)),)
        store.setdefault("first", out)
        return out

    side = Side(direct=compute, wrapper=compute)
    ref = lambda: (torch.nn.functional.layer_norm(x, (shape[1],)),)  # noqa: E731
    return PairCase(op="fwd", dtype="f32", shape=shape, sides={"tensor": side, "pointer": side}, reference=ref)


def test_stale_cache_is_caught_by_alternation():
    store: dict = {}
    cases = [_fake_case((4, 32), store, stale=True), _fake_case((4, 64), store, stale=True)]
    results = checks.check_alternation(cases, CPU)
    assert [r.ok for r in results] == [True, False]
    assert "after a shape switch" in results[1].detail
    honest: dict = {}
    good = [_fake_case((4, 32), honest, stale=False), _fake_case((4, 64), honest, stale=False)]
    assert all(r.ok for r in checks.check_alternation(good, CPU))


def test_stale_cache_with_same_width_is_caught_too():
    store: dict = {}
    cases = [_fake_case((4, 32), store, stale=True), _fake_case((8, 32), store, stale=True)]
    assert not checks.check_alternation(cases, CPU)[1].ok


def test_disagreeing_sides_fail_before_timing():
    x = torch.randn(4, 16)
    good = Side(direct=lambda: torch.nn.functional.layer_norm(x, (16,)),
                wrapper=lambda: (torch.nn.functional.layer_norm(x, (16,)),))
    off = Side(direct=lambda: torch.nn.functional.layer_norm(x, (16,)) + 1e-6,
               wrapper=lambda: (torch.nn.functional.layer_norm(x, (16,)) + 1e-6,))
    case = PairCase(op="fwd", dtype="f32", shape=(4, 16), sides={"tensor": good, "pointer": off},
                    reference=lambda: (torch.nn.functional.layer_norm(x, (16,)),))
    result = checks.check_agreement(case, CPU)
    assert not result.ok and "bitwise" in result.detail
    payload = run_worker([case], TINY, CPU)
    assert payload.cases[case.key].failed_check
    assert payload.cases[case.key].metrics["direct"].tensor == []      # never timed
    rows = aggregate("x", {}, [payload], ["direct"])
    assert rows[0].status == "check failed"
