"""The row records of every result kind: one dataclass a kind, its fields the kind's columns in file order.

    record        written by                        one per
    VerifyRow     lnbench verify                    backend × case × tensor
    SelftestRow   lnbench verify --self-test        planted bug × case × tensor
    PerfRow       lnbench perf                      case × worker, + one aggregate row per case
    AbiRow        lnbench abi-compare               runtime pair × case × metric, and static kernel pair
    InspectRow    lnbench inspect                   compiled kernel (static), emulated launch (executed)
    ProfileRow    lnbench perf --device emu         case × launch × target × mode (modelled, never measured)
    CompareRow    lnbench compare                   case of BASE and NEW
    HistoryRow    lnbench history                   series of the results store (case × machine × protocol)

Commands build these records (never dicts), so a column a writer names is declared here or the line that
builds the row fails; lnbench.results.kinds derives each kind's columns, CSV/JSON encoding and loader from them.

Column groups several kinds share are declared once, as bases (CheckColumns, SourceColumns, GpuColumns, ...): a
record's columns are its bases' in the order the bases are listed, then its own (lnbench.results.records.record).
A kind whose own columns come before a shared group declares them in a private base (_PerfCells, ...).
"""
from __future__ import annotations

from lnbench.constants import INSTRUCTION_CLASSES as CLASSES
from lnbench.results.records import Record, col, record


@record
class CheckColumns(Record):
    """The columns of a verify check (lnbench verify and its --self-test): the case, the tensor, its error against
    the bar, the status and the diagnosis."""

    backend: str | None = col("backend checked", required=True)
    case: str | None = col("case kind (random, offset rows, ...)", required=True)
    dtype: str | None = col("f32, f16 or bf16", required=True)
    shape: str | None = col("MxN", required=True)
    M: int | None = col("rows")
    N: int | None = col("row length")
    eps: float | None = col("LayerNorm eps")
    seed: int | None = col("input seed of the case")
    tensor: str | None = col("y, mean, rstd, dx, dweight, dbias, or - for a case without values", required=True)
    max_abs_err: float | None = col("max |backend − fp64 reference|")
    max_rel_err: float | None = col("max element-wise relative error (huge near zero references)")
    torch_err: float | None = col("torch's own max abs error in the same dtype")
    allowed: float | None = col("the pass bar (docs/verify.md)")
    margin: float | None = col("allowed − max_abs_err")
    determinism: str | None = col("dγ/dβ repeat check")
    status: str | None = col("PASS, FAIL, error, not run, compiled ...", required=True)
    detail: str | None = col("why a row failed or did not run")
    diagnosis: str | None = col("FAIL/error rows: the pattern the run's numbers fit (verify.diagnosis), else empty")


@record
class EmulatedColumns(Record):
    """What an emulated case executed (lnbench.emu.ledger)."""

    emu_opcodes: str | None = col("emulated: opcodes the case's launches executed")
    emu_approx: str | None = col("emulated: those the emulator approximates")
    emu_code: str | None = col("emulated: SHA-256 (12 hex digits) of each FlyDSL code object launched")


@record
class SourceColumns(Record):
    """The kernel source a row's backend drives (lnbench.backends.name_rows); empty for lnbench's own kernels."""

    source: str | None = col("kernel source backend name")
    source_module: str | None = col("its Python module")
    source_file: str | None = col("the module's file")
    source_commit: str | None = col("git commit of the file's checkout, or content:<12 hex> for a tree without git")


@record
class GpuColumns(Record):
    """--devices: the GPU a row ran on."""

    gpu: str | None = col("--devices: the GPU the row ran on (cuda:N)")
    gpu_model: str | None = col("--devices: its model")


@record
class AloneColumns(GpuColumns):
    """--devices: the GPU a timed row ran on, and whether it was timed alone."""

    timed_alone: bool | None = col("--devices: timed with every other GPU idle (host-bound case)")


@record
class VerifyRow(CheckColumns, EmulatedColumns, SourceColumns, GpuColumns):
    """One check of lnbench verify: a backend × case × tensor."""


@record
class _PlantedBug(Record):
    """The planted bug a self-test row checks (SelftestRow's first column)."""

    planted_bug: str | None = col("planted bug (or control) in a copy of the reference math", required=True)


