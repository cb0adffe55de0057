"""Byte model: the bytes one call must move to and from device memory, per op. GB/s = bytes / time.

For x of shape (M, N) in a dtype of `e` bytes, γ/β of N elements in `p` bytes (normally p = e) and the
stats mean/rstd of M elements in `s` bytes (fp32: s = 4):

    fwd          read x, γ, β            + write y, mean, rstd    = 2·M·N·e + 2·N·p + 2·M·s
    fwd-nostats  read x, γ, β            + write y                = 2·M·N·e + 2·N·p
    bwd          read x, dy, γ, mean, rstd + write dx, dγ, dβ    = 3·M·N·e + 3·N·p + 2·M·s   (+ workspace)
    fwd+bwd      fwd + bwd (the stats are written by fwd and read back by bwd)
                                                                  = 5·M·N·e + 5·N·p + 4·M·s   (+ workspace)

`workspace` is extra traffic a backend declares (e.g. Liger's per-SM fp32 dγ/dβ partials: written by the
kernel, read back by the final sum). When a backend's forward returns no stats (torch.compile), the stats
terms of fwd are dropped. The model counts compulsory traffic only: a kernel that re-reads x counts the
same; cache hits make measured GB/s rise above this model (and above the copy peak: flagged).
"""
from __future__ import annotations

from lnbench.errors import LnbenchUsageError

OPS = ("fwd", "fwd-nostats", "bwd", "fwd+bwd")


def op_bytes(op: str, m: int, n: int, elem_bytes: int, *, param_bytes: int | None = None,
             stats_bytes: int = 4, stats: bool = True, workspace_bytes: int = 0) -> int:
    """Bytes moved by one call of `op` on an (m, n) input; see the module docstring for the formulas."""
    p = elem_bytes if param_bytes is None else param_bytes
    s = stats_bytes if stats else 0
    mn, e = m * n, elem_bytes
    fwd = 2 * mn * e + 2 * n * p + 2 * m * s
    bwd = 3 * mn * e + 3 * n * p + 2 * m * stats_bytes
    if op == "fwd":
        return fwd
    if op == "fwd-nostats":
        return 2 * mn * e + 2 * n * p
    if op == "bwd":
        return bwd + workspace_bytes
    if op == "fwd+bwd":
        return fwd + bwd + workspace_bytes
    raise LnbenchUsageError(f"unknown op {op!r}; choose from {', '.join(OPS)}")


def gbps(nbytes: float, us: float) -> float:
    """Decimal GB/s (1e9 bytes per second) for `nbytes` moved in `us` microseconds."""
    if not us or us != us or us <= 0:
        return float("nan")
    return nbytes / (us * 1e-6) / 1e9
