"""Registry of LayerNorm backends, by name. Backends register lazily so optional ones cost nothing."""
from __future__ import annotations

import importlib

from lnbench.backends.base import ALL_OPS, Availability, Backend
from lnbench.errors import LnbenchUsageError

#: name -> "module:ClassName"; modules import only when the backend is asked for.
_REGISTRY: dict[str, str] = {
    "torch": "lnbench.backends.torch_native:TorchBackend",
    "compile": "lnbench.backends.torch_compile:TorchCompileBackend",
    "liger": "lnbench.backends.liger:LigerBackend",
    "flydsl": "lnbench.backends.flydsl_backend:FlyDSLBackend",
    "flydsl-tensor": "lnbench.backends.flydsl_backend:FlyDSLTensorABIBackend",
    "flydsl-atomic": "lnbench.backends.flydsl_backend:FlyDSLAtomicBackend",
}


def backend_names() -> list[str]:
    """Every registered backend name, in registry order."""
    return list(_REGISTRY)


def get_backend(name: str) -> Backend:
    """Instantiate the backend called `name`; an unknown name is a usage error."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise LnbenchUsageError(
            f"unknown backend {name!r}; choose from {', '.join(backend_names())}") from None
    module_name, class_name = target.split(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)()


def probe_backend(name: str, device) -> tuple[Backend | None, Availability]:
    """(backend, availability) without raising: a backend whose module fails to import is unavailable."""
    try:
        backend = get_backend(name)
        return backend, backend.availability(device)
    except LnbenchUsageError:
        raise
    except Exception as exc:  # a broken optional backend must not hide the others
        return None, Availability(False, f"cannot load: {type(exc).__name__}: {exc}".splitlines()[0])


def register_backend(name: str, target: str) -> None:
    """Add a backend ("package.module:ClassName") to the registry, e.g. from a plugin."""
    _REGISTRY[name] = target


__all__ = ["ALL_OPS", "Availability", "Backend", "backend_names", "get_backend", "probe_backend", "register_backend"]