@record
class SelftestRow(_PlantedBug, CheckColumns):
    """One check of lnbench verify --self-test: a planted bug × case × tensor."""

    backend: str | None = col("the planted copy's name")


@record
class _PerfCells(Record):
    """PerfRow's own columns before its shared groups."""

    backend: str | None = col("backend timed", required=True)
    op: str | None = col("fwd or bwd", required=True)
    dtype: str | None = col("f32, f16 or bf16", required=True)
    shape: str | None = col("MxN", required=True)
    M: int | None = col("rows")
    N: int | None = col("row length")
    mode: str | None = col("timing mode (hot, cold)", required=True)
    row_kind: str | None = col("worker (one worker's runs) or aggregate (across workers)", required=True)
    worker: int | None = col("worker index (worker rows)")
    order: int | None = col("the case's place in its worker's order")
    iters: int | None = col("calls per run (I)")
    runs: int | None = col("timed runs (R)")
    run_us: list[float] | None = col("µs per call of each run (aggregate: each worker's median)")
    median_us: float | None = col("median µs per call (aggregate: median of worker medians)")
    min_us: float | None = col("fastest, µs")
    max_us: float | None = col("slowest, µs")
    spread_pct: float | None = col("(max − min) / median, %")
    gbps: float | None = col("GB/s at the headline time")
    pct_peak: float | None = col("% of the measured copy bandwidth")
    above_peak: bool | None = col("gbps above the peak")
    speedup: float | None = col("baseline time / this time (aggregate rows)")
    nbytes: int | None = col("bytes moved per call")
    sets: int | None = col("input sets rotated (cold mode)")
    working_set_mib: float | None = col("bytes touched per call, MiB")
    llc_mib: float | None = col("last-level cache size used, MiB")
    timer: str | None = col("what timed the runs")
    warmup_calls: int | None = col("warm-up calls")
    warmup_s: float | None = col("warm-up seconds")
    note: str | None = col("remarks")
    kernel_status: str | None = col("kernel timer: ok, n/a (why), error (why), partial")
    kernel_us: float | None = col("median GPU kernel time per call, µs")
    kernel_min_us: float | None = col("fastest kernel time, µs")
    kernel_max_us: float | None = col("slowest kernel time, µs")
    kernels_per_call: float | None = col("kernel launches per call")
    kernel_names: str | None = col("kernel names and counts (JSON)")
    gap_us: float | None = col("event time − kernel time, µs")
    kernel_run_us: list[float] | None = col("kernel µs per call of each run")
    kernel_window_us: float | None = col("traced window per call, µs")
    kernel_untraced_window_us: float | None = col("the same window without tracing, µs")
    kernel_note: str | None = col("kernel timer remarks")
    headline: str | None = col("stream or kernel: the time rates use")
    worker_flag: str | None = col("why a worker stands out")
    status: str | None = col("ok, partial, error, not run", required=True)
    detail: str | None = col("why a row is not ok")
    iters_range: str | None = col("min-max calls per run across workers")


@record
class PerfRow(_PerfCells, SourceColumns, AloneColumns):
    """One row of lnbench perf: a case's worker (row_kind worker) or the case across workers (aggregate)."""

    host_fraction: float | None = col("share of an untimed run the host spent issuing its calls (1: host-bound)")
    alone_reason: str | None = col("--devices: size (bytes per call below alone_below_mib) or measured (host_fraction)")


