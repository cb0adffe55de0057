"""What a compile of one of lnbench's own kernel variants dumped (ISA facts and text, launcher slots), kept on disk.

`inspect`, `abi-compare --static-only` and the kernel facts of a verify compile a variant with IR dumps, which
bypasses FlyDSL's own compiled-kernel cache: every process compiled every variant again (about a second each).
A dump depends only on the kernel sources, FlyDSL and the variant, so it is kept as JSON under
`<lnbench cache>/compile-dumps/`, one file per variant, named by a hash of:

- the variant (op, dtype, N, ABI, arch, eps, dγ strategy);
- lnbench's kernel sources (every .py file of lnbench/flydsl and lnbench/constants.py, by content);
- FlyDSL's version and the size and modification time of its installed files' folder (a reinstall changes it).

Only lnbench's own launchers are kept: a process whose launch builders are replaced (a test's stand-ins) reads
and writes nothing. LNBENCH_COMPILE_CACHE=0 turns the cache off. A file that cannot be read is compiled again;
one that cannot be written is left out silently (the cache only saves time).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

from lnbench.machine.cache_dirs import lnbench_cache_dir, write_cache_file
from lnbench.machine.checkout import content_hash

#: bump when the stored form changes
FORMAT = 1
#: per kernel of the variant: (dump folder name, final ISA text, launcher slots)
Dump = list[tuple[str, str, int]]


@functools.lru_cache(maxsize=1)
def _sources_key() -> str:
    """Kernel sources and FlyDSL's install, as one string."""
    import flydsl

    package = Path(__file__).resolve().parent
    constants = (package.parent / "constants.py").read_bytes()
    flydsl_dir = Path(flydsl.__file__).resolve().parent
    stat = flydsl_dir.stat()
    return "|".join([content_hash(package), hashlib.sha256(constants).hexdigest()[:12],
                     str(getattr(flydsl, "__version__", "?")), str(flydsl_dir), str(stat.st_mtime_ns)])


def enabled() -> bool:
    return os.environ.get("LNBENCH_COMPILE_CACHE", "1") != "0"


def cache_path(variant: tuple) -> Path:
    """The file of one variant (see the module docstring for what names it)."""
    key = hashlib.sha256(json.dumps([FORMAT, _sources_key(), [str(v) for v in variant]]).encode()).hexdigest()
    return lnbench_cache_dir() / "compile-dumps" / f"{key[:32]}.json"


def cached_dump(variant: tuple, compile_variant: Callable[[], Dump]) -> Dump:
    """The dump of `variant` from the disk cache, else compile_variant() (then kept)."""
    if not enabled():
        return compile_variant()
    path = cache_path(variant)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        return [(str(name), str(text), int(slots)) for name, text, slots in stored]
    except (OSError, ValueError, TypeError):
        pass
    dump = compile_variant()
    try:
        write_cache_file(path, json.dumps(dump).encode())
    except (TypeError, ValueError):     # not JSON: this process's alone
        pass
    return dump
