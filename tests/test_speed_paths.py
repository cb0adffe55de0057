"""The shortcuts the main job's speed-ups take give what the long way gives (issue 20 item 7)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lnbench.backends.reference import reference
from lnbench.backends.tolerance import Conditioning
from lnbench.run.device import resolve_device
from lnbench.emu.decode import decode_at
from lnbench.emu.memory import Memory, Region
from lnbench.verify import runner
from lnbench.verify.cases import Case, make_inputs


def _max_errors_long_way(got: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """The formula as written before: every pass on its own tensor."""
    diff = (got.double().reshape(ref.shape) - ref).abs()
    if not bool(torch.isfinite(diff).all()):
        return math.inf, math.inf
    floor = max(float(ref.abs().max()) * 1e-3, 1e-30)
    return float(diff.max()), float((diff / ref.abs().clamp_min(floor)).max())


def test_max_errors_equals_the_long_way_bit_for_bit_and_with_a_shared_scale():
    gen = torch.Generator().manual_seed(7)
    ref = torch.randn(37, 200, generator=gen, dtype=torch.float64)
    ref[3, :5] = 0.0                                           # near-zero elements: the floor matters
    got = (ref + 1e-3 * torch.randn(37, 200, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    expected = _max_errors_long_way(got, ref)
    assert runner.max_errors(got, ref) == expected
    assert runner.max_errors(got, ref, runner.relative_floor(ref)) == expected
    assert expected[0] > 0 and expected[1] > 0


def _conditioning_long_way(case: Case, inp, ref) -> Conditioning:
    """The conditioning formula on whole fp64 tensors, as written before the blocked passes."""
    x = inp.x.double().reshape(-1, case.n)
    mean, rstd = ref["mean"].double(), ref["rstd"].double()
    wdy = inp.dy.double().reshape(-1, case.n) * inp.weight.double()
    c2 = (wdy * (x - mean[:, None]) * rstd[:, None]).mean(dim=-1)
    dx_scale = rstd * (wdy.abs().amax(dim=-1) + c2.abs() * mean.abs() * rstd)
    return Conditioning(n=case.n, rows=case.rows, mean_times_rstd=float((ref["mean"].abs() * ref["rstd"]).max()),
                        max_weight=float(inp.weight.double().abs().max()), max_dy=float(inp.dy.double().abs().max()),
                        mean_abs_x=float(x.abs().mean(dim=-1).max()), dx_scale=float(dx_scale.max()))


@pytest.mark.parametrize("kind,dtype,m,n", [("random", "bf16", 700, 1500), ("offset", "f16", 3, 257),
                                            ("constant", "f32", 64, 256), ("autograd-3d", "bf16", 40, 9000)])
def test_blocked_passes_equal_the_whole_tensor_formulas(monkeypatch, kind, dtype, m, n):
    """The error and conditioning passes over blocks (several here: a small block) give the whole-tensor values
    bit for bit, errors planted in the last block too."""
    monkeypatch.setattr(runner, "BLOCK_ELEMENTS", 4096 + 7)
    case = Case(kind, dtype, m, n, 1e-5, 5)
    inp = make_inputs(case, torch.device("cpu"))
    ref = reference(inp.x, inp.weight, inp.bias, inp.dy, case.eps)
    assert runner.conditioning(case, inp, ref) == _conditioning_long_way(case, inp, ref)
    gen = torch.Generator().manual_seed(9)
    for name, value in ref.items():
        got = (value + 1e-2 * torch.randn(value.shape, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
        got.view(-1)[-1] += 0.5                                  # the worst error in the last block
        assert runner.max_errors(got, value) == _max_errors_long_way(got, value), name


def test_the_reference_is_autograd_of_f_layer_norm_bit_for_bit():
    """One ATen forward and backward give what y.backward(dy) through F.layer_norm in fp64 gives."""
    case = Case("autograd-3d", "bf16", 6, 333, 1e-3, 2)
    inp = make_inputs(case, torch.device("cpu"))
    ref = reference(inp.x, inp.weight, inp.bias, inp.dy, case.eps)
    x, w, b = (t.double().requires_grad_(True) for t in (inp.x, inp.weight, inp.bias))
    y = F.layer_norm(x, (case.n,), w, b, case.eps)
    y.backward(inp.dy.double())
    mean = x.detach().mean(dim=-1).reshape(-1)
    assert torch.equal(ref["y"], y.detach()) and torch.equal(ref["dx"], x.grad)
    assert torch.equal(ref["dweight"], w.grad) and torch.equal(ref["dbias"], b.grad)
    assert ref["mean"].shape == ref["rstd"].shape == (case.rows,)
    assert torch.allclose(ref["mean"], mean, rtol=0, atol=1e-12)


def test_max_errors_finds_nan_and_inf_from_the_maximum():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert runner.max_errors(torch.tensor([1.0, bad, 3.0]), ref) == (math.inf, math.inf)
    assert runner.max_errors(torch.tensor([1.0, 2.5, 3.0]), ref) == (0.5, 0.25)


def test_a_shared_setup_gives_each_backend_its_own_inputs_and_the_same_reference():
    runner._setups.clear()
    device = resolve_device("cpu")
    case = Case("randn", "f32", 4, 64, 1e-5, 11)
    first = runner.shared_setup(case, device)
    first.inp.x.fill_(0.0)                                     # a backend writing into its inputs
    second = runner.shared_setup(case, device)
    fresh = runner.set_up_case(case, device)
    assert torch.equal(second.inp.x, fresh.inp.x) and not torch.equal(second.inp.x, first.inp.x)
    assert second.ref is first.ref and second.memo is first.memo
    for name, tensor in fresh.ref.items():
        assert torch.equal(second.ref[name], tensor), name
    big = Case("randn", "f32", 2, runner.SETUP_SHARE_ELEMENTS, 1e-5, 11)   # over the limit: not kept
    runner.shared_setup(big, device)
    assert [key[0] for key in runner._setups] == [case]
    runner._setups.clear()


def test_a_miss_inside_a_freed_buffer_names_it_and_the_nearest_live_buffer():
    mem = Memory()
    live = np.zeros(64, np.uint8)
    mem.add(0x1000, 64, "y", live)
    mem.freed.append(Region(0x1040, 256, "old_y", np.zeros(0, np.uint8)))
    text = mem.describe_miss(0x1040, 4)
    assert "'old_y'" in text and "freed before the launch ran" in text
    assert "nearest buffer 'y'" in text and "4 byte(s) past its end" in text
    assert mem.describe_miss(0x1000 + 200 + 512, 4).startswith("nearest buffer 'y'")


def test_decoded_instructions_shared_by_bytes_are_independent_per_pc():
    nop = (0xBF800000).to_bytes(4, "little")                   # s_nop 0
    code = nop * 8
    a, b = decode_at(code, 0), decode_at(code, 16)
    assert (a.name, b.name) == ("s_nop", "s_nop") and (a.pc, b.pc) == (0, 16)
    a.f["simm16"] = 99                                         # one instruction's fields are its own
    assert b.f.get("simm16") != 99 and decode_at(code, 16).f.get("simm16") != 99
