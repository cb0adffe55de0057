"""Install hints that work however lnbench was installed: they name the packages of an optional extra
(`pip install 'matplotlib>=3.7'`), read from the installed lnbench's own metadata (the `plot`, `emu`, `peers`,
`compile` extras of pyproject.toml), never `pip install lnbench[plot]` (lnbench is not on PyPI) nor
`pip install -e ".[plot]"` (which works only inside a checkout, and turns a normal install editable)."""
from __future__ import annotations

import functools
import importlib.metadata
import re

#: the extras' packages where lnbench's metadata cannot be read (run from a checkout that was never installed);
#: pyproject.toml's [project.optional-dependencies] is the source of truth
_FALLBACK = {"plot": ("matplotlib>=3.7",), "emu": ("ziglang>=0.13", "tinygrad==0.14.0", "msgpack>=1.0"),
             "peers": ("liger-kernel>=0.6",), "compile": ("ziglang>=0.13",)}


@functools.cache
def _declared() -> tuple[tuple[str, str], ...]:
    """(requirement, extra) of each dependency lnbench's metadata declares; extra "" for its own."""
    try:
        requires = importlib.metadata.requires("lnbench") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    out = []
    for req in requires:
        spec, _, marker = req.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        out.append((spec.strip(), extra.group(1) if extra else ""))
    return tuple(out)


def extra_packages(extra: str) -> tuple[str, ...]:
    """The requirement specifiers of one optional extra of lnbench."""
    return tuple(spec for spec, name in _declared() if name == extra) or _FALLBACK.get(extra, ())


def install_hint(extra: str) -> str:
    """`pip install 'matplotlib>=3.7'`: the command that installs what an extra adds."""
    return "pip install " + " ".join(f"'{req}'" for req in extra_packages(extra))


def _import_name(requirement: str) -> str:
    """The module a requirement installs, by the usual naming (`liger-kernel>=0.6` -> liger_kernel,
    `psycopg[binary]>=3.1` -> psycopg)."""
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")


def _requirements() -> tuple[tuple[str, str], ...]:
    """(requirement, extra) of each of lnbench's dependencies, the fallback extras' included."""
    return _declared() + tuple((spec, extra) for extra, specs in _FALLBACK.items() for spec in specs)


def missing_module_hint(exc: ModuleNotFoundError) -> str | None:
    """One line for a dependency of lnbench that is not installed: what to install and which extra (or
    lnbench itself) asks for it; None for a module lnbench does not depend on (a bug, not an install)."""
    module = (exc.name or "").partition(".")[0].lower()
    found = [(spec, extra) for spec, extra in _requirements() if _import_name(spec) == module]
    if not found:
        return None
    spec, extra = min(found, key=lambda req: (req[1] == "test", req[1] != ""))   # a user's extra, not the tests'
    whose = f"lnbench's `{extra}` extra" if extra else "a dependency of lnbench itself"
    return f"this needs {module}, which is not installed: pip install '{spec}' ({whose})"
