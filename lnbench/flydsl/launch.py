"""Host wrappers: contracts, compile cache, and launches of the FlyDSL LayerNorm kernels.

Cache key: (kind, N, dtype, store_stats, eps, ABI, dγ strategy, vector width, arch, device index).
Compiles and launches happen under `torch.cuda.device(x.device)` on the current stream. Pointer-ABI
compile misses get typed null placeholders (compiling with live pointers would launch once); hot
calls pass raw data_ptr() ints, so nonzero storage offsets just work.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from lnbench.config import DTYPES
from lnbench.errors import ContractError
from lnbench.flydsl import config
from lnbench.flydsl.toolkit import compile_env, has_rocm_gpu
from lnbench.metadata import device_arch

ABIS = ("pointer", "tensor")
STRATEGIES = ("deterministic", "atomic")

_cache: dict[tuple, Any] = {}


class NeedsRocmGpu(RuntimeError):
    """Raised when a kernel would have to execute without a ROCm GPU."""


def require_rocm_gpu() -> None:
    if not has_rocm_gpu():
        raise NeedsRocmGpu("executing the FlyDSL LayerNorm kernels needs a ROCm GPU "
                           "(this machine can only compile them: `lnbench inspect`)")


# ---------------------------------------------------------------- contracts

def _check_abi(abi: str) -> None:
    if abi not in ABIS:
        raise ContractError(f"abi must be one of {ABIS}, got {abi!r}")


def check_forward_args(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> None:
    """The contracts raw pointers no longer carry; each failure names its argument."""
    if x.dim() != 2:
        raise ContractError(f"x must be 2-D (M, N), got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ContractError("x must be contiguous")
    if x.dtype not in DTYPES.values():
        raise ContractError(f"x dtype {x.dtype} unsupported (float32, float16, bfloat16)")
    n = x.shape[1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t.dtype != x.dtype:
            raise ContractError(f"{name} dtype {t.dtype} differs from x dtype {x.dtype}")
        if t.device != x.device:
            raise ContractError(f"{name} is on {t.device}, x on {x.device}")
        if t.dim() != 1 or t.shape[0] != n:
            raise ContractError(f"{name} must be 1-D of length N={n}, got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ContractError(f"{name} must be contiguous")


def check_backward_args(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                        rstd: torch.Tensor) -> None:
    if dy.shape != x.shape:
        raise ContractError(f"dy shape {tuple(dy.shape)} differs from x shape {tuple(x.shape)}")
    if not dy.is_contiguous():
        raise ContractError("dy must be contiguous")
    if dy.dtype != x.dtype:
        raise ContractError(f"dy dtype {dy.dtype} differs from x dtype {x.dtype}")
    if dy.device != x.device:
        raise ContractError(f"dy is on {dy.device}, x on {x.device}")
    check_forward_args(x, weight, weight)
    m = x.shape[0]
    for name, t in (("mean", mean), ("rstd", rstd)):
        if t.dtype != torch.float32:
            raise ContractError(f"{name} must be float32, got {t.dtype}")
        if tuple(t.shape) != (m,):
            raise ContractError(f"{name} must have shape (M,)=({m},), got {tuple(t.shape)}")
        if t.device != x.device:
            raise ContractError(f"{name} is on {t.device}, x on {x.device}")
        if not t.is_contiguous():
            raise ContractError(f"{name} must be contiguous")


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ContractError(f"dgamma_strategy must be one of {STRATEGIES}, got {strategy!r}")


# ---------------------------------------------------------------- compile cache

def align_elems(*tensors: torch.Tensor) -> int:
    """Largest power-of-two element alignment (<= 16 bytes) shared by every base address."""
    esize = tensors[0].element_size()
    worst = 16
    for t in tensors:
        p = t.data_ptr()
        worst = min(worst, (p & -p) if p else 16)
    return max(1, worst // esize)


def _flyc():
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    return flyc, fx


def _do_compile(launcher: Callable, args: list, arch: str) -> Any:
    """flyc.compile under the compile env for `arch`, failing on any printed `error:`."""
    from lnbench.flydsl.guard import guarded_compile
    flyc, _ = _flyc()
    env = compile_env(arch)
    env.pop("COMPILE_ONLY", None)       # on a GPU we want the callable back
    return guarded_compile(flyc.compile, launcher, *args, env=env)


def _cached(key: tuple, build: Callable[[], tuple[Callable, list]], arch: str) -> Any:
    fn = _cache.get(key)
    if fn is None:
        launcher, args = build()
        fn = _do_compile(launcher, args, arch)
        _cache[key] = fn
    return fn


def cache_clear() -> None:
    _cache.clear()


def placeholders(dtypes: list[str]) -> list:
    """Typed null pointers (compile placeholders: nothing is launched)."""
    flyc, fx = _flyc()
    table = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}
    return [flyc.from_c_void_p(table[d], None) for d in dtypes]


def fwd_compile_args(plan: config.RowPlan, store_stats: bool, abi: str, tensors: list | None = None) -> list:
    """Launcher arguments for a forward compile (placeholders, or tensors for the Tensor ABI)."""
    dt = plan.dtype
    if abi == "pointer":
        return placeholders([dt] * 4 + (["f32", "f32"] if store_stats else [])) + [1, None]
    if tensors is None:
        x = torch.empty(2, plan.n, dtype=DTYPES[dt])
        w = torch.empty(plan.n, dtype=DTYPES[dt])
        tensors = [x, w, w, x] + ([torch.empty(2), torch.empty(2)] if store_stats else [])
    return list(tensors) + [1, None]


def bwd_compile_args(plan: config.RowPlan, abi: str, tensors: list | None = None) -> list:
    dt = plan.dtype
    if abi == "pointer":
        return placeholders([dt, dt, dt, "f32", "f32", dt, "f32", "f32", "f32", "f32"]) + [1, 1, None]
    if tensors is None:
        x = torch.empty(2, plan.n, dtype=DTYPES[dt])
        w = torch.empty(plan.n, dtype=DTYPES[dt])
        s = torch.empty(2)
        ws = torch.empty(2, plan.n)
        a = torch.empty(plan.n)
        tensors = [x, x, w, s, s, x, ws, ws, a, a]
    return list(tensors) + [1, 1, None]


def reduce_compile_args(n: int, wdtype: str, abi: str, tensors: list | None = None) -> list:
    if abi == "pointer":
        return placeholders(["f32", "f32", wdtype, wdtype]) + [1, None]
    if tensors is None:
        ws = torch.empty(2, n)
        w = torch.empty(n, dtype=DTYPES[wdtype])
        tensors = [ws, ws, w, w]
    return list(tensors) + [1, None]


def build_fwd_launcher(plan: config.RowPlan, eps: float, store_stats: bool, abi: str) -> Callable:
    from lnbench.flydsl.kernels_fwd import build_fwd
    return build_fwd(plan, eps, store_stats, abi)


def build_bwd_launchers(plan: config.RowPlan, strategy: str, abi: str) -> tuple[Callable, Callable | None]:
    from lnbench.flydsl.kernels_bwd import build_bwd, build_reduce
    main = build_bwd(plan, strategy, abi)
    red = build_reduce(config.reduce_plan(plan.n), plan.dtype, abi) if strategy == "deterministic" else None
    return main, red


@contextlib.contextmanager
def _on_device(device: torch.device):
    with torch.cuda.device(device):
        yield torch.cuda.current_stream(device)


def _ptrs_or_tensors(abi: str, tensors: list[torch.Tensor]) -> list:
    return [t.data_ptr() for t in tensors] if abi == "pointer" else list(tensors)


# ---------------------------------------------------------------- forward

def _fwd_plan(x: torch.Tensor, out: list[torch.Tensor]) -> config.RowPlan:
    try:
        return config.row_plan(x.shape[1], x.dtype, "fwd", align_elems(x, *out))
    except ValueError as exc:
        raise ContractError(f"x: {exc}") from None


def fwd_compiled(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor, eps: float,
                 store_stats: bool, abi: str, stats: list[torch.Tensor]) -> tuple[Any, config.RowPlan]:
    """The compiled forward for these tensors (compiling on a miss)."""
    plan = _fwd_plan(x, [weight, bias, y])
    arch = device_arch(x.device)
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device() if x.is_cuda else -1
    key = ("fwd", plan.n, plan.dtype, bool(store_stats), float(eps), abi, "", plan.vec, arch, dev)
    tensors = [x, weight, bias, y] + (stats if store_stats else [])
    fn = _cached(key, lambda: (build_fwd_launcher(plan, eps, store_stats, abi),
                               fwd_compile_args(plan, store_stats, abi, tensors if abi == "tensor" else None)),
                 arch)
    return fn, plan


def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, store_stats: bool = True,
            abi: str = "pointer") -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """LayerNorm forward of a 2-D contiguous x: (y, mean, rstd) with fp32 (M,) stats (None when not stored)."""
    _check_abi(abi)
    check_forward_args(x, weight, bias)
    m = x.shape[0]
    y = torch.empty_like(x)
    mean = torch.empty(m, device=x.device, dtype=torch.float32) if store_stats else None
    rstd = torch.empty(m, device=x.device, dtype=torch.float32) if store_stats else None
    if m == 0:
        return y, mean, rstd
    require_rocm_gpu()
    stats = [mean, rstd] if store_stats else []
    with _on_device(x.device) as stream:
        fn, _ = fwd_compiled(x, weight, bias, y, eps, store_stats, abi, stats)
        fn(*_ptrs_or_tensors(abi, [x, weight, bias, y] + stats), m, stream)
    return y, mean, rstd


def direct_forward_call(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                        store_stats: bool, abi: str) -> Callable[[], None]:
    """Preallocate outputs and return a zero-argument closure that calls the compiled forward
    directly on the current stream (raw ints for the Pointer ABI, tensors for the Tensor ABI)."""
    _check_abi(abi)
    check_forward_args(x, weight, bias)
    require_rocm_gpu()
    m = x.shape[0]
    y = torch.empty_like(x)
    stats = ([torch.empty(m, device=x.device), torch.empty(m, device=x.device)] if store_stats else [])
    with _on_device(x.device):
        fn, _ = fwd_compiled(x, weight, bias, y, eps, store_stats, abi, stats)
    args = _ptrs_or_tensors(abi, [x, weight, bias, y] + stats) + [m]
    stream = torch.cuda.current_stream(x.device)

    def call() -> None:
        fn(*args, stream)

    call.outputs = (y, *stats)  # type: ignore[attr-defined]  # keeps the buffers alive
    return call


# ---------------------------------------------------------------- backward

def bwd_compiled(plan: config.RowPlan, strategy: str, abi: str, arch: str, dev: int,
                 tensors: list | None, red_tensors: list | None) -> tuple[Any, Any]:
    key = ("bwd", plan.n, plan.dtype, False, 0.0, abi, strategy, plan.vec, arch, dev)
    main = _cached(key, lambda: (build_bwd_launchers(plan, strategy, abi)[0],
                                 bwd_compile_args(plan, abi, tensors)), arch)
    red = None
    if strategy == "deterministic":
        rkey = ("bwd-reduce", plan.n, plan.dtype, False, 0.0, abi, strategy, 0, arch, dev)
        red = _cached(rkey, lambda: (build_bwd_launchers(plan, strategy, abi)[1],
                                     reduce_compile_args(plan.n, plan.dtype, abi, red_tensors)), arch)
    return main, red


def _backward_call(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor, abi: str, dgamma_strategy: str
                   ) -> tuple[Callable[[], None] | None, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Check, allocate outputs and workspace, compile; return (launch closure, (dx, dweight, dbias)).

    The closure launches on the current stream of x's device. For the atomic strategy it zeroes the
    fp32 accumulators right before the main kernel (a Tensor-ABI compile may have run it once) and
    casts them into dweight/dbias after; that zeroing is part of every call. None when M == 0.
    """
    _check_abi(abi)
    check_strategy(dgamma_strategy)
    check_backward_args(dy, x, weight, mean, rstd)
    m, n = x.shape
    dx = torch.empty_like(x)
    if m == 0:
        return None, (dx, torch.zeros_like(weight), torch.zeros_like(weight))
    require_rocm_gpu()
    try:
        plan = config.row_plan(n, x.dtype, "bwd", align_elems(x, dy, dx, weight))
    except ValueError as exc:
        raise ContractError(f"x: {exc}") from None
    arch = device_arch(x.device)
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    p = config.bwd_programs(m, plan, arch)
    f32 = dict(device=x.device, dtype=torch.float32)
    uses_ws = dgamma_strategy == "deterministic" or not plan.acc_in_registers
    ws_rows = p * plan.rows_per_block if uses_ws else 1
    wsg, wsb = torch.empty(ws_rows, n, **f32), torch.empty(ws_rows, n, **f32)
    acc_g, acc_b = torch.zeros(n, **f32), torch.zeros(n, **f32)
    dgamma = torch.empty_like(weight)
    dbeta = torch.empty_like(weight)
    main_t = [x, dy, weight, mean, rstd, dx, wsg, wsb, acc_g, acc_b]
    red_t = [wsg, wsb, dgamma, dbeta]
    with _on_device(x.device):
        main, red = bwd_compiled(plan, dgamma_strategy, abi, arch, dev,
                                 main_t if abi == "tensor" else None, red_t if abi == "tensor" else None)
    main_args = _ptrs_or_tensors(abi, main_t) + [m, p]
    red_args = _ptrs_or_tensors(abi, red_t) + [ws_rows]
    stream = torch.cuda.current_stream(x.device)

    def call() -> None:
        if dgamma_strategy == "atomic":
            acc_g.zero_()
            acc_b.zero_()
        main(*main_args, stream)
        if red is not None:
            red(*red_args, stream)
        if dgamma_strategy == "atomic":
            dgamma.copy_(acc_g)
            dbeta.copy_(acc_b)

    return call, (dx, dgamma, dbeta)


def backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
             abi: str = "pointer", dgamma_strategy: str = "deterministic"
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias); dweight/dbias accumulate in fp32 and come back in weight's dtype."""
    call, outputs = _backward_call(dy, x, weight, mean, rstd, abi, dgamma_strategy)
    if call is not None:
        with _on_device(x.device):
            call()
    return outputs


def direct_backward_call(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                         rstd: torch.Tensor, abi: str, dgamma_strategy: str = "deterministic") -> Callable[[], None]:
    """Like direct_forward_call for the backward: outputs and workspace preallocated once."""
    call, outputs = _backward_call(dy, x, weight, mean, rstd, abi, dgamma_strategy)
    if call is None:
        raise ContractError("x: direct_backward_call needs at least one row")
    call.outputs = outputs  # type: ignore[attr-defined]  # keeps the buffers alive
    return call
