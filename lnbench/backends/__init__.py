"""Registry of LayerNorm backends, by name. Backends register lazily so optional ones cost nothing."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, MutableMapping

if TYPE_CHECKING:
    from lnbench.results.records import Record

from lnbench.settings.backend_table import FLYDSL_SRC, MODULE_PREFIX, REGISTRY as _REGISTRY, check_source_table
from lnbench.backends.base import Availability, Backend
from lnbench.errors import LnbenchUsageError

#: the names lnbench itself provides, in a fixed order (plots give each its own colour by this order)
BUILTIN_NAMES: tuple[str, ...] = (*_REGISTRY, FLYDSL_SRC)

KERNEL_SRC_ENV = "LNBENCH_KERNEL_SRC"
#: config-defined kernel sources ([backends.NAME]) as JSON, so perf/abi-compare workers see them too
SOURCES_ENV = "LNBENCH_BACKEND_SOURCES"
ENTRY_POINT_GROUP = "lnbench.backends"


def kernel_src() -> str | None:
    """The folder kernel sources import from: --kernel-src (set_kernel_src), else $LNBENCH_KERNEL_SRC."""
    return os.environ.get(KERNEL_SRC_ENV) or None


def set_kernel_src(path: str | os.PathLike | None) -> None:
    """--kernel-src: a folder that must exist; put in the environment so worker processes import from it too."""
    if path is None:
        return
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise LnbenchUsageError(f"--kernel-src {path}: not a folder (give a FlyDSL checkout or a folder of "
                                f"kernel-source modules)")
    os.environ[KERNEL_SRC_ENV] = str(folder.resolve())


def configure_sources(config: Mapping[str, Any]) -> None:
    """Register the config's [backends.NAME] kernel sources (for this process and its workers)."""
    tables = dict(config.get("backends") or {})
    specs = {name: _spec_from_table(name, check_source_table(name, table)) for name, table in tables.items()}
    _sources.update(specs)
    if specs:
        os.environ[SOURCES_ENV] = json.dumps({name: spec.to_dict() for name, spec in _all_sources().items()})


def _spec_from_table(name: str, table: Mapping[str, Any]):
    from lnbench.flydsl.contract import SourceSpec
    path = table.get("path")
    return SourceSpec.from_dict({
        "name": name, "module": table["module"], "path": str(Path(path).expanduser().resolve()) if path else None,
        **{k: table[k] for k in ("fwd_builder", "bwd_builder", "description", "deterministic", "builder_kwargs")
           if k in table}})


def _all_sources() -> dict[str, Any]:
    """Config-defined sources: this process's, and those a parent passed down ($LNBENCH_BACKEND_SOURCES)."""
    inherited = {}
    if os.environ.get(SOURCES_ENV):
        from lnbench.flydsl.contract import SourceSpec
        try:
            inherited = {n: SourceSpec.from_dict(d) for n, d in json.loads(os.environ[SOURCES_ENV]).items()}
        except (ValueError, TypeError, AttributeError):     # not what a parent lnbench wrote: ignored
            inherited = {}
    return {**inherited, **_sources}


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    try:
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # noqa: BLE001 - broken distribution metadata must not break the built-in backends
        return {}


def backend_names() -> list[str]:
    """Every backend name: built-in, flydsl-src, config-defined sources and installed plugins, in that order
    (plus any `module:PKG.MOD`, which is not listed)."""
    names = list(BUILTIN_NAMES)
    names += [n for n in _all_sources() if n not in names]
    names += [n for n in _entry_points() if n not in names]
    return names


def is_backend_name(name: str) -> bool:
    return name in backend_names() or (name.startswith(MODULE_PREFIX) and len(name) > len(MODULE_PREFIX))


#: lnbench's own FlyDSL kernels (their width limits are lnbench's: lnbench.flydsl.preflight.kernel_widths)
OWN_FLYDSL: tuple[str, ...] = ("flydsl", "flydsl-tensor", "flydsl-atomic")


def runs_flydsl(name: str) -> bool:
    """Does backend `name` run FlyDSL kernels (lnbench's own, or a kernel source's)?"""
    return name in OWN_FLYDSL or source_spec(name) is not None


