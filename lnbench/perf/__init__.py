"""`lnbench perf` and `lnbench peak`: multi-process median timing of LayerNorm kernels.

Modules, one job each:
    protocol     the Protocol dataclass (P, R, warm-up, I bounds, timeout, modes, ops) and its validation
    timing       measure() / Measurement / synchronize(): warm-up, loop-count calibration, R timed runs
    kernel_timer profiled runs on a GPU: the kernels' own durations from torch's profiler (CUPTI / roctracer)
    kernel_stats kernel-timer records -> per-run, per-worker and aggregate kernel time (pure; no GPU)
    workloads    per backend × op × mode: inputs and a zero-argument callable (cold-mode buffer rotation)
    bytes_model  bytes moved per call, per op (the documented byte model behind GB/s)
    workers      run_workers(): one subprocess per spec, sequentially, results read from JSON files
    worker_main  the worker process entry (`python -m lnbench.perf.worker_main SPEC RESULT`)
    aggregate    median of worker medians, min–max across workers, GB/s, % of peak, speed-up
    peak         `lnbench peak`: measured device-to-device copy bandwidth, cached under results/
    clocks       read-only nvidia-smi / amd-smi queries (driver, clocks), "unavailable" when absent
    command      the click commands `perf_command` ("perf") and `peak_command` ("peak")

Nothing here imports flydsl at import time; the worker imports backends lazily through the registry.
"""
