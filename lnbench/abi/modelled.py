"""`abi-compare --device emu[:ARCH]`: the host cost of each ABI, measured on the null device of ARCH, beside the
device floor of its kernels modelled on every target of ARCH (lnbench.modelled; hot mode: a hot call's working
set), and which of the two limits a hot call. The host columns are measurements, the *_bound_us columns modelled
lower bounds; each row says so (`modelled`, `scope`)."""
from __future__ import annotations

from typing import Any, Sequence

from lnbench.modelled.floors import floors
from lnbench.modelled.targets import Target
from lnbench.results import AbiRow

SCOPE = "tensor_us/pointer_us: host cost per call measured on the null device; *_bound_us: modelled device floor"


def _bound(launches: Sequence[Any], t: Target) -> tuple[float, str]:
    """(bound_us summed over the launches of one call, what bounds its largest launch) on `t`, hot."""
    found = [floors(k.as_launch(), t, "hot") for k in launches]
    largest = max(found, key=lambda f: f.bound_us)
    return sum(f.bound_us for f in found), largest.bound_by


def modelled_rows(runtime_rows: Sequence[AbiRow], targets: Sequence[Target], arch: str, eps: float,
                  strategy: str) -> list[AbiRow]:
    """One row per measured `direct` case × target: host cost of each ABI beside its modelled device floor (each
    side's kernels executed once on the emulated device)."""
    from lnbench.flydsl.inspect import execute_variant
    out = []
    for row in runtime_rows:
        if row.metric != "direct" or row.status != "ok":
            continue
        m, n = (int(v) for v in str(row.shape).split("x"))
        launches = {side: execute_variant(str(row.op), str(row.dtype), m, n, side, arch, eps=eps,
                                          dgamma_strategy=strategy) for side in ("tensor", "pointer")}
        for t in targets:
            cells = AbiRow(part="modelled", pair=row.pair, op=row.op, dtype=row.dtype,
                           shape=row.shape, M=m, N=n, metric="direct", arch=arch, target=t.name, modelled=True,
                           status="ok", scope=SCOPE)
            for side in ("tensor", "pointer"):
                bound, by = _bound(launches[side], t)
                host = row.value(f"{side}_us")
                cells.set(**{f"{side}_us": host, f"{side}_bound_us": bound, f"{side}_bound_by": by,
                             f"{side}_limit": "host" if host is not None and host > bound else "device"})
            out.append(cells)
    return out