@record
class _AbiCells(Record):
    """AbiRow's own columns before its shared group."""

    part: str | None = col("runtime or static", required=True)
    pair: str | None = col("the call-path pair compared")
    op: str | None = col("fwd, fwd-nostats or bwd")
    dtype: str | None = col("f32, f16 or bf16")
    shape: str | None = col("MxN (runtime)")
    M: int | None = col("rows")
    N: int | None = col("row length")
    metric: str | None = col("direct, wrapper or device (runtime)")
    tensor_label: str | None = col("what the Tensor slot runs")
    pointer_label: str | None = col("what the Pointer slot runs")
    tensor_us: float | None = col("tensor side: median of worker medians, µs per call")
    tensor_min_us: float | None = col("tensor side: fastest worker, µs")
    tensor_max_us: float | None = col("tensor side: slowest worker, µs")
    pointer_us: float | None = col("pointer side: median of worker medians, µs per call")
    pointer_min_us: float | None = col("pointer side: fastest worker, µs")
    pointer_max_us: float | None = col("pointer side: slowest worker, µs")
    tensor_calls_per_s: float | None = col("Tensor calls per second")
    pointer_calls_per_s: float | None = col("Pointer calls per second")
    speedup: float | None = col("tensor_us / pointer_us")
    ci_low: float | None = col("speed-up, paired bootstrap interval, low")
    ci_high: float | None = col("speed-up, paired bootstrap interval, high")
    confidence: float | None = col("the interval's confidence")
    mw_p: float | None = col("Mann-Whitney p")
    verdict: str | None = col("FASTER, SAME, SLOWER, too few runs (lnbench.results.verdicts)")
    slowdown_pct: float | None = col("Pointer slower by, %")
    iters: int | None = col("calls per run")
    workers: int | None = col("workers")
    runs: int | None = col("runs per worker")
    spin_short: int | None = col("device runs whose spin ended early")
    status: str | None = col("ok, error, not run ...", required=True)
    worker_flag: str | None = col("why a worker stands out")
    detail: str | None = col("remarks")
    scope: str | None = col("what a runtime row measured (host only on the null device)")
    tensor_kernel_status: str | None = col("Tensor side: kernel timer: ok, n/a (why), error (why), partial")
    tensor_kernel_us: float | None = col("Tensor side: median GPU kernel time per call, µs")
    tensor_kernel_min_us: float | None = col("Tensor side: fastest kernel time, µs")
    tensor_kernel_max_us: float | None = col("Tensor side: slowest kernel time, µs")
    tensor_kernels_per_call: float | None = col("Tensor side: kernel launches per call")
    tensor_kernel_names: str | None = col("Tensor side: kernel names and counts (JSON)")
    tensor_gap_us: float | None = col("Tensor side: event time − kernel time, µs")
    pointer_kernel_status: str | None = col("Pointer side: kernel timer: ok, n/a (why), error (why), partial")
    pointer_kernel_us: float | None = col("Pointer side: median GPU kernel time per call, µs")
    pointer_kernel_min_us: float | None = col("Pointer side: fastest kernel time, µs")
    pointer_kernel_max_us: float | None = col("Pointer side: slowest kernel time, µs")
    pointer_kernels_per_call: float | None = col("Pointer side: kernel launches per call")
    pointer_kernel_names: str | None = col("Pointer side: kernel names and counts (JSON)")
    pointer_gap_us: float | None = col("Pointer side: event time − kernel time, µs")
    kernel_speedup: float | None = col("kernel-time speed-up Tensor / Pointer")
    kernel_ci_low: float | None = col("its paired bootstrap interval, low")
    kernel_ci_high: float | None = col("its interval, high")
    kernel_verdict: str | None = col("its verdict (lnbench.results.verdicts)")
    arch: str | None = col("static: target arch")
    kernel: str | None = col("static: kernel role")
    tensor_kernel: str | None = col("static: Tensor-side kernel name")
    pointer_kernel: str | None = col("static: Pointer-side kernel name")
    kernarg_tensor: int | None = col("static: kernarg bytes, tensor side")
    kernarg_pointer: int | None = col("static: kernarg bytes, pointer side")
    slots_tensor: int | None = col("static: launcher slots, tensor side")
    slots_pointer: int | None = col("static: launcher slots, pointer side")
    vgpr_tensor: int | None = col("static: VGPRs, tensor side")
    vgpr_pointer: int | None = col("static: VGPRs, pointer side")
    sgpr_tensor: int | None = col("static: SGPRs, tensor side")
    sgpr_pointer: int | None = col("static: SGPRs, pointer side")
    lds_tensor: int | None = col("static: LDS bytes, tensor side")
    lds_pointer: int | None = col("static: LDS bytes, pointer side")
    scratch_tensor: int | None = col("static: scratch bytes, tensor side")
    scratch_pointer: int | None = col("static: scratch bytes, pointer side")
    instr_tensor: int | None = col("static: ISA instructions, tensor side")
    instr_pointer: int | None = col("static: ISA instructions, pointer side")
    args_tensor: int | None = col("static: kernel arguments, tensor side")
    args_pointer: int | None = col("static: kernel arguments, pointer side")
    spills_tensor: int | None = col("static: VGPR + SGPR spills, tensor side")
    spills_pointer: int | None = col("static: VGPR + SGPR spills, pointer side")
    kernarg_ratio: float | None = col("static: kernarg pointer / tensor")
    args_ratio: float | None = col("static: args pointer / tensor")
    slots_ratio: float | None = col("static: slots pointer / tensor")
    instr_ratio: float | None = col("static: instr pointer / tensor")
    tensor_args_list: str | None = col("static: Tensor kernel arguments offset:size:kind")
    pointer_args_list: str | None = col("static: Pointer kernel arguments offset:size:kind")
    exec_rows: int | None = col("executed (emulated): rows M")
    modelled: bool | None = col("abi-compare --device emu: the *_bound_us columns are modelled floors, not "
                                "measurements")
    target: str | None = col("modelled: the Instinct target of the floors")
    tensor_bound_us: float | None = col("modelled: tensor side's device floor, µs (hot; summed over launches)")
    pointer_bound_us: float | None = col("modelled: pointer side's device floor, µs (hot; summed over launches)")
    tensor_bound_by: str | None = col("modelled: what bounds the tensor side's largest launch")
    pointer_bound_by: str | None = col("modelled: what bounds the pointer side's largest launch")
    tensor_limit: str | None = col("tensor side: what limits a hot call, host (measured) or device (modelled floor)")
    pointer_limit: str | None = col("pointer side: what limits a hot call, host (measured) or device (modelled floor)")
    exec_tensor: int | None = col("executed: wave-instructions, tensor side")
    exec_pointer: int | None = col("executed: wave-instructions, pointer side")
    exec_per_row_tensor: float | None = col("executed: wave-instructions per row, tensor side")
    exec_per_row_pointer: float | None = col("executed: wave-instructions per row, pointer side")
    exec_ratio: float | None = col("executed: pointer / tensor wave-instructions")
    exec_salu_tensor: int | None = col("executed: salu wave-instructions, tensor side")
    exec_salu_pointer: int | None = col("executed: salu wave-instructions, pointer side")
    exec_valu_tensor: int | None = col("executed: valu wave-instructions, tensor side")
    exec_valu_pointer: int | None = col("executed: valu wave-instructions, pointer side")
    exec_vmem_load_tensor: int | None = col("executed: vmem_load wave-instructions, tensor side")
    exec_vmem_load_pointer: int | None = col("executed: vmem_load wave-instructions, pointer side")
    exec_vmem_store_tensor: int | None = col("executed: vmem_store wave-instructions, tensor side")
    exec_vmem_store_pointer: int | None = col("executed: vmem_store wave-instructions, pointer side")
    exec_smem_tensor: int | None = col("executed: smem wave-instructions, tensor side")
    exec_smem_pointer: int | None = col("executed: smem wave-instructions, pointer side")
    exec_lds_tensor: int | None = col("executed: lds wave-instructions, tensor side")
    exec_lds_pointer: int | None = col("executed: lds wave-instructions, pointer side")
    exec_cross_lane_tensor: int | None = col("executed: cross_lane wave-instructions, tensor side")
    exec_cross_lane_pointer: int | None = col("executed: cross_lane wave-instructions, pointer side")
    exec_branch_tensor: int | None = col("executed: branch wave-instructions, tensor side")
    exec_branch_pointer: int | None = col("executed: branch wave-instructions, pointer side")
    exec_sync_tensor: int | None = col("executed: sync wave-instructions, tensor side")
    exec_sync_pointer: int | None = col("executed: sync wave-instructions, pointer side")
    exec_code_tensor: str | None = col("executed: SHA-256 (16 hex digits) of the tensor side's code object")
    exec_code_pointer: str | None = col("executed: SHA-256 (16 hex digits) of the pointer side's code object")
    exec_status: str | None = col("executed: ok or error (why)")
    tensor_source: str | None = col("backend pair: the Tensor slot's kernels (module@commit)")
    pointer_source: str | None = col("backend pair: the Pointer slot's kernels (module@commit)")


