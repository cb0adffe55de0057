import math

import pytest
import torch

from lnbench.backends.base import Availability
from lnbench.backends.torch_native import TorchBackend
from lnbench.settings import load_config, section
from lnbench.run.device import resolve_device
from lnbench.verify.cases import KINDS, build_cases, make_inputs
from lnbench.verify.planted import BUGS, PlantedBackend
from lnbench.verify.runner import failed, max_errors
from verify_rows import verify_rows
from lnbench.verify.selftest import run_self_test
from lnbench.backends.tolerance import Conditioning, Tolerance

CPU = resolve_device("cpu")


@pytest.fixture(scope="module")
def tol():
    return Tolerance.from_config(section(load_config(), "verify"))


def small_cases(dtypes=("f32", "bf16")):
    return build_cases([(8, 64), (3, 33)], list(dtypes), [1e-5, 1e-2], seed=7)


def test_pass_rule_arithmetic(tol):
    assert tol.allowed("y", "f32", 100, 1e-6) == pytest.approx(tol.k * 1e-6 + tol.atol["f32"]["y"])
    # dγ/dβ atol scales with sqrt(M)
    assert tol.allowed("dweight", "bf16", 400, 0.0) == pytest.approx(20 * tol.atol["bf16"]["dweight"])
    cond = Conditioning(n=256, rows=4, mean_times_rstd=100.0, max_weight=2.0, max_dy=3.0)
    floor = tol.fp32_ulps * 2.0 ** -23 * 16 * 100.0 * 2.0
    assert tol.allowed("y", "f32", 4, 0.0, cond) == pytest.approx(tol.atol["f32"]["y"] + floor)
    assert tol.allowed("dbias", "f32", 4, 0.0, cond) == pytest.approx(2 * tol.atol["f32"]["dbias"])


def test_inputs_are_seeded_and_never_zero():
    case = build_cases([(4, 16)], ["bf16"], [1e-5], seed=3)[1]  # the offset kind
    a, b = make_inputs(case, CPU.torch_device), make_inputs(case, CPU.torch_device)
    assert torch.equal(a.x, b.x) and torch.equal(a.dy, b.dy)
    assert a.x.dtype == torch.bfloat16 and float(a.x.float().mean()) > 900
    assert all(bool(t.ne(0).any()) for t in (a.x, a.weight, a.bias, a.dy))


def test_case_kinds_cover_the_issue():
    cases = build_cases([(5, 7)], ["f32"], [1e-5, 1e-2], seed=0)
    assert {c.kind for c in cases} == set(KINDS)
    assert next(c for c in cases if c.kind == "eps2").eps == 1e-2
    assert next(c for c in cases if c.kind == "autograd-3d").shape == (2, 2, 7)
    const = make_inputs(next(c for c in cases if c.kind == "constant"), CPU.torch_device)
    assert bool((const.x == const.x[:, :1]).all())


def test_max_errors_non_finite_is_infinite():
    ref = torch.ones(4, dtype=torch.float64)
    assert max_errors(torch.tensor([1.0, float("nan"), 1.0, 1.0]), ref) == (math.inf, math.inf)
    assert max_errors(None, ref)[0] == math.inf
    assert max_errors(torch.tensor([1.0, 1.5, 1.0, 1.0]), ref) == (0.5, 0.5)


def test_torch_backend_passes_every_kind(tol):
    rows = verify_rows(TorchBackend(), small_cases(("f32", "f16", "bf16")), CPU, tol)
    assert rows and not failed(rows)
    assert {r.tensor for r in rows} == {"y", "mean", "rstd", "dx", "dweight", "dbias"}
    assert all(r.status == "PASS" and r.margin >= 0 for r in rows)
    assert {r.determinism for r in rows if r.tensor == "dweight" and r.case != "autograd-3d"} == {"bitwise"}


@pytest.mark.parametrize("bug", [b for b in BUGS if b != "none"])
def test_each_planted_bug_fails_the_rule(bug, tol):
    rows = verify_rows(PlantedBackend(bug), small_cases(("f32", "f16", "bf16")), CPU, tol)
    assert failed(rows), f"planted bug {bug} passed every check"


def test_self_test_summary(tol):
    summary, detail = run_self_test(small_cases(), CPU, tol)
    by_bug = {s["bug"]: s for s in summary}
    assert set(by_bug) == set(BUGS)
    assert all(s["status"] == "ok" for s in summary)
    assert by_bug["none"]["failed_checks"] == 0
    assert "mean" in by_bug["bf16-mean"]["caught_in"] and "dx" in by_bug["drop-c2"]["caught_in"]
    assert len(detail) == sum(s["checks"] for s in summary)


