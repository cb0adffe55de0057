"""The builder contract: drive any module that builds LayerNorm launchers the way FlyDSL's own LayerNorm does.

A *kernel source* is a Python module with
    build_layernorm_module(N, dtype_str, store_stats=..., eps=...) -> @flyc.jit launcher
        (Input, Gamma, Beta, Output[, Mean, Rstd], m, stream)      Mean/Rstd fp32 (M,), only with store_stats
    build_layernorm_bwd_module(N, dtype_str) -> @flyc.jit launcher     (optional)
        (Input, Gamma, DY, Mean, Rstd, DX, DGamma, DBias, m, stream)
        DGamma/DBias are fp32 (N,) accumulators the caller zeroes and casts to γ's dtype afterwards.
The launch ABI (fx.Pointer or fx.Tensor arguments) is read from the launcher's annotations. Builders run with
FLYDSL_GPU_ARCH (and ARCH) set to the target arch, since FlyDSL's builders read the arch while building, not
only while compiling; Pointer-ABI compiles get typed null placeholders (a live pointer would launch), and
each compiled launcher then goes through launch.bind_kernel like lnbench's own kernels.

Every failure to import, build or honour the signature is a SourceError with one clear line.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from lnbench.constants import DTYPE_NAMES, DTYPES
from lnbench.run.device import Device
from lnbench.errors import one_line
from lnbench.flydsl import launch
from lnbench.flydsl.toolkit import apply_compile_env, restore_env

FWD_BUILDER = "build_layernorm_module"
BWD_BUILDER = "build_layernorm_bwd_module"
#: buffer roles of each launcher, in argument order (then m and stream)
FWD_ROLES = ("x", "weight", "bias", "y")
STATS_ROLES = ("mean", "rstd")
BWD_ROLES = ("x", "weight", "dy", "mean", "rstd", "dx", "dweight", "dbias")
#: roles that are fp32 whatever the case dtype
FP32_ROLES = frozenset({"mean", "rstd", "dweight", "dbias"})
#: the backward's fp32 dγ/dβ accumulators: the caller zeroes them before every launch (never uninitialized)
ZEROED_ROLES = frozenset({"dweight", "dbias"})
#: the FlyDSL module `--backend flydsl-src` drives, inside a FlyDSL checkout
FLYDSL_LAYERNORM = "kernels.norm.layernorm_kernel"

_lock = threading.RLock()
_modules: dict[tuple[str, str | None], ModuleType] = {}
_launchers: dict[tuple, "Launcher"] = {}
_provenance: dict[tuple, dict[str, str]] = {}


class SourceError(RuntimeError):
    """A kernel source cannot be imported or built, or does not follow the builder contract."""


@dataclass(frozen=True)
class SourceSpec:
    """Where a kernel source lives and which builders it offers.

    `path` is put at the front of sys.path while importing (a FlyDSL checkout, a folder of modules);
    `bwd_builder` empty means the source has no backward. `builder_kwargs` are passed to both builders (a
    team's variant switch, e.g. lnbench's own ABI)."""

    name: str
    module: str
    path: str | None = None
    fwd_builder: str = FWD_BUILDER
    bwd_builder: str = BWD_BUILDER
    builder_kwargs: tuple[tuple[str, Any], ...] = ()
    description: str = ""
    deterministic: bool = False

    @property
    def key(self) -> tuple:
        return (self.name, self.module, self.path, self.fwd_builder, self.bwd_builder, repr(self.builder_kwargs))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["builder_kwargs"] = dict(self.builder_kwargs)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SourceSpec":
        return cls(**{**data, "builder_kwargs": tuple(sorted(dict(data.get("builder_kwargs") or {}).items()))})


# ---------------------------------------------------------------- loading and provenance

def load_module(spec: SourceSpec) -> ModuleType:
    """Import the source's module (its path first on sys.path); SourceError with one line when it fails."""
    key = (spec.module, spec.path)
    with _lock:
        if key in _modules:
            return _modules[key]
        if spec.path:
            if spec.path not in sys.path:
                sys.path.insert(0, spec.path)     # kept: a module may import its siblings lazily
            _forget_other_copies(spec.module, spec.path)
        try:
            module = importlib.import_module(spec.module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a module calling sys.exit() at import too
            where = f" from {spec.path}" if spec.path else ""
            raise SourceError(f"kernel source {spec.name}: cannot import {spec.module}{where}: "
                              f"{one_line(exc, 300)}") from None
        _modules[key] = module
        return module


def _forget_other_copies(module: str, path: str) -> None:
    """Two sources may share a module name from different folders (two FlyDSL checkouts: `kernels.norm.
    layernorm_kernel`). Python's import would hand the second the first one's module; so the first package on
    the dotted path that was imported from outside `path` is dropped from sys.modules, with everything under it,
    and the import finds the module under `path`. The first source keeps the module object it already has."""
    root = Path(path).resolve()
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        loaded = sys.modules.get(name)
        if loaded is None:
            return
        files = [getattr(loaded, "__file__", None), *list(getattr(loaded, "__path__", []) or [])]
        if any(f and Path(f).resolve().is_relative_to(root) for f in files):
            continue
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        importlib.invalidate_caches()
        return


def builder(spec: SourceSpec, kind: str) -> Callable[..., Any] | None:
    """The forward (`fwd`) or backward (`bwd`) builder, or None when the module has none (only bwd may be
    missing: a source without a forward builder is a SourceError)."""
    module = load_module(spec)
    name = spec.fwd_builder if kind == "fwd" else spec.bwd_builder
    fn = getattr(module, name, None) if name else None
    if fn is None and kind == "fwd":
        raise SourceError(f"kernel source {spec.name}: {spec.module} has no forward builder {name}()")
    if fn is not None and not callable(fn):
        raise SourceError(f"kernel source {spec.name}: {spec.module}.{name} is not callable")
    return fn


def missing_backward(spec: SourceSpec) -> str:
    """Why the source has no backward ('' when it has one or cannot be loaded: then forward says why)."""
    try:
        if builder(spec, "bwd") is None:
            what = f"{spec.bwd_builder}()" if spec.bwd_builder else "a backward builder"
            return f"{spec.module} has no {what}"
    except SourceError:
        return ""
    return ""


def provenance(spec: SourceSpec) -> dict[str, str]:
    """module, file and the checkout's git commit of a source (file/commit '' when it cannot be loaded)."""
    with _lock:
        if spec.key not in _provenance:
            _provenance[spec.key] = _provenance_of(spec)
        return dict(_provenance[spec.key])


def _provenance_of(spec: SourceSpec) -> dict[str, str]:
    out = {"source": spec.name, "source_module": spec.module, "source_file": "", "source_commit": ""}
    try:
        module = load_module(spec)
    except SourceError:
        return out
    file = getattr(module, "__file__", None)
    if file:
        path = Path(file).resolve()
        out["source_file"] = str(path)
        from lnbench.machine.checkout import content_hash, git_commit_of
        tree = Path(spec.path).resolve() if spec.path and path.is_relative_to(Path(spec.path).resolve()) else path.parent
        out["source_commit"] = git_commit_of(path.parent) or content_hash(tree)    # no checkout: what the tree holds
    return out


# ---------------------------------------------------------------- launchers

@dataclass
class Launcher:
    """A built (not yet compiled) launcher and what its annotations say."""

    fn: Any
    abi: str
    roles: tuple[str, ...]
    label: str


def _annotation_kind(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    text = text.rsplit(".", 1)[-1]
    return {"Pointer": "pointer", "Tensor": "tensor"}.get(text, "")


def launcher_abi(fn: Any, roles: tuple[str, ...], label: str) -> str:
    """The launch ABI the launcher's annotations declare; SourceError when its signature breaks the contract
    (buffer count, mixed or missing fx.Pointer/fx.Tensor annotations, no m and stream after the buffers)."""
    py = getattr(fn, "func", fn)
    try:
        params = list(inspect.signature(py).parameters.values())
    except (TypeError, ValueError):
        raise SourceError(f"{label} returned {type(fn).__name__}, not a @flyc.jit launcher") from None
    want = f"({', '.join(roles)}, m, stream)"
    if len(params) != len(roles) + 2:
        got = ", ".join(p.name for p in params)
        raise SourceError(f"{label} returned a launcher taking ({got}): the contract wants {len(roles)} buffers "
                          f"then m and stream {want}")
    kinds = {_annotation_kind(p.annotation) for p in params[:len(roles)]}
    if kinds not in ({"pointer"}, {"tensor"}):
        raise SourceError(f"{label}: the launcher's buffer arguments must all be fx.Pointer or all fx.Tensor "
                          f"{want}")
    return kinds.pop()


def build(spec: SourceSpec, kind: str, n: int, dtype: str, arch: str, store_stats: bool = True,
          eps: float = 1e-5, fresh: bool = False) -> Launcher | None:
    """Build (cached) the source's `fwd` or `bwd` launcher for N, dtype and arch; None for a missing backward.
    fresh: build a new launcher (a compile that must dump its IR: FlyDSL's cache would skip a known one)."""
    key = (spec.key, kind, n, dtype, arch, bool(store_stats) if kind == "fwd" else None,
           float(eps) if kind == "fwd" else None)
    with _lock:
        if key in _launchers and not fresh:
            return _launchers[key]
        fn = builder(spec, kind)
        if fn is None:
            return None
        kwargs = dict(spec.builder_kwargs)
        if kind == "fwd":
            kwargs.update(store_stats=bool(store_stats), eps=float(eps))
            roles = FWD_ROLES + (STATS_ROLES if store_stats else ())
            call = f"{spec.fwd_builder}({n}, {dtype!r}, store_stats={bool(store_stats)}, eps={eps:g})"
        else:
            roles = BWD_ROLES
            call = f"{spec.bwd_builder}({n}, {dtype!r})"
        label = f"{spec.module}.{call}"
        old = apply_compile_env(arch, compile_only=True)     # FLYDSL_GPU_ARCH while the builder runs
        try:
            made = fn(n, dtype, **kwargs)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a builder's own error (sys.exit() too), one line
            raise SourceError(f"kernel source {spec.name}: {label} failed: {one_line(exc, 300)}") from None
        finally:
            restore_env(old)
        launcher = Launcher(made, launcher_abi(made, roles, f"kernel source {spec.name}: {label}"), roles, label)
        if not fresh:
            _launchers[key] = launcher
        return launcher


def compile_args(launcher: Launcher, dtype: str, tensors: dict[str, torch.Tensor] | None = None,
                 n: int = 1) -> list:
    """Compile arguments: typed null pointers (Pointer ABI), else tensors (the given ones, or small stand-ins
    of the right dtype and width for a compile-only run), then m = 1 and the null stream."""
    def role_dtype(role: str) -> str:
        return "f32" if role in FP32_ROLES else dtype

    if launcher.abi == "pointer":
        return launch.placeholders([role_dtype(r) for r in launcher.roles]) + [1, None]
    if tensors is None:
        rows = {"x", "y", "dy", "dx"}
        tensors = {r: torch.empty((2, n) if r in rows else (2,) if r in STATS_ROLES else (n,),
                                  dtype=DTYPES[role_dtype(r)]) for r in launcher.roles}
    return [tensors[r] for r in launcher.roles] + [1, None]


def compiled(launcher: Launcher, dtype: str, dev: Device, tensors: dict[str, torch.Tensor]) -> Any:
    """The launcher compiled for dev, in lnbench's one compile cache (launch._cached: lnbench's own kernels
    live there too), the arch env set while compiling."""
    key = ("source", id(launcher), dev.arch, dev.index)      # launchers stay in _launchers: ids are not reused
    try:
        return launch._cached(key, lambda: (launcher.fn, compile_args(
            launcher, dtype, tensors if launcher.abi == "tensor" else None)), dev.arch)
    except Exception as exc:  # noqa: BLE001
        raise SourceError(f"{launcher.label}: compile failed: {one_line(exc, 300)}") from None


# ---------------------------------------------------------------- calls

def _bind(spec: SourceSpec, kind: str, buffers: dict[str, torch.Tensor], dtype: str, eps: float = 1e-5,
          store_stats: bool = True) -> Callable[[], None] | None:
    """A zero-argument launch of the source's `kind` launcher on these buffers (None: no such builder)."""
    x = buffers["x"]
    dev = launch.kernel_device(x)
    with dev.guard():
        built = build(spec, kind, x.shape[1], dtype, dev.arch, store_stats, eps)
        if built is None:
            return None
        fn = compiled(built, dtype, dev, buffers)
        return launch.bind_kernel(fn, built.abi, {r: buffers[r] for r in built.roles}, [x.shape[0]], dev,
                                  zeroed=ZEROED_ROLES)


def forward_call(spec: SourceSpec, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                 store_stats: bool) -> Callable[[], None]:
    """Check, allocate y (and fp32 stats), build and compile: a zero-argument launch whose `.outputs` are
    (y[, mean, rstd]). M = 0 gives a call that launches nothing."""
    launch.check_forward_args(x, weight, bias)
    m = x.shape[0]
    f32: dict[str, Any] = dict(device=x.device, dtype=torch.float32)
    buffers = {"x": x, "weight": weight, "bias": bias, "y": torch.empty_like(x)}
    if store_stats:
        buffers.update(mean=torch.empty(m, **f32), rstd=torch.empty(m, **f32))
    call = (_bind(spec, "fwd", buffers, DTYPE_NAMES[x.dtype], eps, store_stats) if m else None) or (lambda: None)
    outputs = tuple(buffers[r] for r in ("y",) + (STATS_ROLES if store_stats else ()))

    def run() -> None:
        call()

    run.outputs = outputs  # type: ignore[attr-defined]
    run.buffers = buffers  # type: ignore[attr-defined]
    return run


def backward_call(spec: SourceSpec, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                  rstd: torch.Tensor) -> Callable[[], None] | None:
    """Like forward_call for the backward: each call zeroes the fp32 dγ/dβ accumulators, launches, and casts
    them into `.outputs` (dx, dweight, dbias) in γ's dtype. None when the source has no backward builder."""
    launch.check_backward_args(dy, x, weight, mean, rstd)
    n = x.shape[1]
    f32: dict[str, Any] = dict(device=x.device, dtype=torch.float32)
    buffers = {"x": x, "weight": weight, "dy": dy, "mean": mean, "rstd": rstd, "dx": torch.empty_like(x),
               "dweight": torch.zeros(n, **f32), "dbias": torch.zeros(n, **f32)}
    dweight, dbias = torch.empty_like(weight), torch.empty_like(weight)
    if builder(spec, "bwd") is None:
        return None
    main = _bind(spec, "bwd", buffers, DTYPE_NAMES[x.dtype]) if x.shape[0] else None

    def run() -> None:
        buffers["dweight"].zero_()
        buffers["dbias"].zero_()
        if main is not None:
            main()
        dweight.copy_(buffers["dweight"])
        dbias.copy_(buffers["dbias"])

    run.outputs = (buffers["dx"], dweight, dbias)  # type: ignore[attr-defined]
    run.buffers = buffers  # type: ignore[attr-defined]
    return run


