"""Host-side wrapper behaviour that needs no GPU: contracts, empty inputs, cache keys, reshapes, and the
emulated-device wiring (arch, stream, launch scopes, buffer lifetimes) against a fake emulator."""
import gc
import weakref

import pytest
import torch

from lnbench.run.device import emu_device
from lnbench.emu import runtime
from lnbench.emu.errors import EmulatorFault
from lnbench.errors import ContractError
from lnbench.flydsl import launch
from lnbench.backends.autograd import from_2d, to_2d


def _fwd_args(m=4, n=64, dtype=torch.float32):
    return torch.randn(m, n, dtype=dtype), torch.ones(n, dtype=dtype), torch.zeros(n, dtype=dtype)


@pytest.mark.parametrize("mutate,name", [
    (lambda x, w, b: (x.t().contiguous().t(), w, b), "x"),                      # not contiguous
    (lambda x, w, b: (x, w.to(torch.float16), b), "weight"),                     # dtype mismatch
    (lambda x, w, b: (x, w, b.to(torch.float16)), "bias"),
    (lambda x, w, b: (x, w[:-1].contiguous(), b), "weight"),                     # wrong length
    (lambda x, w, b: (x, w.reshape(8, 8), b), "weight"),                         # not 1-D
    (lambda x, w, b: (x, w, torch.zeros(65)), "bias"),
    (lambda x, w, b: (x[None], w, b), "x"),                                      # not 2-D
])
def test_forward_contracts_name_the_argument(mutate, name):
    x, w, b = mutate(*_fwd_args(n=64, m=64))
    with pytest.raises(ContractError, match=name):
        launch.forward(x, w, b, 1e-5)


def test_forward_device_contract():
    x, w, b = _fwd_args()
    meta_w = torch.ones(64, device="meta")
    with pytest.raises(ContractError, match="weight"):
        launch.forward(x, meta_w, b, 1e-5)


def test_unknown_abi_and_strategy():
    x, w, b = _fwd_args()
    with pytest.raises(ContractError, match="abi"):
        launch.forward(x, w, b, 1e-5, abi="struct")
    mean = torch.zeros(4)
    with pytest.raises(ContractError, match="dgamma_strategy"):
        launch.backward(x, x, w, mean, mean, dgamma_strategy="random")


@pytest.mark.parametrize("case,name", [
    ("dy_noncontig", "dy"), ("dy_dtype", "dy"), ("mean_dtype", "mean"), ("rstd_shape", "rstd"),
    ("dy_shape", "dy"), ("w_len", "weight"),
])
def test_backward_contracts_name_the_argument(case, name):
    x, w, _ = _fwd_args(m=8, n=8)
    dy = torch.randn(8, 8)
    mean, rstd = torch.zeros(8), torch.ones(8)
    if case == "dy_noncontig":
        dy = dy.t()
    elif case == "dy_dtype":
        dy = dy.double()
    elif case == "mean_dtype":
        mean = mean.double()
    elif case == "rstd_shape":
        rstd = torch.ones(7)
    elif case == "dy_shape":
        dy = torch.randn(8, 9)
    elif case == "w_len":
        w = torch.ones(9)
    with pytest.raises(ContractError, match=name):
        launch.backward(dy, x, w, mean, rstd)


def test_contract_error_is_a_value_error():
    assert issubclass(ContractError, ValueError)


def test_empty_m_returns_empty_without_launch(monkeypatch):
    monkeypatch.setattr(launch, "_cached", lambda *a, **k: pytest.fail("compiled for M=0"))
    x, w, b = _fwd_args(m=0, n=32)
    y, mean, rstd = launch.forward(x, w, b, 1e-5)
    assert y.shape == (0, 32) and mean.shape == (0,) and rstd.shape == (0,)
    y2, m2, r2 = launch.forward(x, w, b, 1e-5, store_stats=False)
    assert y2.shape == (0, 32) and m2 is None and r2 is None
    dx, dw, db = launch.backward(x, x, w, torch.zeros(0), torch.zeros(0))
    assert dx.shape == (0, 32) and torch.equal(dw, torch.zeros(32)) and torch.equal(db, torch.zeros(32))


def test_cpu_tensors_without_an_emulated_device_are_a_clear_error(monkeypatch):
    monkeypatch.setattr(runtime, "current_arch", lambda: None)
    x, w, b = _fwd_args()
    hint = r"needs a ROCm GPU \(or --device emu\)"
    with pytest.raises(launch.NeedsRocmGpu, match=hint):
        launch.forward(x, w, b, 1e-5)
    with pytest.raises(launch.NeedsRocmGpu, match=hint):
        launch.backward(x, x, w, torch.zeros(4), torch.ones(4))
    with pytest.raises(launch.NeedsRocmGpu, match=hint):
        launch.direct_forward_call(x, w, b, 1e-5, True, "pointer")