@record
class AbiRow(_AbiCells, AloneColumns):
    """One row of lnbench abi-compare: a runtime pair × case × metric, or a static kernel pair."""


@record
class _InspectCells(Record):
    """InspectRow's own columns before its shared group."""

    part: str | None = col("static (compiled) or executed (emulated launch)", required=True)
    backend: str | None = col("kernels inspected", required=True)
    abi: str | None = col("pointer or tensor")
    dgamma_strategy: str | None = col("deterministic or atomic (bwd)")
    arch: str | None = col("gfx942 or gfx950", required=True)
    op: str | None = col("fwd, fwd-nostats or bwd", required=True)
    dtype: str | None = col("f32, f16 or bf16", required=True)
    n: int | None = col("row length N")
    kernel_name: str | None = col("kernel symbol")
    kernarg_bytes: int | None = col("kernarg segment bytes")
    kernel_args: str | None = col("arguments offset:size:kind")
    launcher_slots: int | None = col("host dispatch slots")
    vgpr: int | None = col("VGPRs")
    sgpr: int | None = col("SGPRs")
    agpr: int | None = col("AGPRs")
    vgpr_spills: int | None = col("VGPR spills")
    sgpr_spills: int | None = col("SGPR spills")
    lds_bytes: int | None = col("static LDS bytes")
    scratch_bytes: int | None = col("scratch bytes")
    loads_128bit: bool | None = col("ISA has 128-bit loads")
    stores_128bit: bool | None = col("ISA has 128-bit stores")
    instruction_count: int | None = col("ISA instructions")
    vectorized: bool | None = col("the plan's vector path")
    arg_count: int | None = col("kernel arguments")
    spills: str | None = col("VGPR/SGPR spills")
    status: str | None = col("ok, error, not run", required=True)
    detail: str | None = col("why not ok")
    isa_file: str | None = col("--isa: the file written")
    M: int | None = col("executed: rows")
    shape: str | None = col("executed: MxN")
    grid: str | None = col("executed: grid")
    block: str | None = col("executed: block")
    waves: int | None = col("executed: waves launched")
    exec_instructions: int | None = col("executed: wave-instructions")
    exec_instructions_per_row: float | None = col("executed: wave-instructions per row")
    global_bytes_loaded: int | None = col("executed: global bytes loaded")
    global_bytes_stored: int | None = col("executed: stored")
    global_bytes_per_row: float | None = col("executed: global bytes per row")
    lds_bytes_executed: int | None = col("executed: LDS bytes")
    code_object: str | None = col("executed: SHA-256 (16 hex digits) of the code object launched")
    unique_bytes_loaded: int | None = col("executed: distinct bytes loaded")
    unique_bytes_stored: int | None = col("executed: distinct bytes stored")
    lds_bank_cycles: int | None = col("executed: LDS clocks of ds_read/ds_write at 32 banks × 4 bytes "
                                      "(lnbench/emu/lds_banks.py)")
    lds_conflict_cycles: int | None = col("executed: those clocks beyond one per pass (bank conflicts)")
    exec_salu: int | None = col("executed: salu wave-instructions")
    exec_valu: int | None = col("executed: valu wave-instructions")
    exec_vmem_load: int | None = col("executed: vmem_load wave-instructions")
    exec_vmem_store: int | None = col("executed: vmem_store wave-instructions")
    exec_smem: int | None = col("executed: smem wave-instructions")
    exec_lds: int | None = col("executed: lds wave-instructions")
    exec_cross_lane: int | None = col("executed: cross_lane wave-instructions")
    exec_branch: int | None = col("executed: branch wave-instructions")
    exec_sync: int | None = col("executed: sync wave-instructions")
    kernel: str | None = col("executed: kernel role")
    launch: str | None = col("executed: grid × block")
    unique_bytes: str | None = col("executed: distinct bytes loaded / stored")


