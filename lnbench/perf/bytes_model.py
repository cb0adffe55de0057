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
`op_traffic` gives the same model per buffer (read and written bytes of x, weight, bias, y, mean, rstd, dy,
dx, dweight, dbias); `op_bytes` is its sum plus the workspace.

Workspace of lnbench's FlyDSL backward (`flydsl_bwd_workspace`), with P programs of the persistent grid and R
rows per block (lnbench.flydsl.geometry) and fp32 partials/accumulators:
    deterministic  dγ and dβ partials [P, N] (a block's R row slots added in LDS first): written by the main
                   kernel, read by the reduce kernel = 2 · 2·P·N·4; rows wider than the register budget
                   (R = 1) accumulate in their partial row (read-modify-write per row group after the
                   program's first, which only writes): + 2·P₂·N·4, P₂ = min(P, G - P) the programs that own
                   two or more of the G row groups (rows, or streaming batches of rows)
    atomic         dγ and dβ fp32 [N] accumulators, read and written by the atomics = 2 · 2·N·4
                   (+ 2 · 2·P·N·4 for rows wider than the register budget: partial rows in the main kernel,
                   read back whole by its epilogue).
                   Zeroing the accumulators and casting them to dγ/dβ are torch ops around the kernel: the
                   cast's write is the model's dγ/dβ term, the rest is not counted.
The check by execution (tests/test_byte_model_executed.py, README): the emulated kernels' distinct bytes
per buffer equal these terms. These are today's grid (geometry.bwd_programs); from M·N = 2^20 on, the backend
launches the plan lnbench.flydsl.bwd_plan chooses (rows with another P, or the strip plan), whose
`distinct_bytes` and `model_bytes` state its traffic.
"""
from __future__ import annotations

from lnbench.constants import OPS, STRATEGIES
from lnbench.errors import LnbenchUsageError

#: fp32 partials and accumulators
ACCUM_BYTES = 4

Traffic = dict[str, tuple[int, int]]      # buffer -> (bytes read, bytes written)


def _add(total: Traffic, part: Traffic) -> Traffic:
    for name, (r, w) in part.items():
        r0, w0 = total.get(name, (0, 0))
        total[name] = (r0 + r, w0 + w)
    return total


def op_traffic(op: str, m: int, n: int, elem_bytes: int, *, param_bytes: int | None = None,
               stats_bytes: int = 4, stats: bool = True) -> Traffic:
    """Per buffer, the (read, written) bytes of one call of `op` (without workspace); see the module docstring."""
    p = elem_bytes if param_bytes is None else param_bytes
    s = stats_bytes if stats else 0
    mn = m * n * elem_bytes
    fwd: Traffic = {"x": (mn, 0), "weight": (n * p, 0), "bias": (n * p, 0), "y": (0, mn)}
    if op == "fwd-nostats":
        return fwd
    if s:
        fwd.update(mean=(0, m * s), rstd=(0, m * s))
    bwd: Traffic = {"x": (mn, 0), "dy": (mn, 0), "weight": (n * p, 0), "mean": (m * stats_bytes, 0),
                    "rstd": (m * stats_bytes, 0), "dx": (0, mn), "dweight": (0, n * p), "dbias": (0, n * p)}
    if op == "fwd":
        return fwd
    if op == "bwd":
        return bwd
    if op == "fwd+bwd":
        return _add(dict(fwd), bwd)
    raise LnbenchUsageError(f"unknown op {op!r}; choose from {', '.join(OPS)}")


def traffic_bytes(traffic: Traffic) -> int:
    """Total bytes (read + written) of a per-buffer traffic dict."""
    return sum(r + w for r, w in traffic.values())


def op_bytes(op: str, m: int, n: int, elem_bytes: int, *, param_bytes: int | None = None,
             stats_bytes: int = 4, stats: bool = True, workspace_bytes: int = 0) -> int:
    """Bytes moved by one call of `op` on an (m, n) input; see the module docstring for the formulas."""
    traffic = op_traffic(op, m, n, elem_bytes, param_bytes=param_bytes, stats_bytes=stats_bytes, stats=stats)
    return traffic_bytes(traffic) + (workspace_bytes if op in ("bwd", "fwd+bwd") else 0)


def flydsl_bwd_workspace(m: int, n: int, dtype: object, strategy: str, arch: str = "gfx942") -> Traffic:
    """Workspace traffic of lnbench's FlyDSL backward per buffer (wsg, wsb: partial rows; acc_g, acc_b:
    atomic accumulators), for 16-byte aligned tensors; see the module docstring."""
    from lnbench.flydsl import geometry

    if strategy not in STRATEGIES:
        raise LnbenchUsageError(f"unknown dγ/dβ strategy {strategy!r}; choose deterministic or atomic")
    if m < 1:
        return {}
    plan = geometry.row_plan(n, dtype, "bwd")
    programs = geometry.bwd_programs(m, plan, arch)
    partial = geometry.bwd_partial_rows(programs, plan, strategy) * n * ACCUM_BYTES
    out: Traffic = {}
    if strategy == "deterministic":
        reads = partial
        if not plan.acc_in_registers:                  # the main kernel reads back the rows of programs that
            groups = -(-m // plan.batch)               # own a second group (R = 1 in this mode)
            reads += max(0, min(programs, groups - programs)) * n * ACCUM_BYTES
        out.update(wsg=(reads, partial), wsb=(reads, partial))
    else:
        if not plan.acc_in_registers:
            out.update(wsg=(partial, partial), wsb=(partial, partial))
        out.update(acc_g=(n * ACCUM_BYTES, n * ACCUM_BYTES), acc_b=(n * ACCUM_BYTES, n * ACCUM_BYTES))
    return out


def gbps(nbytes: float, us: float) -> float:
    """Decimal GB/s (1e9 bytes per second) for `nbytes` moved in `us` microseconds."""
    if not us or us != us or us <= 0:
        return float("nan")
    return nbytes / (us * 1e-6) / 1e9
