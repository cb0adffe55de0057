"""`lnbench perf` and `lnbench peak`: multi-process median timing of LayerNorm kernels.

Modules, one job each:
    options      PerfOptions: perf's click options as one typed record (both plans below take it)
    plan         `lnbench perf`'s plan (PerfPlan, build_plan): options and config checked once (over
                 lnbench.scaffold.setup: config, kernel source, preflight, shapes, outputs)
    modelled     `perf --device emu`'s plan and run (build_modelled_plan, run_modelled): profiles, modelled floors
    cases        the cases: backend × op × dtype × shape × mode
    spread       which cases run on which GPU and when (--devices): the plan's groups, their worker specs, running them
    workers      the workers stage (time_groups): every group's worker processes, one progress bar and estimate
    protocol     PerfProtocol: the shared timing protocol (lnbench.measure.protocol) plus modes, ops, cold mode
    workloads    per backend × op × mode: inputs and a zero-argument callable (cold-mode buffer rotation)
    bytes_model  bytes moved per call, per op (the documented byte model behind GB/s)
    worker_main  the worker process entry (`python -m lnbench.perf.worker_main SPEC RESULT`)
    messages     what crosses between parent and worker: PerfWorkerSpec, PerfWorkerPayload (JSON at the boundary)
    aggregate    median of worker medians, min–max across workers, GB/s, % of peak, speed-up; run_rows: the
                 groups' rows joined (the aggregate stage)
    outputs      the outputs stage (write_outputs): the run record finished, tables, files
    peak         the measured device-to-device copy bandwidth and its cache under results/ (perf's % peak)
    peak_run     `lnbench peak`'s plan (PeakPlan, build_peak_plan) and run (run_peak)
    tables       what perf and peak print (print_rows, print_peak)
    command      the click commands `perf_command` ("perf") and `peak_command` ("peak"); perf's `run` reads
                 plan → workers → aggregate → outputs, each stage entered once

Timing, worker processes, kernel timer and statistics live in lnbench.measure (shared with abi-compare).
Nothing here imports flydsl at import time; the worker imports backends lazily through the registry.
"""
