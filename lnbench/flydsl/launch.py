"""Host wrappers: contracts, compile cache, and launches of the FlyDSL LayerNorm kernels.

Cache key: (kind, N, dtype, store_stats, eps, ABI, dγ strategy, vector width, arch, device index).
The tensors' Device (lnbench.run.device) decides the rest: a ROCm GPU compiles for its arch and launches under
its device guard on the current stream; CPU tensors run on the emulated device when one is active
(stream None, every launch inside the emulator's launch scope). Pointer-ABI compile misses get typed null
placeholders (compiling with live pointers would launch once); hot calls pass raw data_ptr() ints, so
nonzero storage offsets just work, and every launch holds the tensors behind those ints (bind_kernel).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Collection, Protocol, cast

import torch

from lnbench.constants import DTYPES, STRATEGIES
from lnbench.run.device import Device, device_of
from lnbench.errors import ContractError
from lnbench.flydsl import bwd_plan, geometry
from lnbench.flydsl.toolkit import compile_env

ABIS = ("pointer", "tensor")

_cache: dict[tuple, Any] = {}


class NeedsRocmGpu(RuntimeError):
    """Raised when a kernel would have to execute without a ROCm GPU."""


def kernel_device(x: torch.Tensor) -> Device:
    """The device that executes kernels on x's memory: its ROCm GPU, or the active emulated device."""
    dev = device_of(x)
    if not dev.launches_flydsl:
        raise NeedsRocmGpu(f"executing the FlyDSL LayerNorm kernels needs a ROCm GPU (or --device emu); "
                           f"tensors on {dev.name} can only be compiled for (`lnbench inspect`)")
    return dev


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


def _do_compile(launcher: Callable, args: list, arch: str, identity: tuple | None = None) -> Any:
    """flyc.compile under the compile env for `arch`, failing on any printed `error:`. With `identity` (lnbench's
    own launchers: what their build depends on), without FlyDSL's trace where an earlier process traced the same
    (lnbench.flydsl.trace_reuse)."""
    from lnbench.flydsl.guard import compile_environment, guarded_compile
    flyc, _ = _flyc()
    env = compile_env(arch)
    env.pop("COMPILE_ONLY", None)       # on a GPU we want the callable back
    if identity is None:
        return guarded_compile(flyc.compile, launcher, *args, env=env)
    from lnbench.flydsl import compile_log, trace_reuse
    start = time.monotonic()
    with compile_environment(env):
        key, loaded = trace_reuse.lookup(launcher, identity, tuple(args))
    if loaded is not None:              # a warm compile without the trace (nor the guard's count of cached kernels)
        compile_log.note(time.monotonic() - start, False)
        return loaded
    compiled = guarded_compile(flyc.compile, launcher, *args, env=env)
    if key is not None:
        with compile_environment(env):
            trace_reuse.remember(launcher, key)
    return compiled


def _cached(key: tuple, build: Callable[[], tuple[Callable, list]], arch: str, identity: tuple | None = None) -> Any:
    fn = _cache.get(key)
    if fn is None:
        launcher, args = build()
        fn = _do_compile(launcher, args, arch, identity)
        _cache[key] = fn
    return fn


def placeholders(dtypes: list[str]) -> list:
    """Typed null pointers (compile placeholders: nothing is launched)."""
    flyc, fx = _flyc()
    table = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}
    return [flyc.from_c_void_p(table[d], None) for d in dtypes]


def fwd_compile_args(plan: geometry.RowPlan, store_stats: bool, abi: str, tensors: list | None = None) -> list:
    """Launcher arguments for a forward compile (placeholders, or tensors for the Tensor ABI)."""
    dt = plan.dtype
    if abi == "pointer":
        return placeholders([dt] * 4 + (["f32", "f32"] if store_stats else [])) + [1, None]
    if tensors is None:
        x = torch.empty(2, plan.n, dtype=DTYPES[dt])
        w = torch.empty(plan.n, dtype=DTYPES[dt])
        tensors = [x, w, w, x] + ([torch.empty(2), torch.empty(2)] if store_stats else [])
    return list(tensors) + [1, None]


