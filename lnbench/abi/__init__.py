"""`lnbench abi-compare`: the FlyDSL Tensor vs Pointer launch ABI, statically and at run time.

Modules, one job each:
    schedule      ABBA order of the two sides inside a worker; cases rotated so shapes alternate
    cases         Side / PairCase (what is timed) and the registry of pairs (flydsl, torch-entry, planted-slow)
    checks        before timing: both sides agree (bitwise for the forward), results match an fp32
                  reference, alternating shapes never returns a stale result
    pair_timing   the timing core of one worker (direct, wrapper, device), generic over a pair of callables
    workers       the runtime part's workers stage: which metrics can be measured here, P workers per device
    aggregate     worker payloads -> rows (median of worker medians, min–max, ratio, CI, verdict; runtime_rows:
                  the aggregate stage)
    worker_main   the worker process entry (lnbench.run.workers protocol)
    messages      what crosses between parent and worker: AbiWorkerSpec, AbiWorkerPayload (JSON at the boundary)
    flydsl_pairs  the ROCm pair built from lnbench.flydsl.launch
    torch_pairs   stand-in pairs that run anywhere (torch-entry, planted-slow)
    static        compile-only comparison of both ABIs' kernels (kernarg bytes, slots, registers, ...)
    command       the click command `abi_compare_command` ("abi-compare"); its `run` reads plan → workers →
                  aggregate → tables for the runtime part, then the static part, then the files

Statistics (BASE = Tensor, NEW = Pointer), timing and worker processes come from lnbench.measure.
Nothing here imports flydsl at import time.
"""