def requested_names(values: Any, default: list[str]) -> list[str]:
    """--backend items (repeatable or comma list) in order, no repeats; a built-in name in any case (FLYDSL),
    a source's module name as written. Each checked (check_backend_names)."""
    from lnbench import validate
    known = {n.lower(): n for n in ["auto", *backend_names()]}
    items = [known.get(item.lower(), item) for item in validate.listed(values, "backend", default)]
    names = list(dict.fromkeys(items))
    check_backend_names(names)
    return names


def kernel_sources(names: list[str]) -> dict[str, dict[str, str]]:
    """Each kernel source among `names` -> its provenance (module, file, checkout commit): the run record's
    `kernel_sources` and the columns of its rows; {} when none is a kernel source."""
    out = {}
    for name in names:
        spec = source_spec(name)
        if spec is not None:
            from lnbench.flydsl.contract import provenance
            out[name] = provenance(spec)
    return out


def record_sources(run: Any, names: list[str]) -> Any:
    """Set the run record's `kernel_sources` when a backend among `names` is a kernel source."""
    sources = kernel_sources(names)
    if sources:
        run.kernel_sources = sources
    return run


def name_rows(rows: Iterable[Record], sources: dict[str, dict[str, str]] | None,
              sides: dict[str, str] | None = None) -> None:
    """Name result rows after their kernel source, in place. Each row gets its backend's provenance columns
    (module, file, checkout commit; nothing for a built-in backend), or, with `sides` ({column: backend name}:
    abi-compare's tensor and pointer sides, whose rows hold both), one column per side holding that backend's
    `source_label`. `sources`: the run record's `kernel_sources`."""
    sources = sources or {}
    named = {column: source_label(name, sources) for column, name in sides.items()} if sides else None
    for row in rows:
        row.set(**(named if named is not None else sources.get(str(row.value("backend")), {})))


def source_label(name: str, sources: dict[str, dict[str, str]]) -> str:
    """`module@commit` of a kernel source, `lnbench NAME@commit` for lnbench's own kernels."""
    if name in sources:
        return f"{sources[name]['source_module']}@{sources[name]['source_commit'] or '?'}"
    from lnbench.run.metadata import git_commit
    return f"lnbench {name}@{git_commit() or '?'}"


def check_backend_names(names: list[str]) -> None:
    """Every requested name is a backend (or auto); flydsl-src has its checkout. Usage errors otherwise."""
    for name in names:
        if name != "auto" and not is_backend_name(name):
            raise LnbenchUsageError(f"unknown backend {name!r}; choose from auto, {', '.join(backend_names())}, "
                                    f"or module:PKG.MOD")
        if name == FLYDSL_SRC and not kernel_src():
            raise LnbenchUsageError(f"--backend {FLYDSL_SRC} needs --kernel-src DIR (a FlyDSL checkout) or "
                                    f"${KERNEL_SRC_ENV}")
        spec = source_spec(name)
        if spec is not None and (src := kernel_src()) and not Path(src).is_dir():
            raise LnbenchUsageError(f"${KERNEL_SRC_ENV}={kernel_src()}: not a folder")
        if spec is not None and spec.path and not _module_found(spec.module, Path(spec.path)):
            what = ("a FlyDSL checkout (it has no kernels/norm/layernorm_kernel.py)" if name == FLYDSL_SRC
                    else f"where {spec.module} is (no such module there, nor installed)")
            raise LnbenchUsageError(f"kernel source {name}: {spec.path} is not {what}")


