"""The backend names lnbench knows and the check of a config [backends.NAME] table: plain data, below the
configuration (which checks those tables as it loads) and the backend registry (lnbench.backends) that uses it."""
from __future__ import annotations

from typing import Any

from lnbench.errors import LnbenchUsageError

#: name -> "module:ClassName"; modules import only when the backend is asked for.
REGISTRY: dict[str, str] = {
    "torch": "lnbench.backends.torch_native:TorchBackend",
    "compile": "lnbench.backends.torch_compile:TorchCompileBackend",
    "liger": "lnbench.backends.liger:LigerBackend",
    "flydsl": "lnbench.backends.flydsl_backend:FlyDSLBackend",
    "flydsl-tensor": "lnbench.backends.flydsl_backend:FlyDSLTensorABIBackend",
    "flydsl-atomic": "lnbench.backends.flydsl_backend:FlyDSLAtomicBackend",
}
#: `--backend module:PKG.MOD`: any module following the builder contract (lnbench.flydsl.contract)
MODULE_PREFIX = "module:"
#: FlyDSL's own LayerNorm, from the checkout named by --kernel-src / $LNBENCH_KERNEL_SRC
FLYDSL_SRC = "flydsl-src"
#: keys of a [backends.NAME] table -> the type its value must have
SOURCE_KEYS: dict[str, type] = {
    "module": str, "path": str, "fwd_builder": str, "bwd_builder": str, "description": str,
    "deterministic": bool, "builder_kwargs": dict}


def check_source_table(name: str, table: Any) -> dict[str, Any]:
    """A config [backends.NAME] table, checked: a usage error names the bad key."""
    if not isinstance(table, dict):
        raise LnbenchUsageError(f"config [backends.{name}] must be a table (module = \"pkg.mod\", ...)")
    if name in REGISTRY or name == FLYDSL_SRC or name.startswith(MODULE_PREFIX) or name == "auto":
        raise LnbenchUsageError(f"config [backends.{name}]: {name!r} is a built-in backend name; choose another")
    for key, value in table.items():
        want = SOURCE_KEYS.get(key)
        if want is None:
            raise LnbenchUsageError(f"config [backends.{name}]: unknown key {key!r}; known keys: "
                                    f"{', '.join(SOURCE_KEYS)}")
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            raise LnbenchUsageError(f"config [backends.{name}] {key!r} must be a {want.__name__}, got {value!r}")
    if not table.get("module"):
        raise LnbenchUsageError(f"config [backends.{name}] needs module = \"package.module\"")
    return table
