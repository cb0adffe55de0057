"""Read-only GPU facts from nvidia-smi / amd-smi: driver version and current clocks. Never changes a setting.

Every query has a timeout; a missing tool or a failed query reads "unavailable".
"""
from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import torch

UNAVAILABLE = "unavailable"
_TIMEOUT_S = 10.0
_NV_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "temperature.gpu", "power.draw", "pstate")


def _run(cmd: list[str], timeout_s: float = _TIMEOUT_S) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else (torch.cuda.current_device() if torch.cuda.is_available() else 0)


def nvidia(device: torch.device) -> dict[str, str] | None:
    """nvidia-smi --query-gpu facts for the device's index, or None."""
    text = _run(["nvidia-smi", f"--id={_index(device)}", f"--query-gpu={','.join(_NV_FIELDS)}",
                 "--format=csv,noheader,nounits"])
    if not text or not text.strip():
        return None
    values = [v.strip() for v in text.strip().splitlines()[0].split(",")]
    facts = dict(zip(_NV_FIELDS, values))
    return {
        "driver": facts.get("driver_version", UNAVAILABLE),
        "clocks": (f"sm {facts.get('clocks.sm')} MHz (max {facts.get('clocks.max.sm')}), "
                   f"mem {facts.get('clocks.mem')} MHz (max {facts.get('clocks.max.mem')}), "
                   f"{facts.get('temperature.gpu')} C, {facts.get('power.draw')} W, {facts.get('pstate')}"),
        "source": "nvidia-smi",
    }


def _find(tree: Any, key: str) -> Any:
    """First value under `key` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        tree = list(tree.values())
    if isinstance(tree, list):
        for item in tree:
            found = _find(item, key)
            if found is not None:
                return found
    return None


def amd(device: torch.device) -> dict[str, str] | None:
    """amd-smi static/metric facts (driver, clocks) for the device's index, or None."""
    index = str(_index(device))
    driver_text = _run(["amd-smi", "static", "--driver", "-g", index, "--json"])
    clock_text = _run(["amd-smi", "metric", "--clock", "-g", index, "--json"])
    if driver_text is None and clock_text is None:
        return None
    driver, clocks = UNAVAILABLE, UNAVAILABLE
    try:
        if driver_text:
            value = _find(json.loads(driver_text), "version")
            driver = str(value) if value is not None else UNAVAILABLE
    except ValueError:
        pass
    try:
        if clock_text:
            tree = json.loads(clock_text)
            parts = []
            for name in ("gfx_0", "mem_0"):
                node = _find(tree, name)
                clk = _find(node, "clk") if node is not None else None
                if isinstance(clk, dict):
                    clk = f"{clk.get('value')} {clk.get('unit', '')}".strip()
                if clk is not None:
                    parts.append(f"{name.split('_')[0]} {clk}")
            clocks = ", ".join(parts) or clock_text.strip()[:300]
    except ValueError:
        clocks = clock_text.strip()[:300] if clock_text else UNAVAILABLE
    return {"driver": driver, "clocks": clocks, "source": "amd-smi"}


def gpu_facts(device: torch.device) -> dict[str, str]:
    """{"driver", "clocks", "source"}; all "unavailable" on the CPU or without the vendor tool."""
    if device.type == "cuda":
        facts = (amd(device) if torch.version.hip is not None else nvidia(device))
        if facts:
            return facts
    return {"driver": UNAVAILABLE, "clocks": UNAVAILABLE, "source": UNAVAILABLE}