def _module_found(module: str, folder: Path) -> bool:
    """Would importing `module` with `folder` first on sys.path find it, without importing anything: its file
    under the folder (a/b/c.py, a/b/c/__init__.py, an extension), else a top-level package found elsewhere. A
    folder that is not a kernel source is one usage line before any work, not an `error` row per case."""
    *parents, last = module.split(".")
    base = folder.joinpath(*parents)
    if (base / last / "__init__.py").is_file() or any((base / (last + suffix)).is_file()
                                                        for suffix in importlib.machinery.all_suffixes()):
        return True
    if (folder / module.split(".")[0]).exists():      # its package is here, the module is not
        return False
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def source_spec(name: str):
    """The SourceSpec behind a kernel-source backend name, or None for a built-in class backend."""
    from lnbench.flydsl.contract import FLYDSL_LAYERNORM, SourceSpec
    if name == FLYDSL_SRC:
        if not kernel_src():
            raise LnbenchUsageError(f"--backend {FLYDSL_SRC} needs --kernel-src DIR (a FlyDSL checkout) or "
                                    f"${KERNEL_SRC_ENV}")
        return SourceSpec(FLYDSL_SRC, FLYDSL_LAYERNORM, kernel_src(),
                          description="FlyDSL's own LayerNorm (kernels/norm/layernorm_kernel.py of a checkout)")
    if name.startswith(MODULE_PREFIX) and len(name) > len(MODULE_PREFIX):
        return SourceSpec(name, name[len(MODULE_PREFIX):], kernel_src())
    spec = _all_sources().get(name)
    if spec is None and name not in _REGISTRY:
        entry = _entry_points().get(name)
        target = _plugin_target(name, entry) if entry is not None else None
        spec = target if isinstance(target, SourceSpec) else None
    return spec


def get_backend(name: str) -> Backend:
    """Instantiate the backend called `name`; an unknown name is a usage error."""
    spec = source_spec(name)
    if spec is not None:
        from lnbench.backends.source import SourceBackend
        return SourceBackend(spec)
    if name not in _REGISTRY:
        entry = _entry_points().get(name)
        if entry is None:
            raise LnbenchUsageError(
                f"unknown backend {name!r}; choose from {', '.join(backend_names())}, or module:PKG.MOD")
        return _plugin_target(name, entry)()          # a Backend subclass (a kernel source has a spec)
    module_name, class_name = _REGISTRY[name].split(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)()


def _plugin_target(name: str, entry: importlib.metadata.EntryPoint):
    """What an installed plugin names: a Backend subclass, or a kernel source (a SourceSpec, or a module following
    the builder contract: its spec). One that fails to load is a source whose every case is an `error` row saying
    so. Resolved once per plugin and entry point."""
    from lnbench.flydsl.contract import SourceSpec
    key = (name, entry.value)
    if key not in _plugins:
        module_name = entry.value.split(":")[0].strip()
        try:
            target = entry.load()
        except Exception:  # noqa: BLE001 - the source backend's import reports it in one line
            target = SourceSpec(name, module_name)
        if not (isinstance(target, SourceSpec) or (isinstance(target, type) and issubclass(target, Backend))):
            target = SourceSpec(name, getattr(target, "__name__", module_name))
        _plugins[key] = target
    return _plugins[key]


def probe_backend(name: str, device) -> tuple[Backend | None, Availability]:
    """(backend, availability) without raising: a backend whose module fails to import is unavailable."""
    try:
        if name == FLYDSL_SRC:
            check_backend_names([name])         # its checkout named, and a folder (as verify requires)
        backend = get_backend(name)
        return backend, backend.availability(device)
    except LnbenchUsageError as exc:
        if name == FLYDSL_SRC:                  # no checkout (folder) named: listed (lnbench env) as unavailable, why
            return None, Availability(False, str(exc).removeprefix(f"--backend {FLYDSL_SRC} "))
        raise
    except Exception as exc:  # a broken optional backend must not hide the others
        return None, Availability(False, f"cannot load: {type(exc).__name__}: {exc}".splitlines()[0])


def register_backend(name: str, target: str) -> None:
    """Add a backend ("package.module:ClassName") to the registry, e.g. from a plugin."""
    _REGISTRY[name] = target


_sources: dict[str, Any] = {}
#: installed plugins resolved so far: (name, entry point value) -> SourceSpec or Backend subclass
_plugins: dict[tuple[str, str], Any] = {}

__all__ = ["Availability", "Backend", "backend_names", "get_backend", "probe_backend", "register_backend", "check_backend_names",
           "configure_sources", "set_kernel_src", "source_spec", "kernel_src", "is_backend_name", "OWN_FLYDSL",
           "requested_names", "kernel_sources", "record_sources", "name_rows", "source_label", "runs_flydsl"]
