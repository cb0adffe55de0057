"""What this machine has and builds once: lnbench's cache folder (`cache_dirs`), install hints for optional
extras and missing dependencies (`install`), whether a ROCm GPU is present (`rocm`), and the zig toolchain that
links FlyDSL's code objects and builds the emulator's helpers (`zig`).

Layer 0 (leaf utilities): imports nothing of lnbench but lnbench.errors and lnbench.constants.
"""
