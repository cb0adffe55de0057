"""Execution tests of the FlyDSL kernels: on a ROCm GPU, else on the emulated device (tests/conftest.py).

`kernel_device` is where they run (the values of the whole kernel matrix, on every emulated arch too, are
tests/test_emu_matrix.py's). Tensors live on dev.torch_device (the CPU for the emulator). A few of the largest
inputs are smaller under emulation (`_sized`), where every kernel instruction step costs host time.
"""
import pytest
import torch

from lnbench.flydsl.toolkit import has_rocm_gpu

pytestmark = [pytest.mark.rocm]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _ref(x, w, b, eps, dy=None):
    xd, wd, bd = x.double(), w.double(), b.double()
    mean = xd.mean(-1)
    var = ((xd - mean[:, None]) ** 2).mean(-1)
    rstd = (var + eps).rsqrt()
    xhat = (xd - mean[:, None]) * rstd[:, None]
    y = xhat * wd + bd
    if dy is None:
        return y, mean, rstd
    dyd = dy.double()
    wdy = dyd * wd
    c1 = wdy.mean(-1, keepdim=True)
    c2 = (wdy * xhat).mean(-1, keepdim=True)
    dx = (wdy - c1 - xhat * c2) * rstd[:, None]
    return y, mean, rstd, dx, (dyd * xhat).sum(0), dyd.sum(0)


def _sized(dev, on_gpu, emulated):
    return emulated if dev.emulated else on_gpu


def _inputs(m, n, dtype, dev, offset=0.0):
    device = dev.torch_device
    g = torch.Generator(device="cpu").manual_seed(m * 7919 + n)
    x = (torch.randn(m, n, generator=g) + offset).to(device=device, dtype=dtype)
    w = (torch.rand(n, generator=g) + 0.5).to(device=device, dtype=dtype)
    b = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    dy = torch.randn(m, n, generator=g).to(device=device, dtype=dtype)
    return x, w, b, dy


# The values of every launch path x dtype x ABI x variant (fwd, fwd-nostats, bwd deterministic and atomic) against
# fp64, output dtypes included, are tests/test_emu_matrix.py::test_kernel_matrix_executes_correctly (its SHAPES and
# F16_SHAPES say why each shape), on `each_kernel_device` (the ROCm GPU, or both emulated arches).


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [1e3, 1e4])
def test_large_mean_rows_are_exact(dtype, offset, kernel_device):
    from lnbench.flydsl import launch
    x, w, b, _ = _inputs(64, 1000, torch.float32, kernel_device, offset=offset)
    x = x.to(dtype)
    _, mean, rstd = launch.forward(x, w.to(dtype), b.to(dtype), 1e-5)
    _, mr, rr = _ref(x, w.to(dtype), b.to(dtype), 1e-5)
    assert torch.allclose(rstd.double(), rr, rtol=1e-3), "variance cancellation"
    assert torch.allclose(mean.double(), mr, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [7, 14, 15, 1000])
