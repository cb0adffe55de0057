"""What this machine has and builds once: lnbench's cache folder (`cache_dirs`), install hints for optional
extras and missing dependencies (`install`), whether a ROCm GPU is present (`rocm`), and the zig toolchain that
links FlyDSL's code objects and builds the emulator's helpers (`zig`); which lnbench code ran, how and when
(`checkout`: the git commit or a content hash, the command line, the time).

Layer 0 (leaf utilities): imports nothing of lnbench but the package itself, lnbench.errors and lnbench.constants.
"""
