"""A run's identity in the store: which commit (and whether dirty), branch, machine, protocol and lnbench
version, and the key that makes recording idempotent.

The key hashes the kind, commit, branch, machine, protocol, lnbench version, the command line (without its
`--shard K/N`) and the start time. Parts of one sharded run (`--shard K/N`, each its own process and start time)
leave the time out and are one run: the parts of one CI run share $LNBENCH_RUN_ID, else $GITHUB_RUN_ID (+
attempt) when set; without either, the parts of a sharded command at one commit on one machine are one run.
`--devices` runs are one process and one file already.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lnbench.results import IdentifiedRun, missing

_SHARD = re.compile(r"\s--shard(?:=|\s+)\S+")


@dataclass(frozen=True)
class Identity:
    kind: str
    schema_version: str
    commit: str
    dirty: bool
    branch: str
    timestamp: str
    machine: str
    device: str
    protocol: str            # JSON
    protocol_hash: str
    lnbench_version: str
    command_line: str
    shard: str
    load_flag: str
    run_key: str


def _text(value: Any) -> str:
    return "" if missing(value) else str(value)


@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """This machine's CPU model (/proc/cpuinfo; the platform's processor name elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def branch() -> str:
    """$LNBENCH_BRANCH, else $GITHUB_HEAD_REF (a pull request's branch) or $GITHUB_REF_NAME, else the branch of
    the lnbench checkout ('' when none)."""
    for name in ("LNBENCH_BRANCH", "GITHUB_HEAD_REF", "GITHUB_REF_NAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        out = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    name = out.stdout.strip() if out.returncode == 0 else ""
    return "" if name == "HEAD" else name


def run_id_env() -> str:
    if os.environ.get("LNBENCH_RUN_ID"):
        return os.environ["LNBENCH_RUN_ID"]
    if os.environ.get("GITHUB_RUN_ID"):
        return f"{os.environ['GITHUB_RUN_ID']}.{os.environ.get('GITHUB_RUN_ATTEMPT', '1')}"
    return ""


def machine_of(run: IdentifiedRun) -> str:
    """device name/model | driver | host CPU (the recording machine's: result files do not name it)."""
    name = _text(run.device_name) or _text(run.device) or "unknown device"
    arch = _text(run.device_arch)
    model = f"{name} ({arch})" if arch and arch not in name else name
    return " | ".join((model, _text(run.driver) or "no driver", host_cpu()))


def _digest(*parts: Any, size: int = 64) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:size]


def protocol_of(kind: str, run: IdentifiedRun) -> dict[str, Any]:
    """What a value of the run means beside its case: the timing protocol; for modelled floors (the profile kind)
    the targets' figures they were computed from, so floors under other figures are another series, not a
    change of the kernel (a CSV holds them as JSON text, a JSON file as an object: one run either way)."""
    protocol = run.protocol.as_dict()
    if kind == "profile":
        figures = run.value("targets")
        if isinstance(figures, str):
            try:
                figures = json.loads(figures)
            except ValueError:
                pass
        protocol["targets"] = figures
    return protocol


def identity(kind: str, version: str, run: IdentifiedRun) -> Identity:
    """The identity of `run`, a run record of `kind` at schema `version`."""
    commit = _text(run.git_commit)
    dirty = commit.endswith("-dirty")
    commit = commit.removesuffix("-dirty")
    protocol = json.dumps(protocol_of(kind, run), sort_keys=True, default=str)
    protocol_hash = _digest(kind, protocol, size=16)
    machine = machine_of(run)
    shard = _text(run.value("shard"))
    shard = "" if shard.endswith("/1") else shard            # --shard 1/1 is the whole run
    command = _SHARD.sub("", " " + _text(run.command_line)).strip()
    when = _text(run.timestamp)
    version_ = _text(run.lnbench_version)
    tied = ("shard", _text(run.value("shard_total_cases")), run_id_env()) if shard else ("time", when, run_id_env())
    key = _digest(kind, commit, dirty, branch(), machine, protocol_hash, version_, command, *tied)
    return Identity(kind, version, commit, dirty, branch(), when, machine, _text(run.device), protocol,
                    protocol_hash, version_, command, shard, _text(run.value("load_flag")), key)


def series_key(kind: str, case: tuple[str, ...], machine: str, protocol_hash: str) -> str:
    return _digest(kind, case, machine, protocol_hash)