def bwd_compile_args(plan: geometry.RowPlan, abi: str, tensors: list | None = None) -> list:
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


def build_fwd_launcher(plan: geometry.RowPlan, eps: float, store_stats: bool, abi: str) -> Callable:
    """lnbench's forward launcher: the builder kernel sources' contract exposes it too (lnbench.flydsl.builders)."""
    from lnbench.flydsl.builders import forward_launcher
    return forward_launcher(plan, eps, store_stats, abi)


def build_bwd_launchers(plan: geometry.RowPlan, strategy: str, abi: str) -> tuple[Callable, Callable | None]:
    from lnbench.flydsl.kernels_bwd import build_bwd, build_reduce
    main = build_bwd(plan, strategy, abi)
    red = build_reduce(geometry.reduce_plan(plan.n), plan.dtype, abi) if strategy == "deterministic" else None
    return main, red


def _ptrs_or_tensors(abi: str, tensors: list[torch.Tensor]) -> list:
    return [t.data_ptr() for t in tensors] if abi == "pointer" else list(tensors)


#: buffers the wrappers allocate with torch.empty (outputs, workspaces): they start uninitialized
UNINITIALIZED = ("y", "mean", "rstd", "dx", "wsg", "wsb", "dweight", "dbias", "c1", "c2")


def bind_kernel(fn: Any, abi: str, buffers: dict[str, torch.Tensor], scalars: list[int],
                dev: Device, zeroed: Collection[str] = ()) -> Callable[[], None]:
    """A zero-argument launch of a compiled kernel on dev's current stream.

    `buffers` are the kernel's tensor arguments, by name and in argument order. The launch keeps all of
    them (`.buffers`): a Pointer-ABI launch passes bare ints, so a tensor only referenced elsewhere could be
    freed before the kernel runs. On the emulator each launch runs inside the launch scope naming them; those
    named in UNINITIALIZED start uninitialized there, except those the caller names `zeroed` (initcheck:
    torch-zeroed accumulators, e.g. a kernel source's fp32 dγ/dβ, are initialized).
    """
    args = _ptrs_or_tensors(abi, list(buffers.values())) + list(scalars)
    stream = dev.stream()
    if dev.emulated:
        from lnbench.emu import runtime
        runtime.track_lifetimes(buffers)            # a buffer freed before a launch is then named by the checker

        uninitialized = tuple(name for name in buffers if name in UNINITIALIZED and name not in zeroed)

        def call() -> None:
            with dev.launch_scope(buffers, uninitialized):
                fn(*args, stream)
    else:
        def call() -> None:              # bare: abi-compare times exactly this call on a GPU
            fn(*args, stream)
    call.buffers = buffers  # type: ignore[attr-defined]
    return call


# ---------------------------------------------------------------- forward

def _fwd_plan(x: torch.Tensor, out: list[torch.Tensor]) -> geometry.RowPlan:
    try:
        return geometry.row_plan(x.shape[1], x.dtype, "fwd", align_elems(x, *out))
    except ValueError as exc:
        raise ContractError(f"x: {exc}") from None


def fwd_compiled(dev: Device, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor,
                 eps: float, store_stats: bool, abi: str, stats: list[torch.Tensor]) -> tuple[Any, geometry.RowPlan]:
    """The compiled forward for these tensors on `dev` (compiling on a miss)."""
    plan = _fwd_plan(x, [weight, bias, y])
    key = ("fwd", plan.n, plan.dtype, bool(store_stats), float(eps), abi, "", plan.vec, dev.arch, dev.index)
    tensors = [x, weight, bias, y] + (stats if store_stats else [])
    fn = _cached(key, lambda: (build_fwd_launcher(plan, eps, store_stats, abi),
                               fwd_compile_args(plan, store_stats, abi, tensors if abi == "tensor" else None)),
                 dev.arch, (*key, repr(plan)))
    return fn, plan


