"""Where lnbench keeps what it builds once per machine (the linker toolkit, the emulator's HIP stand-in).

$XDG_CACHE_HOME/lnbench, else ~/.cache/lnbench — or, where that home cannot be written (a read-only or missing
$HOME, as in some CI sandboxes), a per-user folder under the temporary directory. A folder the user named
($XDG_CACHE_HOME, or the per-part variables the callers read) is kept as named, so one that cannot be made is
reported rather than silently replaced.
"""
from __future__ import annotations

import functools
import os
import tempfile
import threading
from pathlib import Path


def lnbench_cache_dir() -> Path:
    """The folder under which lnbench's per-machine builds live (see the module docstring)."""
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "lnbench"
    return _default_cache_dir(str(_home()))


def _home() -> Path:
    try:
        return Path.home()
    except RuntimeError:            # no $HOME and no passwd entry
        return Path(tempfile.gettempdir())


@functools.lru_cache(maxsize=4)
def _default_cache_dir(home: str) -> Path:
    default = Path(home) / ".cache" / "lnbench"
    if _can_make(default):
        return default
    user = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"lnbench-cache-{user}"


def usable_home_folder(*parts: str) -> bool:
    """Whether ~/parts... can be used (made or written): a library's default cache folder under the home."""
    return _can_make(_home().joinpath(*parts))


def _can_make(folder: Path) -> bool:
    """The folder exists and takes a file, or can be made. Tried, not asked of os.access: root passes every
    permission check but not a read-only filesystem."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError:
        return False
    return True


def write_cache_file(path: Path, data: bytes) -> None:
    """`data` as the file `path` of a cache: written whole under a temporary name and renamed into place (parallel
    writers leave one complete file); where it cannot be written nothing is left, and the next run builds it again."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
