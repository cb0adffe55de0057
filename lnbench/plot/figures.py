"""matplotlib without pyplot (no global state, no display): make a figure, and a writer of its PNG."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lnbench.errors import LnbenchUsageError
from lnbench.machine.install import install_hint
from lnbench.output.files import Writer
from lnbench.results.verdicts import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

DPI = 100
VERDICT_COLOURS: dict[str, str] = {Verdict.SLOWER: "#d62728", Verdict.FASTER: "#2ca02c", Verdict.SAME: "#7f7f7f"}


def new_figure(width_in: float, height_in: float, **subplots: Any) -> tuple["Figure", Any]:
    """A Figure and its axes (`subplots` as Figure.subplots takes them); a usage error without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise LnbenchUsageError(f"lnbench plot needs matplotlib: {install_hint('plot')}") from None
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    return fig, fig.subplots(**subplots)


def png_writer(fig: "Figure") -> Writer:
    """Writes the figure as PNG into the file it is given (for report.atomic_write_all: all or nothing)."""
    return lambda tmp: fig.savefig(tmp, format="png", dpi=DPI)