def _forward_launch(dev: Device, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor,
                    eps: float, store_stats: bool, abi: str, stats: list[torch.Tensor]) -> Callable[[], None]:
    """Compile (on a miss) and bind the forward to its buffers; call under dev.guard()."""
    fn, _ = fwd_compiled(dev, x, weight, bias, y, eps, store_stats, abi, stats)
    buffers = {"x": x, "weight": weight, "bias": bias, "y": y}
    if store_stats:
        buffers.update(mean=stats[0], rstd=stats[1])
    return bind_kernel(fn, abi, buffers, [x.shape[0]], dev)


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
    dev = kernel_device(x)
    stats = [mean, rstd] if mean is not None and rstd is not None else []      # stored: store_stats
    with dev.guard():
        _forward_launch(dev, x, weight, bias, y, eps, store_stats, abi, stats)()
    return y, mean, rstd


class DirectCall(Protocol):
    """A direct call: a zero-argument launch with the tensors it writes (`.outputs`) and holds (`.buffers`)."""

    outputs: tuple[torch.Tensor, ...]
    buffers: dict[str, torch.Tensor]

    def __call__(self) -> None: ...


def direct_forward_call(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                        store_stats: bool, abi: str) -> DirectCall:
    """Preallocate outputs and return a zero-argument closure that calls the compiled forward
    directly on the current stream (raw ints for the Pointer ABI, tensors for the Tensor ABI).
    The closure holds x, weight, bias and the outputs (`.buffers`); `.outputs` is (y[, mean, rstd])."""
    _check_abi(abi)
    check_forward_args(x, weight, bias)
    dev = kernel_device(x)
    m = x.shape[0]
    y = torch.empty_like(x)
    stats = ([torch.empty(m, device=x.device), torch.empty(m, device=x.device)] if store_stats else [])
    with dev.guard():
        call = _forward_launch(dev, x, weight, bias, y, eps, store_stats, abi, stats)
    call.outputs = (y, *stats)  # type: ignore[attr-defined]
    return cast(DirectCall, call)         # bind_kernel set .buffers, .outputs is set above


# ---------------------------------------------------------------- backward

def bwd_compiled(plan: geometry.RowPlan, strategy: str, abi: str, dev: Device,
                 tensors: list | None, red_tensors: list | None) -> tuple[Any, Any]:
    key = ("bwd", plan.n, plan.dtype, False, 0.0, abi, strategy, plan.vec, dev.arch, dev.index)
    main = _cached(key, lambda: (build_bwd_launchers(plan, strategy, abi)[0],
                                 bwd_compile_args(plan, abi, tensors)), dev.arch, (*key, repr(plan)))
    red = None
    if strategy == "deterministic":
        def reduce_launcher() -> Callable:
            launcher = build_bwd_launchers(plan, strategy, abi)[1]
            assert launcher is not None         # the deterministic strategy has its reduce kernel
            return launcher

        rkey = ("bwd-reduce", plan.n, plan.dtype, False, 0.0, abi, strategy, 0, dev.arch, dev.index)
        red = _cached(rkey, lambda: (reduce_launcher(),
                                     reduce_compile_args(plan.n, plan.dtype, abi, red_tensors)), dev.arch,
                    (*rkey, repr(plan)))
    return main, red


