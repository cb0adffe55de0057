"""Compiling the emulator's C sources with zig cc (the ziglang package) into shared libraries, once per source.

The HIP stand-in (hip.py) and the native helper (native.py) build through `compile_library`: the output is written
under a temporary name and renamed into place (atomic: parallel workers may build at once), and zig keeps its own
compile cache beside ours (a read-only $HOME does not stop the build).
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Mapping, Sequence

from lnbench.emu.errors import EmulatorUnavailable


def compile_library(zig: Path, out: Path, source: Path, flags: Sequence[str], what: str, cache: Path,
                    extra: Mapping[str, str] | None = None) -> Path:
    """Compile `source` into `out`. `extra`: files needed only by the build (name -> text); a flag naming one as
    `{name}` gets its path. `what` names the library in errors; `cache`: zig's compile cache unless
    $ZIG_GLOBAL_CACHE_DIR says otherwise."""
    tag = f"{os.getpid()}.{threading.get_ident()}"
    tmp = out.parent / f"{out.name}.tmp{tag}"
    files = {name: out.parent / f"{name}.tmp{tag}" for name in (extra or {})}
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for name, text in (extra or {}).items():
            files[name].write_text(text)
    except OSError as exc:
        raise EmulatorUnavailable(f"cannot set up the emulator's folder {out.parent}: {exc.strerror or exc} (point "
                                  f"LNBENCH_EMU_DIR or XDG_CACHE_HOME at a writable folder)") from None
    args = list(flags)
    for name, path in files.items():
        args = [a.replace("{" + name + "}", str(path)) for a in args]
    cmd = [str(zig), "cc", *args, "-o", str(tmp), str(source)]
    try:
        zig_cache = os.environ.get("ZIG_GLOBAL_CACHE_DIR") or str(cache)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "ZIG_GLOBAL_CACHE_DIR": zig_cache})
        if proc.returncode != 0 or not tmp.exists():
            raise EmulatorUnavailable(f"building {what} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
        os.replace(tmp, out)
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return out