def test_rows_of_one_value_near_1e3_have_no_variance(dtype, n, kernel_device):
    """A 16-bit row of equal values near 1e3 (verify's offset rows rounded to bf16) has variance 0 exactly, so rstd
    is 1/sqrt(eps), which eps makes sensitive: a one-ulp error in the row's Σd once gave var = -1.1e-9 and rstd
    316.246 at N = 7, 14 and 15 (one lane per row), 130x verify's bar."""
    from lnbench.flydsl import launch
    values = torch.tensor([996.0, 1000.0, 1004.0, 1008.0, 1012.0])
    x = values[:, None].expand(5, n).contiguous().to(device=kernel_device.torch_device, dtype=dtype)
    w = torch.ones(n, device=kernel_device.torch_device, dtype=dtype)
    _, mean, rstd = launch.forward(x, w, torch.zeros_like(w), 1e-5)
    assert torch.equal(mean.cpu(), x[:, 0].float().cpu())
    assert torch.allclose(rstd.double().cpu(), torch.full((5,), 1e-5 ** -0.5, dtype=torch.float64), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_deterministic_strategy_is_bitwise_reproducible(dtype, kernel_device):
    from lnbench.flydsl import launch
    # emulated: 128 rows (16 programs, 16 partial rows to reduce), and one call again: the emulator runs a launch's
    # waves in one order, so what a second call can differ by is state left from the first (workspace, accumulators)
    x, w, b, dy = _inputs(_sized(kernel_device, 4096, 128), 1024, dtype, kernel_device)
    _, mean, rstd = launch.forward(x, w, b, 1e-5)
    first = launch.backward(dy, x, w, mean, rstd)
    for _ in range(_sized(kernel_device, 5, 1)):
        again = launch.backward(dy, x, w, mean, rstd)
        for a, c in zip(first, again):
            assert torch.equal(a, c)


@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_backward_of_several_rows_per_block_writes_one_partial_row_per_program(abi, kernel_device):
    """N = 512 bf16 (4 rows a block) with enough programs that the reduce runs whole steps of its row splits
    and a ragged tail: values against fp64, ONE fp32 partial row per program (the block's row slots added in
    LDS), and the same bits again on a second call."""
    from lnbench.flydsl import geometry, launch
    m, n = 4400, 512
    x, w, b, dy = _inputs(m, n, torch.bfloat16, kernel_device)
    _, mean, rstd = launch.forward(x, w, b, 1e-5)
    call, (dx, dw, db) = launch._backward_call(dy, x, w, mean, rstd, abi, "deterministic")
    with kernel_device.guard():
        call()
    plan = geometry.row_plan(n, torch.bfloat16, "bwd")
    programs = geometry.bwd_programs(m, plan, kernel_device.arch)
    assert plan.rows_per_block > 1 and programs > geometry.reduce_plan(n).splits
    assert programs % geometry.reduce_plan(n).splits != 0
    assert call.buffers["wsg"].shape == (programs, n)
    _, _, _, dxr, dwr, dbr = _ref(x, w, b, 1e-5, dy)
    assert (dx.double() - dxr).abs().max().item() <= 6e-2 * max(1.0, dxr.abs().max().item())
    assert (dw.double() - dwr).abs().max().item() <= 6e-2 * m ** 0.5 * max(1.0, dwr.abs().max().item())
    assert (db.double() - dbr).abs().max().item() <= 6e-2 * m ** 0.5 * max(1.0, dbr.abs().max().item())
    first = [t.clone() for t in (dx, dw, db)]
    with kernel_device.guard():
        call()
    assert all(torch.equal(a, c) for a, c in zip(first, (dx, dw, db)))


@pytest.mark.parametrize("store_stats", [True, False])
def test_both_abis_bitwise_equal_in_forward(store_stats, kernel_device):
    from lnbench.flydsl import launch
    for m, n in [(33, 257), (16, 4096), (300, 64)]:
        x, w, b, _ = _inputs(m, n, torch.bfloat16, kernel_device)
        p = launch.forward(x, w, b, 1e-5, store_stats=store_stats, abi="pointer")
        t = launch.forward(x, w, b, 1e-5, store_stats=store_stats, abi="tensor")
        assert torch.equal(p[0], t[0])
        if store_stats:
            assert torch.equal(p[1], t[1]) and torch.equal(p[2], t[2])
        else:
            assert p[1] is None and t[1] is None


def test_autograd_3d_input_matches_torch(kernel_device):
    import lnbench
    x, w, b, _ = _inputs(6 * 5, 512, torch.float32, kernel_device)
    x = x.reshape(6, 5, 512).requires_grad_()
    w.requires_grad_()
    b.requires_grad_()
    y = lnbench.layernorm(x, w, b, eps=1e-5)
    assert y.shape == x.shape
    g = torch.randn_like(y)
    y.backward(g)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = torch.nn.functional.layer_norm(xr, (512,), wr, br, 1e-5)
    yr.backward(g)
    assert torch.allclose(y, yr, atol=1e-5)
    for a, r in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        assert torch.allclose(a, r, atol=1e-4, rtol=1e-4)


def test_eps_is_honoured(kernel_device):
    from lnbench.flydsl import launch
    device = kernel_device.torch_device
    x = torch.full((4, 64), 3.0, device=device)
    x[:, ::2] += 1e-3
    w, b = torch.ones(64, device=device), torch.zeros(64, device=device)
    _, _, r_small = launch.forward(x, w, b, 1e-8)
    _, _, r_big = launch.forward(x, w, b, 1.0)
    var = 0.25e-6
    assert torch.allclose(r_big.double(), torch.full((4,), (var + 1.0) ** -0.5, device=device, dtype=torch.float64),
                          rtol=1e-5)
    assert (r_small > 100 * r_big).all()


def test_storage_offsets(kernel_device):
    from lnbench.flydsl import launch
    device = kernel_device.torch_device
    base = torch.randn(1 + 16 * 1000, device=device)
    x = base[1:].view(16, 1000)                       # 4-byte offset: narrow variant
    wbase = torch.randn(1003, device=device)
    w = wbase[3:]
    b = torch.randn(1000, device=device)
    y, mean, rstd = launch.forward(x, w, b, 1e-5)
    yr, _, _ = _ref(x, w, b, 1e-5)
    assert torch.allclose(y.double(), yr, atol=1e-5)
    dy = torch.randn_like(x)
    dx, dw, db = launch.backward(dy, x, w, mean, rstd)
    _, _, _, dxr, dwr, dbr = _ref(x, w, b, 1e-5, dy)
    assert torch.allclose(dx.double(), dxr, atol=1e-4) and torch.allclose(dw.double(), dwr, atol=1e-3)


@pytest.fixture
def launched_streams(monkeypatch):
    """The stream argument of every compiled-kernel call (real compiles, wrapped). The test compiles into a cache of
    its own: the process's compiled kernels are back for later tests, not compiled again."""
    from lnbench.flydsl import launch
    seen, compile_ = [], launch._do_compile

    def recording(*args):
        fn = compile_(*args)
        return lambda *call_args: (seen.append(call_args[-1]), fn(*call_args))[1]

    monkeypatch.setattr(launch, "_cache", {})
    monkeypatch.setattr(launch, "_do_compile", recording)
    yield seen


def test_launches_go_on_the_current_stream(kernel_device, launched_streams):
    """A GPU launches on torch's current stream, a non-default one included; the emulator has no
    streams and must get the null stream (None)."""
    from lnbench.flydsl import launch
    x, w, b, _ = _inputs(_sized(kernel_device, 256, 4), 2048, torch.bfloat16, kernel_device)
    ref = launch.forward(x, w, b, 1e-5)[0]
    if kernel_device.is_gpu:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = launch.forward(x, w, b, 1e-5)[0]
        s.synchronize()
        assert launched_streams[-1] == s
    else:
        y = launch.forward(x, w, b, 1e-5)[0]
        assert launched_streams == [None, None]
    assert torch.equal(y, ref)


def test_direct_forward_call_matches_forward(kernel_device):
    from lnbench.flydsl import launch
    x, w, b, _ = _inputs(_sized(kernel_device, 64, 4), 4096, torch.bfloat16, kernel_device)
    for abi in ("pointer", "tensor"):
        call = launch.direct_forward_call(x, w, b, 1e-5, True, abi)
        call()
        kernel_device.synchronize()
        assert torch.equal(call.outputs[0], launch.forward(x, w, b, 1e-5, abi=abi)[0])


def test_direct_backward_call_matches_backward(kernel_device):
    from lnbench.flydsl import launch
    x, w, b, dy = _inputs(_sized(kernel_device, 64, 16), 1024, torch.bfloat16, kernel_device)
    _, mean, rstd = launch.forward(x, w, b, 1e-5)
    for abi in ("pointer", "tensor"):
        call = launch.direct_backward_call(dy, x, w, mean, rstd, abi)
        call()
        kernel_device.synchronize()
        for got, want in zip(call.outputs, launch.backward(dy, x, w, mean, rstd, abi=abi)):
            assert torch.equal(got, want)


@pytest.mark.skipif(not has_rocm_gpu() or torch.cuda.device_count() < 2, reason="needs two ROCm GPUs")
def test_two_gpus():
    from lnbench.run.device import resolve_device
    from lnbench.flydsl import launch
    outs = []
    for dev in ("cuda:0", "cuda:1"):
        x, w, b, _ = _inputs(32, 1024, torch.float32, resolve_device(dev))
        y, _, _ = launch.forward(x, w, b, 1e-5)
        assert y.device == torch.device(dev)
        outs.append(y.cpu())
    assert torch.equal(outs[0], outs[1])


def test_partial_reduce_writes_lds_without_bank_conflicts():
    """The reduce's row splits store their sums to LDS lane by lane, and the first combine level's ds_read2
    pairs land in 32 banks (value planes 2·cols dwords apart mod 32; the old layout collided 4 ways:
    4,096 conflict cycles at N = 4096)."""
    from lnbench.flydsl.inspect import execute_variant
    kernels = execute_variant("bwd", "bf16", 64, 4096, "pointer", "gfx950", seed=3)
    reduce = [k for k in kernels if "reduce" in k.kernel_name]
    assert len(reduce) == 1 and reduce[0].lds_bank_cycles > 0 and reduce[0].lds_conflict_cycles == 0


@pytest.mark.parametrize("op,n", [("bwd", 16384), ("bwd", 5120), ("fwd", 16384), ("fwd", 12288)])
def test_block_reduction_reads_lds_without_bank_conflicts(op, n):
    """gfx950 sums a multi-wave row by 16-lane groups, 4 LDS partials per wave: each lane reads its partials
    column by column, columns 16 banks apart (two reads the compiler pairs into one ds_read2 collided without
    the padding: 262,144 conflict cycles at 1024x16384), and a lane past the last partial reads a written slot
    no live lane's read collides with (N = 5120 and 12288: 10 and 12 waves, a partial column)."""
    from lnbench.flydsl.inspect import execute_variant
    kernels = execute_variant(op, "bf16", 4, n, "pointer", "gfx950", seed=3)
    main = [k for k in kernels if "reduce" not in k.kernel_name]
    assert len(main) == 1 and main[0].lds_bank_cycles > 0 and main[0].lds_conflict_cycles == 0
