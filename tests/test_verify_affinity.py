"""verify --jobs deals units by kernel affinity (lnbench.verify.affinity): a worker keeps to the groups it owns,
takes a free group when its own are done, helps with another's only when no group is free, and every unit is
dealt exactly once, whatever the order of requests."""
from __future__ import annotations

import random

from lnbench.backends.tolerance import Tolerance
from lnbench import settings as cfg
from lnbench.verify.affinity import AffinityQueue
from lnbench.verify.cases import build_cases
from lnbench.verify.parallel import VerifySpec


def _group(unit: int) -> str:
    return "ABC"[unit // 10]         # units 0-9: group A, 10-19: B, 20-29: C


def test_a_worker_keeps_to_its_group_then_takes_a_free_one_then_helps():
    queue = AffinityQueue([20, 0, 21, 10, 1, 22, 11, 2], _group)
    assert queue.take(0) == 20                  # the first unit: worker 0 owns C
    assert queue.take(1) == 0                   # C is worker 0's: worker 1 takes the first free group, A
    assert queue.take(0) == 21                  # its own group before the earlier-listed free unit 10
    assert queue.take(1) == 1
    assert queue.take(0) == 22
    assert queue.take(0) == 10                  # C is done: the first free group, B
    assert queue.take(1) == 2
    assert queue.take(1) == 11                  # A done, nothing free: it helps with worker 0's B
    assert len(queue) == 0 and list(queue) == []


def test_a_gone_workers_groups_are_free_again():
    queue = AffinityQueue([0, 1, 2, 10, 11], _group)
    assert queue.take(0) == 0 and queue.take(1) == 10
    queue.release(0)                            # worker 0 died: a fresh worker 2 may own A
    assert queue.take(1) == 11
    assert queue.take(2) == 1 and queue.take(2) == 2


def test_every_unit_is_dealt_once_in_any_request_order():
    rng = random.Random(5)
    order = rng.sample(range(30), 30)
    queue = AffinityQueue(order, _group)
    dealt = [queue.take(rng.randrange(3)) for _ in range(30)]
    assert sorted(dealt) == list(range(30)) and len(queue) == 0


def test_spec_groups_are_one_width_in_one_dtype_over_every_backend():
    tol = Tolerance.from_config(cfg.section(cfg.load_config(None), "verify"))
    cases = build_cases([(8, 64), (3, 33)], ["f32", "bf16"], [1e-5], 7)
    spec = VerifySpec(("flydsl", "torch"), tuple(cases), "cpu", tol, 1)
    for unit in range(2 * len(cases)):
        _, case = spec.unit(unit)
        assert spec.group(unit) == (case.dtype, case.n)
    assert spec.group(0) == spec.group(len(cases))            # one case on two backends: one group
    assert len({spec.group(u) for u in range(2 * len(cases))}) == 4