def _backward_call(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor, abi: str, dgamma_strategy: str
                   ) -> tuple[Callable[[], None] | None, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Check, allocate outputs and workspace, compile; return (launch closure, (dx, dweight, dbias)).

    The closure launches on the current stream of x's device and holds every buffer it passes,
    workspace included (`.buffers`). For the atomic strategy it zeroes the fp32 accumulators right
    before the main kernel (a Tensor-ABI compile may have run it once) and casts them into
    dweight/dbias after; that zeroing is part of every call. None when M == 0.
    """
    _check_abi(abi)
    check_strategy(dgamma_strategy)
    check_backward_args(dy, x, weight, mean, rstd)
    m, n = x.shape
    dx = torch.empty_like(x)
    if m == 0:
        return None, (dx, torch.zeros_like(weight), torch.zeros_like(weight))
    dev = kernel_device(x)
    try:
        plan = geometry.row_plan(n, x.dtype, "bwd", align_elems(x, dy, dx, weight))
    except ValueError as exc:
        raise ContractError(f"x: {exc}") from None
    chosen = bwd_plan.plan_for(m, n, x.dtype, dev.arch) if dgamma_strategy == "deterministic" else None
    if chosen is not None and chosen.kind == "strip":
        return _strip_call(dev, chosen, dy, x, weight, mean, rstd, dx, abi, align_elems(x, dy, dx, weight))
    p = geometry.bwd_programs(m, plan, dev.arch)
    if chosen is not None:              # the chooser's P (within the budget), each program owning a row group
        p = max(1, min(chosen.programs, -(-m // (plan.batch if plan.streaming else plan.rows_per_block))))
    f32: dict[str, Any] = dict(device=x.device, dtype=torch.float32)
    uses_ws = dgamma_strategy == "deterministic" or not plan.acc_in_registers
    ws_rows = geometry.bwd_partial_rows(p, plan, dgamma_strategy) if uses_ws else 1
    wsg, wsb = torch.empty(ws_rows, n, **f32), torch.empty(ws_rows, n, **f32)
    acc_g, acc_b = torch.zeros(n, **f32), torch.zeros(n, **f32)
    dgamma = torch.empty_like(weight)
    dbeta = torch.empty_like(weight)
    main_b = {"x": x, "dy": dy, "weight": weight, "mean": mean, "rstd": rstd, "dx": dx, "wsg": wsg, "wsb": wsb,
              "acc_g": acc_g, "acc_b": acc_b}
    red_b = {"wsg": wsg, "wsb": wsb, "dweight": dgamma, "dbias": dbeta}
    with dev.guard():
        main_fn, red_fn = bwd_compiled(plan, dgamma_strategy, abi, dev,
                                       list(main_b.values()) if abi == "tensor" else None,
                                       list(red_b.values()) if abi == "tensor" else None)
        main = bind_kernel(main_fn, abi, main_b, [m, p], dev)
        red = bind_kernel(red_fn, abi, red_b, [ws_rows], dev) if red_fn is not None else None

    def call() -> None:
        if dgamma_strategy == "atomic":
            acc_g.zero_()
            acc_b.zero_()
        main()
        if red is not None:
            red()
        if dgamma_strategy == "atomic":
            dgamma.copy_(acc_g)
            dbeta.copy_(acc_b)

    call.buffers = {**main_b, **red_b}  # type: ignore[attr-defined]
    return call, (dx, dgamma, dbeta)


def strip_compiled(plan: bwd_plan.BwdPlan, dt: str, abi: str, dev: Device, align: int) -> tuple[Any, Any, Any]:
    """The strip plan's compiled (row sums, strip, reduce or None) for `dev` (compiling on a miss)."""
    from lnbench.flydsl.kernels_bwd import build_reduce
    from lnbench.flydsl.kernels_bwd_strip import build_rowsums, build_strip
    n, final = plan.n, plan.partial_rows == 0
    pa = bwd_plan.strip_geometry(n, dt, plan.seg, align, geometry.SMALL_ROW_BLOCK, kind=plan.seg_kind)
    pb = bwd_plan.strip_geometry(n, dt, plan.strip, align, bwd_plan.STRIP_BLOCK)
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]
    x = torch.empty(2, n, dtype=tdt)
    w = torch.empty(n, dtype=tdt)
    s, c = torch.empty(2), torch.empty(2, plan.segments)
    out = w if final else torch.empty(2, n)
    a_args = (placeholders([dt, dt, dt, "f32", "f32", "f32", "f32"]) if abi == "pointer" else [x, x, w, s, s, c, c])
    odt = dt if final else "f32"
    b_args = (placeholders([dt, dt, dt, dt, "f32", "f32", "f32", "f32", odt, odt]) if abi == "pointer"
              else [x, x, x, w, s, s, c, c, out, out])
    tag = (n, dt, abi, dev.arch, dev.index)
    akey = ("bwd-rowsums", *tag, repr(pa), plan.segments)
    fa = _cached(akey, lambda: (build_rowsums(pa, n, plan.segments, abi), a_args + [1, 0, None]), dev.arch, akey)
    bkey = ("bwd-strip", *tag, repr(pb), plan.segments, final)
    fb = _cached(bkey, lambda: (build_strip(pb, n, plan.segments, final, dt, abi), b_args + [1, 1, 0, 0, None]),
                 dev.arch, bkey)
    fr = None
    if not final:
        rkey = ("bwd-reduce", n, dt, False, 0.0, abi, "deterministic", 0, dev.arch, dev.index)
        fr = _cached(rkey, lambda: (build_reduce(geometry.reduce_plan(n), dt, abi),
                                    reduce_compile_args(n, dt, abi)), dev.arch, (*rkey, "reduce"))
    return fa, fb, fr