class ExplodingBackend(TorchBackend):
    name = "exploding"

    def forward(self, x, weight, bias, eps, store_stats=True):
        if x.shape[-1] == 33:
            raise RuntimeError("kernel crashed")
        return super().forward(x, weight, bias, eps, store_stats)


def test_an_exception_in_one_case_keeps_the_others(tol):
    rows = verify_rows(ExplodingBackend(), small_cases(("f32",)), CPU, tol)
    errors = [r for r in rows if r.status == "error"]
    assert errors and all("kernel crashed" in r.detail and r.N == 33 for r in errors)
    assert any(r.status == "PASS" and r.N == 64 for r in rows)
    assert failed(rows)


class Bf16StatsBackend(TorchBackend):
    name = "bf16stats"

    def forward(self, x, weight, bias, eps, store_stats=True):
        y, mean, rstd = super().forward(x, weight, bias, eps, store_stats)
        return y, mean.to(torch.bfloat16), rstd

    def backward(self, dy, x, weight, mean, rstd):
        return super().backward(dy, x, weight, mean.float(), rstd)


def test_stats_must_be_fp32(tol):
    rows = verify_rows(Bf16StatsBackend(), small_cases(("f32",))[:1], CPU, tol)
    mean_row = next(r for r in rows if r.tensor == "mean")
    assert mean_row.status == "FAIL" and "torch.float32" in mean_row.detail


class NoisyBackend(TorchBackend):
    """dγ differs run to run, like fp32 atomics."""

    name = "noisy"
    deterministic = True

    def backward(self, dy, x, weight, mean, rstd):
        dx, dw, db = super().backward(dy, x, weight, mean, rstd)
        bumped = torch.nextafter(dw, torch.full_like(dw, float("inf")))  # one ulp, at random places
        return dx, torch.where(torch.rand_like(dw) > 0.5, bumped, dw), db


def test_determinism_failure_only_for_deterministic_backends(tol):
    cases = small_cases(("f32",))[:1]
    rows = verify_rows(NoisyBackend(), cases, CPU, tol)
    dw = next(r for r in rows if r.tensor == "dweight")
    assert dw.determinism == "differs" and dw.status == "FAIL"
    NoisyBackend.deterministic = False
    try:
        dw = next(r for r in verify_rows(NoisyBackend(), cases, CPU, tol) if r.tensor == "dweight")
        assert dw.determinism == "differs" and dw.status == "PASS"
    finally:
        NoisyBackend.deterministic = True


class CompileOnlyBackend(TorchBackend):
    name = "compileonly"
    compiled: list = []

    def availability(self, device):
        return Availability(False, "no ROCm GPU: compile-only", can_compile=True)

    def compile_case(self, n, dtype, eps):
        self.compiled.append((n, dtype, eps))
        return f"compiled N={n}"


class MissingBackend(TorchBackend):
    name = "missing"

    def availability(self, device):
        return Availability(False, "not installed")


def test_cases_that_cannot_execute_are_never_pass(tol):
    cases = small_cases(("f32",))
    rows = verify_rows(CompileOnlyBackend(), cases, CPU, tol)
    assert len(rows) == len(cases)
    assert all(r.status.startswith("compiled, not executed") for r in rows)
    assert len(CompileOnlyBackend.compiled) == 4  # two widths x two eps values, each compiled once
    rows = verify_rows(MissingBackend(), cases, CPU, tol)
    assert all(r.status == "not run" and r.detail == "not installed" for r in rows)
    assert not failed(rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_backward_with_gives_the_gradients_of_y_backward(dtype):
    """runner.backward_with's sum(y·dy) form hands y the gradient 1·dy: every gradient bitwise that of y.backward(dy)."""
    from lnbench.verify.runner import backward_with

    gen = torch.Generator().manual_seed(11)
    x0 = (torch.randn(2, 5, 96, generator=gen) * 3 + 1).to(dtype)
    w0, b0 = (torch.rand(96, generator=gen) + 0.5).to(dtype), torch.randn(96, generator=gen).to(dtype)
    dy = torch.randn(2, 5, 96, generator=gen).to(dtype)
    grads = []
    for run in (lambda y: y.backward(dy), lambda y: backward_with(y, dy)):
        x, w, b = (t.clone().requires_grad_(True) for t in (x0, w0, b0))
        run(torch.nn.functional.layer_norm(x, (96,), w, b, 1e-5))
        grads.append((x.grad, w.grad, b.grad))
    for want, got in zip(*grads):
        assert want is not None and got is not None and torch.equal(want, got)


def test_backward_with_a_gradient_torch_would_refuse_raises_torchs_error():
    from lnbench.verify.runner import backward_with

    x = torch.randn(3, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="[Mm]ismatch in shape"):
        backward_with(x * 2, torch.randn(3, 1, 8))