@pytest.fixture
def counting_compile(monkeypatch):
    """Replace the real compile with a counter; builders still run (tracing happens at compile)."""
    calls = []

    def fake(launcher, args, arch, identity=None):
        calls.append((launcher, len(args), arch))
        return lambda *a: None

    monkeypatch.setattr(launch, "_cache", {})          # the real cache keeps its kernels (see emu_fakes.install)
    monkeypatch.setattr(launch, "_do_compile", fake)
    return calls


def _compile_fwd(x, w, b, eps, store_stats=True, abi="pointer", arch="gfx942"):
    y = torch.empty_like(x)
    stats = [torch.empty(x.shape[0]), torch.empty(x.shape[0])] if store_stats else []
    return launch.fwd_compiled(emu_device(arch), x, w, b, y, eps, store_stats, abi, stats)


def test_same_key_compiles_once(counting_compile):
    x, w, b = _fwd_args(n=256)
    _compile_fwd(x, w, b, 1e-5)
    _compile_fwd(x.clone(), w, b, 1e-5)
    _compile_fwd(torch.randn(100, 256), w, b, 1e-5)          # another M: same compiled function
    assert len(counting_compile) == 1


def test_eps_n_stats_abi_dtype_are_separate_entries(counting_compile):
    x, w, b = _fwd_args(n=256)
    _compile_fwd(x, w, b, 1e-5)
    _compile_fwd(x, w, b, 1e-6)
    assert len(counting_compile) == 2
    x2, w2, b2 = _fwd_args(n=512)
    _compile_fwd(x2, w2, b2, 1e-5)
    assert len(counting_compile) == 3
    _compile_fwd(x, w, b, 1e-5, store_stats=False)
    _compile_fwd(x, w, b, 1e-5, abi="tensor")
    x3, w3, b3 = _fwd_args(n=256, dtype=torch.bfloat16)
    _compile_fwd(x3, w3, b3, 1e-5)
    assert len(counting_compile) == 6
    assert {c[2] for c in counting_compile} == {"gfx942"}
    _compile_fwd(x, w, b, 1e-5, arch="gfx950")                   # the arch is part of the key
    assert len(counting_compile) == 7 and counting_compile[-1][2] == "gfx950"


def test_misaligned_storage_offset_gets_its_own_narrow_variant(counting_compile):
    x, w, b = _fwd_args(m=4, n=257 * 0 + 256)
    base = torch.randn(4 * 256 + 1)
    x_off = base[1:].view(4, 256)                               # 4-byte offset: not 16-byte aligned
    assert x_off.storage_offset() == 1
    _, plan_a = _compile_fwd(x, w, b, 1e-5)
    _, plan_b = _compile_fwd(x_off, w, b, 1e-5)
    assert plan_a.vec == 4 and plan_b.vec == 1
    assert len(counting_compile) == 2


def test_pointer_compile_uses_null_placeholders(counting_compile):
    x, w, b = _fwd_args(n=128)
    _compile_fwd(x, w, b, 1e-5)
    launcher, nargs, _ = counting_compile[0]
    assert nargs == 8                                           # 6 pointers + m + stream
    from lnbench.flydsl.geometry import row_plan
    args = launch.fwd_compile_args(row_plan(128, "f32"), True, "pointer")
    assert all(not isinstance(a, torch.Tensor) for a in args)
    assert args[-2:] == [1, None]


