"""The torch-entry pair's checks on the CPU: ATen's own low-precision dγ/dβ sums are not a failure, wrong results are.

The workers run one CPU thread; ATen's CPU backward for all-bf16 inputs then sums dγ/dβ over every row in a
bf16 accumulator, ~9.8 off the fp32 result at 1024x8192 (max |dγ| 120), which the plain 5% rule refused.
"""
from __future__ import annotations

import pytest
import torch

from lnbench.abi import checks
from lnbench.abi.cases import build_cases

CPU = torch.device("cpu")
SEED = 2024   # the [abi_compare] seed: the issue's failing case


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)   # as lnbench.abi.worker_main does on the CPU
    yield
    torch.set_num_threads(old)


def test_issue_case_bf16_bwd_1024x8192_passes_every_check():
    cases = build_cases("torch-entry", ["bwd"], ["bf16"], [(1024, 8192), (64, 1000)], CPU, 1e-5, SEED)
    results, failed = checks.run_checks(cases, CPU)
    assert not failed, [r.detail for r in results if not r.ok]
    assert {r.check for r in results} == {"agreement", "reference", "alternation"}


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("shape", [(4096, 4096), (257, 1000), (1024, 8192)])
def test_bwd_reference_check_passes_across_shapes_and_dtypes(shape, dtype):
    (case,) = build_cases("torch-entry", ["bwd"], [dtype], [shape], CPU, 1e-5, SEED)
    result = checks.check_reference(case, CPU)
    assert result.ok, result.detail


def test_slack_follows_the_verify_rule_per_output():
    """dγ/dβ get room that grows with M (row sums); dx stays near its own rounding; f32 stays tight."""
    (small,) = build_cases("torch-entry", ["bwd"], ["bf16"], [(64, 8192)], CPU, 1e-5, SEED)
    (large,) = build_cases("torch-entry", ["bwd"], ["bf16"], [(1024, 8192)], CPU, 1e-5, SEED)
    (f32,) = build_cases("torch-entry", ["bwd"], ["f32"], [(1024, 8192)], CPU, 1e-5, SEED)
    dx, dgamma, dbeta = large.ref_slack
    assert dx < 0.2 < dgamma and dbeta > 0.2
    assert large.ref_slack[1] > 2 * small.ref_slack[1]
    assert max(f32.ref_slack) < 1e-2
    (fwd,) = build_cases("torch-entry", ["fwd"], ["bf16"], [(1024, 8192)], CPU, 1e-5, SEED)
    assert len(fwd.ref_slack) == 3 and max(fwd.ref_slack) < 0.2


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_results_of_other_inputs_still_fail_the_reference_check(dtype):
    """The slack must not make the check vacuous: a result for other inputs of the same shape (a stale
    buffer) is refused."""
    (case,) = build_cases("torch-entry", ["bwd"], [dtype], [(1024, 8192)], CPU, 1e-5, SEED)
    (other,) = build_cases("torch-entry", ["bwd"], [dtype], [(1024, 8192)], CPU, 1e-5, SEED + 7)
    case.sides = other.sides
    result = checks.check_reference(case, CPU)
    assert not result.ok
    assert "output 0" in result.detail
