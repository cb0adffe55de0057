"""Pre-flight checks of lnbench's FlyDSL kernels, before any compile: each a usage error (one line, exit 2)
instead of a row of compile errors."""
from __future__ import annotations

from typing import Iterable

from lnbench.errors import LnbenchUsageError
from lnbench.flydsl.geometry import row_plan
from lnbench.flydsl.toolkit import cache_toolkit_dir, toolkit_info


def kernel_widths(widths: Iterable[int], dtypes: Iterable[str]) -> None:
    """Every row width N has a FlyDSL kernel plan (forward and backward) for every dtype: checked before any
    compile, so a width no kernel supports is one usage error, not a row of compile errors."""
    for n in dict.fromkeys(widths):
        for dtype in dict.fromkeys(dtypes):
            for kind in ("fwd", "bwd"):
                try:
                    row_plan(n, dtype, kind)
                except ValueError as exc:
                    raise LnbenchUsageError(f"unsupported N for the FlyDSL kernels: {exc}") from None


def toolkit(required: bool = False) -> None:
    """The linker toolkit FlyDSL compiles with can be found or set up (its folder is made on first use): an
    environment error (exit 2) when LNBENCH_TOOLKIT_DIR or XDG_CACHE_HOME leads somewhere it cannot be made.
    `required` (inspect, abi-compare: compiling is their work): no toolkit at all is one too, where every compile
    would fail as 'lld invocation failed', which reads as the kernel's fault (verify and perf instead say the
    FlyDSL backends cannot run here)."""
    try:
        info = toolkit_info()
    except OSError as exc:
        raise LnbenchUsageError(f"cannot set up the FlyDSL toolkit folder {cache_toolkit_dir()}: "
                                f"{exc.strerror or exc} (point LNBENCH_TOOLKIT_DIR or XDG_CACHE_HOME at a "
                                f"writable folder)") from None
    if required and info.kind == "missing":
        raise LnbenchUsageError(f"the FlyDSL kernels cannot be compiled here: {info.note}")
