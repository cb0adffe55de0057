"""The types the whole-batch fast paths share (fastpath.py plans the ALU and cross-lane instructions and hands buffer
and LDS instructions to fastpath_buffer.py and fastpath_lds.py): declared here, below all three, so that none of
them imports another for a type."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile
    from lnbench.emu.state import Waves

#: an operand read at run time from the register file R and the SGPRs S
Operand = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: a plan: (run(waves, the launch's profile), the highest register row it touches); run returns False when it leaves
#: the step to the general handler (having changed nothing), anything else when it executed it
Plan = tuple[Callable[["Waves", "LaunchProfile"], "bool | None"], int]
