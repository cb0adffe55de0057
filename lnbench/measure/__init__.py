"""The measurement core that `perf`, `abi-compare` and `compare` share; none of them imports another's internals.
Their worker processes are lnbench.run's (pool, workers, units).

Modules, one job each:
    protocol     the Protocol dataclass (P, R, warm-up, I bounds, timeout, kernel timer) and its validation;
                 perf extends it with its modes and ops (lnbench.perf.protocol)
    timing       measure() / Measurement / synchronize(): warm-up, loop-count calibration, R timed runs
    kernel_timer profiled runs on a GPU: the kernels' own durations from torch's profiler (CUPTI / roctracer)
    kernel_stats kernel-timer records -> per-run, per-worker and aggregate kernel time (pure; no GPU)
    load         the timing lock and the machine-load check taken around timed work
    cache        the device's last-level cache and free memory
    stats        A/B statistics (BASE vs NEW): abi-compare's paired bootstrap speed-up and Mann–Whitney U, the
                 paired worker interval of `compare`, and the worker flags (verdict words: lnbench.results.verdicts)

Nothing here imports a command package (perf, abi, compare, plot) or flydsl.
"""