@record
class InspectRow(_InspectCells, SourceColumns):
    """One row of lnbench inspect: a compiled kernel (static) or an emulated launch (executed)."""


@record
class CompareRow(Record):
    """One case of lnbench compare: BASE against NEW."""

    backend: str | None = col("backend (abi-compare: pair:side)", required=True)
    op: str | None = col("op", required=True)
    dtype: str | None = col("dtype", required=True)
    shape: str | None = col("MxN", required=True)
    mode: str | None = col("perf mode (abi-compare: metric)", required=True)
    base_us: float | None = col("BASE headline, µs")
    new_us: float | None = col("NEW headline, µs")
    ratio: float | None = col("new / base")
    ci_low: float | None = col("interval, low")
    ci_high: float | None = col("interval, high")
    change_pct: float | None = col("(ratio − 1) × 100")
    p: float | None = col("paired t p")
    verdict: str | None = col("SLOWER, FASTER, SAME, too few runs, only in base/new, not compared "
                              "(lnbench.results.verdicts)", required=True)
    workers: int | None = col("paired workers")
    detail: str | None = col("remarks")
    peer_shift_pct: float | None = col("the session shift (%) the other backends' cases of this shape and mode show; "
                                       "the run noise floor when above [compare] run_noise_pct")
    launch: str | None = col("modelled: the kernel launch (role)")
    target: str | None = col("modelled: the Instinct target")
    modelled: bool | None = col("the times are modelled floors (lnbench perf --device emu), not measurements")
    changes: str | None = col("modelled: every profile and floor value that changed, base → new")


