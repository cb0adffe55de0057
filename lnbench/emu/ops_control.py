"""Program control and synchronisation: branches, s_endpgm, s_barrier, s_waitcnt, s_nop.

Every instruction completes before the next one issues, so s_waitcnt and s_nop have nothing to
wait for. s_barrier parks the wave until every live wave of its workgroup has arrived (machine.py).
"""
from __future__ import annotations

import numpy as np

from lnbench.emu.registry import op
from lnbench.emu.state import VCC, Step


@op("s_waitcnt", "s_nop", "s_setprio", "s_sleep", cls="sync")
def s_nop(st: Step) -> None:
    """Nothing to wait for: memory operations complete at issue."""


@op("s_barrier", cls="sync")
def s_barrier(st: Step) -> None:
    st.w.waiting[st.sel] = True


@op("s_endpgm", cls="branch")
def s_endpgm(st: Step) -> None:
    st.w.alive[st.sel] = False


@op("s_branch", cls="branch")
def s_branch(st: Step) -> None:
    st.branch_if(np.ones(st.k, bool))


@op("s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_vccz", "s_cbranch_vccnz", "s_cbranch_execz",
    "s_cbranch_execnz", cls="branch")
def s_cbranch(st: Step) -> None:
    cond = st.ins.name[len("s_cbranch_"):]
    if cond.startswith("scc"):
        taken = st.w.SCC[st.sel] == (cond == "scc1")
    elif cond.startswith("vcc"):
        vcc = st.sval64(VCC)
        taken = (vcc == 0) if cond == "vccz" else (vcc != 0)
    else:
        ex = st.exec64
        taken = (ex == 0) if cond == "execz" else (ex != 0)
    st.branch_if(taken)
