"""The measurement core that `perf`, `abi-compare`, `compare` (and, for its worker pool, `verify`) share; none of them imports another's internals.

Modules, one job each:
    protocol     the Protocol dataclass (P, R, warm-up, I bounds, timeout, kernel timer) and its validation;
                 perf extends it with its modes and ops (lnbench.perf.protocol)
    timing       measure() / Measurement / synchronize(): warm-up, loop-count calibration, R timed runs
    kernel_timer profiled runs on a GPU: the kernels' own durations from torch's profiler (CUPTI / roctracer)
    kernel_stats kernel-timer records -> per-run, per-worker and aggregate kernel time (pure; no GPU)
    pool         the worker processes of verify, perf and abi-compare: start, stderr tail, stop (one Pool)
    workers      run_workers(): one worker per spec, timed turns, results read from JSON files (perf, abi)
    units        run_units(): a queue of units dealt to the pool's workers as they come free (verify --jobs)
    load         the timing lock and the machine-load check taken around timed work
    cache        the device's last-level cache and free memory
    stats        A/B statistics (BASE vs NEW): abi-compare's paired bootstrap speed-up and Mann–Whitney U, the
                 paired worker interval of `compare`, and the worker flags (verdict words: lnbench.results.verdicts)

Nothing here imports a command package (perf, abi, compare, plot) or flydsl.
"""