@record
class HistoryRow(Record):
    """One series of lnbench history: a case on one machine under one protocol, over the stored runs."""

    kind: str | None = col("the kind of result the series is of (perf, verify, abi-compare, ...)", required=True)
    backend: str | None = col("backend (abi-compare: pair; selftest: planted bug)")
    op: str | None = col("op")
    dtype: str | None = col("dtype")
    shape: str | None = col("MxN")
    mode: str | None = col("perf mode, abi-compare metric, verify tensor, ...")
    case_name: str | None = col("the rest of the case's key")
    machine: str | None = col("device name/model | driver | host CPU")
    unit: str | None = col("what `latest` measures: us, ratio, abs_err, ...")
    series_id: int | None = col("the series' id in the store", required=True)
    runs: int | None = col("runs of the series read (--last, filters)", required=True)
    latest: float | None = col("the newest run's value")
    latest_status: str | None = col("the newest run's status (PASS, FAIL, error, ok, a compare verdict, ...)",
                                    required=True)
    latest_commit: str | None = col("the newest run's commit (-dirty when uncommitted)")
    since: str | None = col("verify, selftest: the commit since which the case FAILs or errors ('' when it passes)")
    trend: str | None = col("the last 24 values as a sparkline, low to high")
    newest_change_pct: float | None = col("the newest change point's size, % (--fail-on-regression reads it)")
    changes_text: str | None = col("every change point: FROM..TO commits, size, p, adjusted p (the JSON's `series` "
                                   "has them as lists, with each one's ratio, interval and cause)")
    noise_pct: float | None = col("a measured series' noise: about 95% of its runs within ± this many % (run to run "
                                  "and inside runs, the larger)")
    detectable_pct: float | None = col("the smallest step (%) the gate finds 80% of the time with 2 new runs judged "
                                       "against the runs read")
    commits: int | None = col("distinct commits among the runs read (one commit: no code change to judge)")
    shifts_text: str | None = col("shifts between runs of one commit: the machine's, never gated")
    noise_text: str | None = col("noise_pct and detectable_pct as the table shows them")
    gate: str | None = col("--fail-on-regression: why the series passes, or FAILS")
    flydsl_flag: str | None = col("an imported FlyDSL series: FlyDSL's own flags of the newest run (its regression "
                                  "flag, its change vs main and vs its tag)")
    flydsl_regression: bool | None = col("an imported FlyDSL series: FlyDSL's regression flag of the newest run")
    flydsl_vs_main_pct: float | None = col("an imported FlyDSL series: the newest run's change vs main, % (FlyDSL's)")
    flydsl_vs_tag_pct: float | None = col("an imported FlyDSL series: the newest run's change vs its tag, % "
                                          "(FlyDSL's)")


#: the floors of a modelled row (lnbench.modelled.floors), µs
FLOOR_COLUMNS = ("memory_us", *(f"issue_{c}_us" for c in CLASSES), "lds_us", "launch_us", "bound_us")