def test_align_elems():
    t = torch.empty(64)
    assert launch.align_elems(t) == 4
    assert launch.align_elems(torch.empty(65)[1:]) == 1
    assert launch.align_elems(torch.empty(66, dtype=torch.bfloat16)[2:]) == 2


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5), (2, 1, 4, 5), (0, 5)])
def test_reshape_helpers_round_trip(shape):
    x = torch.randn(shape)
    x2, orig = to_2d(x)
    assert x2.dim() == 2 and x2.shape[1] == 5 and x2.is_contiguous()
    assert x2.shape[0] == (x.numel() // 5)
    assert torch.equal(from_2d(x2, orig), x)


def test_reshape_of_noncontiguous_input_is_contiguous():
    x = torch.randn(4, 6, 5).transpose(0, 1)
    x2, orig = to_2d(x)
    assert x2.is_contiguous() and torch.equal(from_2d(x2, orig), x)


def test_scalar_input_is_refused():
    with pytest.raises(ContractError, match="x"):
        to_2d(torch.tensor(1.0))


# ---------------------------------------------------------------- emulated device (fake emulator)

FWD_BUFFERS = ("x", "weight", "bias", "y", "mean", "rstd")
BWD_BUFFERS = ("x", "dy", "weight", "mean", "rstd", "dx", "wsg", "wsb", "acc_g", "acc_b")


def _ref_forward(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, eps)


@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_cpu_tensors_run_on_the_active_emulated_device(fake_emulator, abi):
    fake_emulator.activate("gfx950")
    x, w, b = _fwd_args(m=8, n=64)
    y, mean, rstd = launch.forward(x, w, b, 1e-5, abi=abi)
    assert fake_emulator.compiled == [("fwd", "gfx950")]
    assert fake_emulator.launches == [("fwd", FWD_BUFFERS)]      # inside a scope, stream None, same buffers
    assert torch.allclose(y, _ref_forward(x, w, b), atol=1e-5)
    y2, m2, r2 = launch.forward(x, w, b, 1e-5, store_stats=False, abi=abi)
    assert fake_emulator.launches[-1] == ("fwd", FWD_BUFFERS[:4]) and m2 is None and r2 is None


@pytest.mark.parametrize("strategy,kernels", [("deterministic", ["bwd", "reduce"]), ("atomic", ["bwd"])])
@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_emulated_backward_launches_name_every_buffer(fake_emulator, strategy, kernels, abi):
    fake_emulator.activate("gfx942")
    x, w, b = _fwd_args(m=8, n=64)
    dy = torch.randn_like(x)
    _, mean, rstd = launch.forward(x, w, b, 1e-5)
    dx, dw, db = launch.backward(dy, x, w, mean, rstd, abi=abi, dgamma_strategy=strategy)
    launched = fake_emulator.launches[1:]
    assert [k for k, _ in launched] == kernels
    assert launched[0][1] == BWD_BUFFERS
    if strategy == "deterministic":
        assert launched[1][1] == ("wsg", "wsb", "dweight", "dbias")
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    _ref_forward(xr, wr, br).backward(dy)
    for got, ref in ((dx, xr.grad), (dw, wr.grad), (db, br.grad)):
        assert torch.allclose(got, ref, atol=1e-4)


def test_pointer_backward_keeps_workspace_alive(fake_emulator, monkeypatch):
    """The Pointer-ABI launch passes bare ints: the closure must own the workspace behind them."""
    fake_emulator.activate("gfx942")
    created = []
    real_empty = torch.empty

    def tracking_empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        created.append(weakref.ref(t))
        return t

    x, w, _ = _fwd_args(m=8, n=64)
    dy, mean, rstd = torch.randn_like(x), torch.zeros(8), torch.ones(8)
    monkeypatch.setattr(torch, "empty", tracking_empty)
    call, _ = launch._backward_call(dy, x, w, mean, rstd, "pointer", "deterministic")
    monkeypatch.setattr(torch, "empty", real_empty)
    gc.collect()
    assert len(created) == 2 and all(ref() is not None for ref in created)   # wsg, wsb still alive
    assert {"wsg", "wsb"} <= set(call.buffers)
    call()                                                   # the fake checks pointers == scope buffers
    del call
    gc.collect()
    assert all(ref() is None for ref in created)


@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_direct_calls_own_every_buffer_they_pass(fake_emulator, abi):
    fake_emulator.activate("gfx942")

    def make_calls():
        x, w, b = _fwd_args(m=8, n=64)
        dy, mean, rstd = torch.randn_like(x), torch.zeros(8), torch.ones(8)
        refs = [weakref.ref(t) for t in (x, w, b, dy, mean, rstd)]
        return (launch.direct_forward_call(x, w, b, 1e-5, True, abi),
                launch.direct_backward_call(dy, x, w, mean, rstd, abi)), refs

    (fwd, bwd), refs = make_calls()
    gc.collect()
    assert all(ref() is not None for ref in refs)            # inputs too: only the closures hold them now
    fwd()
    bwd()
    assert set(fwd.buffers) == set(FWD_BUFFERS)
    assert set(BWD_BUFFERS) | {"dweight", "dbias"} == set(bwd.buffers)


def test_emulator_fault_surfaces_from_the_wrapper(fake_emulator):
    fake_emulator.activate("gfx942")
    fake_emulator.fault_if = lambda buffers: True
    x, w, b = _fwd_args()
    with pytest.raises(EmulatorFault, match="planted fault"):
        launch.forward(x, w, b, 1e-5)
