"""What the FlyDSL compiles of this process cost, and whether FlyDSL's disk cache had them: for the run-time
estimates (lnbench.verify.calibrate, lnbench.perf.calibrate), which price a cold compile apart from a warm one.

Every compile lnbench makes goes through lnbench.flydsl.guard.guarded_compile, which notes here its seconds and
whether it was cold: FlyDSL keeps each compiled kernel as one `<key>.pkl` under its cache folder
($FLYDSL_RUNTIME_CACHE_DIR, default ~/.flydsl/cache: `cache_dir`), keyed by the traced kernel and the compiler, so
a compile that adds a file there compiled, and one that adds none loaded the kernel (tracing only). Which kernels
will be cold before a run cannot be told from the cache alone (its keys come from tracing): the calibration file
keeps the kernels earlier runs compiled into the cache named by `cache_identity`, and trusts them while the cache
holds at least as many files (`cache_files`) as then.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from lnbench.machine.cache_dirs import lnbench_cache_dir

#: (seconds, cold) of each compile this process made, in order
COMPILES: list[tuple[float, bool]] = []


def cache_dir() -> Path:
    """FlyDSL's compiled-kernel cache folder as a compile here uses it (lnbench.flydsl.toolkit.compile_env)."""
    from lnbench.flydsl.toolkit import FLYDSL_CACHE_VAR

    if os.environ.get(FLYDSL_CACHE_VAR):
        return Path(os.environ[FLYDSL_CACHE_VAR])
    return _default_dir(str(Path.home()))


@functools.lru_cache(maxsize=4)
def _default_dir(home: str) -> Path:
    """~/.flydsl/cache where it can be used, else the folder lnbench's compile environment names instead."""
    from lnbench.flydsl.toolkit import _flydsl_default_cache_usable

    return Path(home) / ".flydsl" / "cache" if _flydsl_default_cache_usable() else lnbench_cache_dir() / "flydsl"


def launcher_folder(launcher: object) -> Path | None:
    """The folder of FlyDSL's cache that holds `launcher`'s kernels (FlyDSL names it after the launcher's Python
    function: a @flyc.jit object's `func`), or None when `launcher` is not one. A compile need only count the files
    there: a walk of the whole cache costs milliseconds per thousand kernels, twice per compile."""
    name = getattr(getattr(launcher, "func", None), "__name__", None)
    return cache_dir() / name if isinstance(name, str) and name else None


def cache_files(folder: Path | None = None) -> int:
    """The compiled kernels in the cache folder (its `.pkl` files, in the folders of each launcher)."""
    count = 0
    for _, _, files in os.walk(folder or cache_dir()):
        count += sum(1 for name in files if name.endswith(".pkl"))
    return count


def cache_identity(folder: Path | None = None) -> str:
    """The cache folder, the FlyDSL version and a digest of lnbench's kernel sources: a change to any of them
    makes the kernels compiled before cold again."""
    from importlib import metadata

    try:
        version = metadata.version("flydsl")
    except metadata.PackageNotFoundError:
        version = "?"
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return f"{Path(folder or cache_dir()).absolute()} flydsl {version} kernels {digest.hexdigest()[:12]}"


def note(seconds: float, cold: bool) -> None:
    """One compile's seconds, and whether it added a kernel to the disk cache."""
    COMPILES.append((seconds, cold))


def since(start: int) -> tuple[float, int, int]:
    """(seconds, compiles, cold compiles) of the compiles after the first `start` of COMPILES."""
    done = COMPILES[start:]
    return sum(s for s, _ in done), len(done), sum(1 for _, cold in done if cold)