@record
class _ProfileCells(Record):
    """ProfileRow's own columns before its shared group."""

    modelled: bool | None = col("always true: lower bounds from the emulated profile and published figures, not "
                                "timings", required=True)
    backend: str | None = col("backend profiled", required=True)
    op: str | None = col("fwd, fwd-nostats or bwd", required=True)
    dtype: str | None = col("f32, f16, bf16", required=True)
    shape: str | None = col("MxN", required=True)
    M: int | None = col("rows")
    N: int | None = col("row length")
    launch: str | None = col("the launch's kernel role (ln_fwd, ln_bwd_det, ln_bwd_reduce, ...)", required=True)
    kernel_name: str | None = col("the kernel's symbol")
    abi: str | None = col("pointer or tensor")
    dgamma_strategy: str | None = col("bwd: deterministic or atomic")
    arch: str | None = col("the emulated arch")
    target: str | None = col("the Instinct target of the floors ([targets.NAME])", required=True)
    mode: str | None = col("cold (HBM) or hot (last-level cache when the working set fits)", required=True)
    status: str | None = col("ok, error, not run", required=True)
    detail: str | None = col("why a case did not run")
    grid: str | None = col("workgroups, x×y×z")
    block: str | None = col("threads per workgroup, x×y×z")
    workgroups: int | None = col("workgroups launched")
    waves_per_group: int | None = col("waves per workgroup")
    exec_instructions: int | None = col("wave-instructions executed")
    exec_salu: int | None = col("salu wave-instructions")
    exec_valu: int | None = col("valu wave-instructions")
    exec_vmem_load: int | None = col("vmem_load wave-instructions")
    exec_vmem_store: int | None = col("vmem_store wave-instructions")
    exec_smem: int | None = col("smem wave-instructions")
    exec_lds: int | None = col("lds wave-instructions")
    exec_cross_lane: int | None = col("cross_lane wave-instructions")
    exec_branch: int | None = col("branch wave-instructions")
    exec_sync: int | None = col("sync wave-instructions")
    unique_bytes_loaded: int | None = col("distinct global bytes loaded (compulsory)")
    unique_bytes_stored: int | None = col("distinct global bytes stored (compulsory)")
    global_bytes_loaded: int | None = col("global bytes the load instructions moved (a re-read counts again)")
    global_bytes_stored: int | None = col("global bytes the store instructions moved")
    lds_bytes: int | None = col("LDS bytes read and written")
    lds_bank_cycles: int | None = col("LDS clocks at 32 banks × 4 bytes, conflicts included")
    lds_conflict_cycles: int | None = col("LDS clocks beyond one per pass (bank conflicts)")
    vgprs: int | None = col("VGPRs per wave")
    agprs: int | None = col("AGPRs per wave")
    sgprs: int | None = col("SGPRs per wave")
    lds_alloc: int | None = col("LDS bytes per workgroup")
    waves_per_simd: int | None = col("occupancy: waves per SIMD the registers allow")
    workgroups_per_cu: int | None = col("occupancy: workgroups per CU")
    occupancy_limiter: str | None = col("what limits occupancy: slots, vgprs, sgprs, lds, workgroup size")
    busiest_cu_workgroups: int | None = col("workgroups on the busiest CU: ceil(workgroups / CUs)")
    intensity: float | None = col("VALU lane-operations per distinct byte (the roofline's x)")
    memory_us: float | None = col("modelled floor, µs: memory")
    issue_salu_us: float | None = col("modelled floor, µs: issue_salu")
    issue_valu_us: float | None = col("modelled floor, µs: issue_valu")
    issue_vmem_load_us: float | None = col("modelled floor, µs: issue_vmem_load")
    issue_vmem_store_us: float | None = col("modelled floor, µs: issue_vmem_store")
    issue_smem_us: float | None = col("modelled floor, µs: issue_smem")
    issue_lds_us: float | None = col("modelled floor, µs: issue_lds")
    issue_cross_lane_us: float | None = col("modelled floor, µs: issue_cross_lane")
    issue_branch_us: float | None = col("modelled floor, µs: issue_branch")
    issue_sync_us: float | None = col("modelled floor, µs: issue_sync")
    lds_us: float | None = col("modelled floor, µs: lds")
    launch_us: float | None = col("modelled floor, µs: launch")
    bound_us: float | None = col("modelled lower bound on the launch's time: the largest floor, µs")
    bound_by: str | None = col("the floor that sets bound_us")
    notes: str | None = col("floors not computed and why (a figure that is not published)")
    code_object: str | None = col("SHA-256 (16 hex digits) of the code object that executed")


@record
class ProfileRow(_ProfileCells, SourceColumns):
    """One launch of lnbench perf --device emu on one target in one mode: its profile and modelled floors."""
