"""Keep the C heap's freed memory in an emulating process, so each launch's large arrays reuse it.

Every batch of a launch allocates its register file, LDS and the LDS checker's shadows afresh (lnbench.emu.state:
up to ~50 MB for a launch of 1024 waves). glibc serves allocations above its mmap threshold (128 KB, growing with
use up to 32 MB) with fresh pages and returns them when freed, so the next launch faults every page in again: the
main job took ~290,000 minor page faults, 1.2-1.5 s of system time. With the threshold raised and the heap's top
kept, a freed array's memory serves the next one: ~160,000 faults, ~0.5 s less system time
(docs/emulator.md, "Memory between launches"). Values, checks and results do not change.
"""
from __future__ import annotations

import ctypes
import platform

#: mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
#: serve allocations up to this from the heap, not fresh mappings
MMAP_THRESHOLD = 256 * 2 ** 20
#: give the heap's free top back to the system only above this
TRIM_THRESHOLD = 512 * 2 ** 20
#: grow the heap by this much more than asked
TOP_PAD = 64 * 2 ** 20

_done = False


def keep_freed_memory() -> bool:
    """Set the C heap's thresholds once (glibc on Linux; elsewhere nothing). Returns whether they are set."""
    global _done
    if _done:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        _done = all(libc.mallopt(param, value) == 1 for param, value in
                    ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))
    except (OSError, AttributeError):
        return False
    return _done