def _strip_call(dev: Device, plan: bwd_plan.BwdPlan, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                mean: torch.Tensor, rstd: torch.Tensor, dx: torch.Tensor, abi: str, align: int
                ) -> tuple[Callable[[], None], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The strip plan (lnbench.flydsl.bwd_plan): per chunk of rows the row-sum and strip launches, then the
    partial reduce where the chunks' row blocks left more than one partial row."""
    m, n = x.shape
    f32: dict[str, Any] = dict(device=x.device, dtype=torch.float32)
    c1, c2 = torch.empty(plan.chunk_rows, plan.segments, **f32), torch.empty(plan.chunk_rows, plan.segments, **f32)
    dgamma, dbeta = torch.empty_like(weight), torch.empty_like(weight)
    final = plan.partial_rows == 0
    wsg = wsb = None
    if not final:
        wsg, wsb = torch.empty(plan.partial_rows, n, **f32), torch.empty(plan.partial_rows, n, **f32)
    calls = []
    with dev.guard():
        fa, fb, fr = strip_compiled(plan, geometry.dtype_name(x.dtype), abi, dev, align)
        for k in range(plan.chunks):              # every launch takes the whole tensors and its chunk's first row
            r0, r1 = k * plan.chunk_rows, min(m, (k + 1) * plan.chunk_rows)
            a_bufs = {"x": x, "dy": dy, "weight": weight, "mean": mean, "rstd": rstd, "c1": c1, "c2": c2}
            calls.append(bind_kernel(fa, abi, a_bufs, [r1 - r0, r0], dev))
            outs = {"dweight": dgamma, "dbias": dbeta}
            if wsg is not None and wsb is not None:
                outs = {"wsg": wsg, "wsb": wsb}
            b_bufs = {"x": x, "dy": dy, "dx": dx, "weight": weight, "mean": mean, "rstd": rstd, "c1": c1, "c2": c2,
                      **outs}
            calls.append(bind_kernel(fb, abi, b_bufs, [r1 - r0, plan.row_blocks, r0, k * plan.row_blocks], dev))
        if fr is not None:
            assert wsg is not None and wsb is not None
            calls.append(bind_kernel(fr, abi, {"wsg": wsg, "wsb": wsb, "dweight": dgamma, "dbias": dbeta},
                                     [plan.partial_rows], dev))

    def call() -> None:
        for launch_one in calls:
            launch_one()

    buffers: dict[str, torch.Tensor] = {"x": x, "dy": dy, "weight": weight, "mean": mean, "rstd": rstd, "dx": dx,
                                        "c1": c1, "c2": c2, "dweight": dgamma, "dbias": dbeta}
    if wsg is not None and wsb is not None:
        buffers.update(wsg=wsg, wsb=wsb)
    call.buffers = buffers  # type: ignore[attr-defined]
    return call, (dx, dgamma, dbeta)


def backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
             abi: str = "pointer", dgamma_strategy: str = "deterministic"
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias); dweight/dbias accumulate in fp32 and come back in weight's dtype."""
    call, outputs = _backward_call(dy, x, weight, mean, rstd, abi, dgamma_strategy)
    if call is not None:
        with kernel_device(x).guard():
            call()
    return outputs


def direct_backward_call(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                         rstd: torch.Tensor, abi: str, dgamma_strategy: str = "deterministic") -> DirectCall:
    """Like direct_forward_call for the backward: outputs and workspace preallocated once."""
    call, outputs = _backward_call(dy, x, weight, mean, rstd, abi, dgamma_strategy)
    if call is None:
        raise ContractError("x: direct_backward_call needs at least one row")
    call.outputs = outputs  # type: ignore[attr-defined]
    return cast(DirectCall, call)         # _backward_call set .buffers, .outputs is set above
