"""Which lnbench code ran, how and when: the git commit of a checkout (with -dirty), a content hash for a source
tree without git, the command line (`command_line`) and the UTC time. Imports nothing heavy (lnbench.run.metadata,
which reads torch's and the device's facts, re-exports these), so a command that never touches a tensor
(history) can name its run."""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path



#: the lnbench package's folder (lnbench/machine/checkout.py is two levels in)
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """Short commit of the lnbench checkout, with `-dirty` when tracked files differ from it (a result from
    uncommitted code says so), or '' when it is not a git checkout."""
    return git_commit_of(PACKAGE_DIR)


def git_commit_of(folder: Path) -> str:
    """Short commit of the git checkout holding `folder`, `-dirty` when its tracked files differ; '' outside git
    (lnbench's own, or a kernel source's checkout), and '' when that checkout tracks nothing in `folder`: a copy
    installed into a virtual environment inside some other repository is not that repository's code."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if not commit or not git("ls-files", "--", "."):
        return ""
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def content_hash(folder: Path) -> str:
    """`content:<12 hex>`: sha256 of every .py file under `folder` (relative path and bytes, in path order; hidden
    folders and __pycache__ left out), naming a source tree that has no git checkout (a `git archive` export)."""
    digest = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        files += [Path(root, name) for name in names if name.endswith(".py")]
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + data + b"\0")
    return f"content:{digest.hexdigest()[:12]}"


def timestamp() -> str:
    """UTC timestamp in ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def command_line(argv: list[str] | None = None) -> str:
    """The command line this process runs, shell-quoted so it can be pasted back: `lnbench verify --shapes
    64x256` (lnbench's own entry points, `python -m lnbench.cli` too, read as `lnbench`)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    head = Path(argv[0]).name
    program = ["lnbench"] if head in ("lnbench", "cli.py", "__main__.py") else argv[:1]
    return shlex.join(program + argv[1:])
