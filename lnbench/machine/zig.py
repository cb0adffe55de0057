"""The zig binary of the ziglang package: the linker behind FlyDSL's toolkit (lnbench.flydsl.toolkit) and the C
compiler of the emulator's HIP stand-in (lnbench.emu.hip)."""
from __future__ import annotations

import os
from pathlib import Path


def zig_binary() -> Path | None:
    """Path of ziglang's zig, or None when the package is not installed."""
    try:
        import ziglang
    except ImportError:
        return None
    zig = Path(ziglang.__file__).parent / ("zig.exe" if os.name == "nt" else "zig")
    return zig if zig.exists() else None
