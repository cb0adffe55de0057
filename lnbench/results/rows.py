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
"""
from __future__ import annotations

from lnbench.constants import INSTRUCTION_CLASSES as CLASSES
from lnbench.results.records import BOOL, FLOAT, INT, LIST, STR, cols, record_class

#: the GPU a row ran on, with --devices (lnbench.run.gpus); `timed_alone`: perf/abi-compare cases timed with the
#: other GPUs idle
_GPU = (("gpu", STR, "--devices: the GPU the row ran on (cuda:N)"), ("gpu_model", STR, "--devices: its model"))
_ALONE = (("timed_alone", BOOL, "--devices: timed with every other GPU idle (host-bound case)"),)
#: perf: how much of a run the host's launches took, and why a --devices case ran alone
_HOST = (("host_fraction", FLOAT, "share of an untimed run the host spent issuing its calls (1: host-bound)"),
         ("alone_reason", STR, "--devices: size (bytes per call below alone_below_mib) or measured (host_fraction)"))
#: a kernel source's provenance, on the rows of a `module:PKG.MOD` / flydsl-src backend (flydsl.contract)
_SOURCE = (("source", STR, "kernel source backend name"), ("source_module", STR, "its Python module"),
           ("source_file", STR, "the module's file"),
           ("source_commit", STR, "git commit of the file's checkout, or content:<12 hex> for a tree without git"))
_CASE = (("case", STR, "case kind (random, offset rows, ...)"), ("dtype", STR, "f32, f16 or bf16"),
         ("shape", STR, "MxN"), ("M", INT, "rows"), ("N", INT, "row length"), ("eps", FLOAT, "LayerNorm eps"),
         ("seed", INT, "input seed of the case"))
_CHECK = (("tensor", STR, "y, mean, rstd, dx, dweight, dbias, or - for a case without values"),
          ("max_abs_err", FLOAT, "max |backend − fp64 reference|"),
          ("max_rel_err", FLOAT, "max element-wise relative error (huge near zero references)"),
          ("torch_err", FLOAT, "torch's own max abs error in the same dtype"),
          ("allowed", FLOAT, "the pass bar (docs/verify.md)"), ("margin", FLOAT, "allowed − max_abs_err"),
          ("determinism", STR, "dγ/dβ repeat check"), ("status", STR, "PASS, FAIL, error, not run, compiled ..."),
          ("detail", STR, "why a row failed or did not run"),
          ("diagnosis", STR, "FAIL/error rows: the pattern the run's numbers fit (verify.diagnosis), else empty"))

VerifyRow = record_class("VerifyRow", cols(
    ("backend", STR, "backend checked"), *_CASE, *_CHECK,
    ("emu_opcodes", STR, "emulated: opcodes the case's launches executed"),
    ("emu_approx", STR, "emulated: those the emulator approximates"),
    ("emu_code", STR, "emulated: SHA-256 (12 hex digits) of each FlyDSL code object launched"),
    *_SOURCE, *_GPU, required=("backend", "case", "dtype", "shape", "tensor", "status")),
    __name__, 'One check of lnbench verify: a backend × case × tensor.')

SelftestRow = record_class("SelftestRow", cols(
    ("planted_bug", STR, "planted bug (or control) in a copy of the reference math"),
    ("backend", STR, "the planted copy's name"), *_CASE, *_CHECK,
    required=("planted_bug", "case", "dtype", "shape", "tensor", "status")),
    __name__, 'One check of lnbench verify --self-test: a planted bug × case × tensor.')

#: kernel-timer columns (measure.kernel_stats.row_columns), with their prefix
def _kernel(prefix: str = "", who: str = "") -> tuple[tuple[str, str, str], ...]:
    return ((f"{prefix}kernel_status", STR, f"{who}kernel timer: ok, n/a (why), error (why), partial"),
            (f"{prefix}kernel_us", FLOAT, f"{who}median GPU kernel time per call, µs"),
            (f"{prefix}kernel_min_us", FLOAT, f"{who}fastest kernel time, µs"),
            (f"{prefix}kernel_max_us", FLOAT, f"{who}slowest kernel time, µs"),
            (f"{prefix}kernels_per_call", FLOAT, f"{who}kernel launches per call"),
            (f"{prefix}kernel_names", STR, f"{who}kernel names and counts (JSON)"),
            (f"{prefix}gap_us", FLOAT, f"{who}event time − kernel time, µs"))

PerfRow = record_class("PerfRow", cols(
    ("backend", STR, "backend timed"), ("op", STR, "fwd or bwd"), ("dtype", STR, "f32, f16 or bf16"),
    ("shape", STR, "MxN"), ("M", INT, "rows"), ("N", INT, "row length"), ("mode", STR, "timing mode (hot, cold)"),
    ("row_kind", STR, "worker (one worker's runs) or aggregate (across workers)"),
    ("worker", INT, "worker index (worker rows)"), ("order", INT, "the case's place in its worker's order"),
    ("iters", INT, "calls per run (I)"), ("runs", INT, "timed runs (R)"),
    ("run_us", LIST, "µs per call of each run (aggregate: each worker's median)"),
    ("median_us", FLOAT, "median µs per call (aggregate: median of worker medians)"),
    ("min_us", FLOAT, "fastest, µs"), ("max_us", FLOAT, "slowest, µs"),
    ("spread_pct", FLOAT, "(max − min) / median, %"), ("gbps", FLOAT, "GB/s at the headline time"),
    ("pct_peak", FLOAT, "% of the measured copy bandwidth"), ("above_peak", BOOL, "gbps above the peak"),
    ("speedup", FLOAT, "baseline time / this time (aggregate rows)"), ("nbytes", INT, "bytes moved per call"),
    ("sets", INT, "input sets rotated (cold mode)"), ("working_set_mib", FLOAT, "bytes touched per call, MiB"),
    ("llc_mib", FLOAT, "last-level cache size used, MiB"), ("timer", STR, "what timed the runs"),
    ("warmup_calls", INT, "warm-up calls"), ("warmup_s", FLOAT, "warm-up seconds"), ("note", STR, "remarks"),
    *_kernel(), ("kernel_run_us", LIST, "kernel µs per call of each run"),
    ("kernel_window_us", FLOAT, "traced window per call, µs"),
    ("kernel_untraced_window_us", FLOAT, "the same window without tracing, µs"),
    ("kernel_note", STR, "kernel timer remarks"), ("headline", STR, "stream or kernel: the time rates use"),
    ("worker_flag", STR, "why a worker stands out"), ("status", STR, "ok, partial, error, not run"),
    ("detail", STR, "why a row is not ok"), ("iters_range", STR, "min-max calls per run across workers"),
    *_SOURCE, *_GPU, *_ALONE, *_HOST, required=("backend", "op", "dtype", "shape", "mode", "row_kind", "status")),
    __name__, "One row of lnbench perf: a case's worker (row_kind worker) or the case across workers (aggregate).")

_SIDES = ("tensor", "pointer")
_STATIC_FIELDS = (("kernarg", "kernarg bytes"), ("slots", "launcher slots"), ("vgpr", "VGPRs"), ("sgpr", "SGPRs"),
                  ("lds", "LDS bytes"), ("scratch", "scratch bytes"), ("instr", "ISA instructions"),
                  ("args", "kernel arguments"), ("spills", "VGPR + SGPR spills"))

AbiRow = record_class("AbiRow", cols(
    ("part", STR, "runtime or static"), ("pair", STR, "the call-path pair compared"),
    ("op", STR, "fwd, fwd-nostats or bwd"), ("dtype", STR, "f32, f16 or bf16"), ("shape", STR, "MxN (runtime)"),
    ("M", INT, "rows"), ("N", INT, "row length"), ("metric", STR, "direct, wrapper or device (runtime)"),
    ("tensor_label", STR, "what the Tensor slot runs"), ("pointer_label", STR, "what the Pointer slot runs"),
    *((f"{s}_{what}", FLOAT, f"{s} side: {meaning}") for s in _SIDES
      for what, meaning in (("us", "median of worker medians, µs per call"), ("min_us", "fastest worker, µs"),
                            ("max_us", "slowest worker, µs"))),
    ("tensor_calls_per_s", FLOAT, "Tensor calls per second"), ("pointer_calls_per_s", FLOAT, "Pointer calls per second"),
    ("speedup", FLOAT, "tensor_us / pointer_us"), ("ci_low", FLOAT, "speed-up, paired bootstrap interval, low"),
    ("ci_high", FLOAT, "speed-up, paired bootstrap interval, high"),
    ("confidence", FLOAT, "the interval's confidence"),
    ("mw_p", FLOAT, "Mann-Whitney p"), ("verdict", STR, "FASTER, SAME, SLOWER, too few runs (lnbench.results.verdicts)"),
    ("slowdown_pct", FLOAT, "Pointer slower by, %"), ("iters", INT, "calls per run"), ("workers", INT, "workers"),
    ("runs", INT, "runs per worker"), ("spin_short", INT, "device runs whose spin ended early"),
    ("status", STR, "ok, error, not run ..."), ("worker_flag", STR, "why a worker stands out"),
    ("detail", STR, "remarks"), ("scope", STR, "what a runtime row measured (host only on the null device)"),
    *_kernel("tensor_", "Tensor side: "), *_kernel("pointer_", "Pointer side: "),
    ("kernel_speedup", FLOAT, "kernel-time speed-up Tensor / Pointer"),
    ("kernel_ci_low", FLOAT, "its paired bootstrap interval, low"),
    ("kernel_ci_high", FLOAT, "its interval, high"), ("kernel_verdict", STR, "its verdict (lnbench.results.verdicts)"),
    ("arch", STR, "static: target arch"), ("kernel", STR, "static: kernel role"),
    ("tensor_kernel", STR, "static: Tensor-side kernel name"), ("pointer_kernel", STR, "static: Pointer-side kernel name"),
    *((f"{what}_{s}", INT, f"static: {meaning}, {s} side") for what, meaning in _STATIC_FIELDS for s in _SIDES),
    *((f"{what}_ratio", FLOAT, f"static: {what} pointer / tensor") for what in ("kernarg", "args", "slots", "instr")),
    ("tensor_args_list", STR, "static: Tensor kernel arguments offset:size:kind"),
    ("pointer_args_list", STR, "static: Pointer kernel arguments offset:size:kind"),
    ("exec_rows", INT, "executed (emulated): rows M"),
    ("modelled", BOOL, "abi-compare --device emu: the *_bound_us columns are modelled floors, not measurements"),
    ("target", STR, "modelled: the Instinct target of the floors"),
    *((f"{s}_bound_us", FLOAT, f"modelled: {s} side's device floor, µs (hot; summed over launches)") for s in _SIDES),
    *((f"{s}_bound_by", STR, f"modelled: what bounds the {s} side's largest launch") for s in _SIDES),
    *((f"{s}_limit", STR, f"{s} side: what limits a hot call, host (measured) or device (modelled floor)")
      for s in _SIDES),
    *((f"exec_{s}", INT, f"executed: wave-instructions, {s} side") for s in _SIDES),
    *((f"exec_per_row_{s}", FLOAT, f"executed: wave-instructions per row, {s} side") for s in _SIDES),
    ("exec_ratio", FLOAT, "executed: pointer / tensor wave-instructions"),
    *((f"exec_{c}_{s}", INT, f"executed: {c} wave-instructions, {s} side") for c in CLASSES for s in _SIDES),
    *((f"exec_code_{s}", STR, f"executed: SHA-256 (16 hex digits) of the {s} side's code object") for s in _SIDES),
    ("exec_status", STR, "executed: ok or error (why)"),
    ("tensor_source", STR, "backend pair: the Tensor slot's kernels (module@commit)"),
    ("pointer_source", STR, "backend pair: the Pointer slot's kernels (module@commit)"),
    *_GPU, *_ALONE, required=("part", "status")),
    __name__, 'One row of lnbench abi-compare: a runtime pair × case × metric, or a static kernel pair.')

InspectRow = record_class("InspectRow", cols(
    ("part", STR, "static (compiled) or executed (emulated launch)"), ("backend", STR, "kernels inspected"),
    ("abi", STR, "pointer or tensor"), ("dgamma_strategy", STR, "deterministic or atomic (bwd)"),
    ("arch", STR, "gfx942 or gfx950"), ("op", STR, "fwd, fwd-nostats or bwd"), ("dtype", STR, "f32, f16 or bf16"),
    ("n", INT, "row length N"), ("kernel_name", STR, "kernel symbol"), ("kernarg_bytes", INT, "kernarg segment bytes"),
    ("kernel_args", STR, "arguments offset:size:kind"), ("launcher_slots", INT, "host dispatch slots"),
    ("vgpr", INT, "VGPRs"), ("sgpr", INT, "SGPRs"), ("agpr", INT, "AGPRs"), ("vgpr_spills", INT, "VGPR spills"),
    ("sgpr_spills", INT, "SGPR spills"), ("lds_bytes", INT, "static LDS bytes"), ("scratch_bytes", INT, "scratch bytes"),
    ("loads_128bit", BOOL, "ISA has 128-bit loads"), ("stores_128bit", BOOL, "ISA has 128-bit stores"),
    ("instruction_count", INT, "ISA instructions"), ("vectorized", BOOL, "the plan's vector path"),
    ("arg_count", INT, "kernel arguments"), ("spills", STR, "VGPR/SGPR spills"),
    ("status", STR, "ok, error, not run"), ("detail", STR, "why not ok"), ("isa_file", STR, "--isa: the file written"),
    ("M", INT, "executed: rows"), ("shape", STR, "executed: MxN"), ("grid", STR, "executed: grid"),
    ("block", STR, "executed: block"), ("waves", INT, "executed: waves launched"),
    ("exec_instructions", INT, "executed: wave-instructions"),
    ("exec_instructions_per_row", FLOAT, "executed: wave-instructions per row"),
    ("global_bytes_loaded", INT, "executed: global bytes loaded"), ("global_bytes_stored", INT, "executed: stored"),
    ("global_bytes_per_row", FLOAT, "executed: global bytes per row"), ("lds_bytes_executed", INT, "executed: LDS bytes"),
    ("code_object", STR, "executed: SHA-256 (16 hex digits) of the code object launched"),
    ("unique_bytes_loaded", INT, "executed: distinct bytes loaded"),
    ("unique_bytes_stored", INT, "executed: distinct bytes stored"),
    ("lds_bank_cycles", INT, "executed: LDS clocks of ds_read/ds_write at 32 banks × 4 bytes (lnbench/emu/lds_banks.py)"),
    ("lds_conflict_cycles", INT, "executed: those clocks beyond one per pass (bank conflicts)"),
    *((f"exec_{c}", INT, f"executed: {c} wave-instructions") for c in CLASSES),
    ("kernel", STR, "executed: kernel role"), ("launch", STR, "executed: grid × block"),
    ("unique_bytes", STR, "executed: distinct bytes loaded / stored"),
    *_SOURCE, required=("part", "backend", "arch", "op", "dtype", "status")),
    __name__, 'One row of lnbench inspect: a compiled kernel (static) or an emulated launch (executed).')

CompareRow = record_class("CompareRow", cols(
    ("backend", STR, "backend (abi-compare: pair:side)"), ("op", STR, "op"), ("dtype", STR, "dtype"),
    ("shape", STR, "MxN"), ("mode", STR, "perf mode (abi-compare: metric)"), ("base_us", FLOAT, "BASE headline, µs"),
    ("new_us", FLOAT, "NEW headline, µs"), ("ratio", FLOAT, "new / base"), ("ci_low", FLOAT, "interval, low"),
    ("ci_high", FLOAT, "interval, high"), ("change_pct", FLOAT, "(ratio − 1) × 100"), ("p", FLOAT, "paired t p"),
    ("verdict", STR, "SLOWER, FASTER, SAME, too few runs, only in base/new, not compared (lnbench.results.verdicts)"),
    ("workers", INT, "paired workers"), ("detail", STR, "remarks"),
    ("peer_shift_pct", FLOAT, "the session shift (%) the other backends' cases of this shape and mode show; the "
                              "run noise floor when above [compare] run_noise_pct"),
    ("launch", STR, "modelled: the kernel launch (role)"), ("target", STR, "modelled: the Instinct target"),
    ("modelled", BOOL, "the times are modelled floors (lnbench perf --device emu), not measurements"),
    ("changes", STR, "modelled: every profile and floor value that changed, base → new"),
    required=("backend", "op", "dtype", "shape", "mode", "verdict")),
    __name__, 'One case of lnbench compare: BASE against NEW.')

HistoryRow = record_class("HistoryRow", cols(
    ("kind", STR, "the kind of result the series is of (perf, verify, abi-compare, ...)"),
    ("backend", STR, "backend (abi-compare: pair; selftest: planted bug)"), ("op", STR, "op"), ("dtype", STR, "dtype"),
    ("shape", STR, "MxN"), ("mode", STR, "perf mode, abi-compare metric, verify tensor, ..."),
    ("case_name", STR, "the rest of the case's key"), ("machine", STR, "device name/model | driver | host CPU"),
    ("unit", STR, "what `latest` measures: us, ratio, abs_err, ..."), ("series_id", INT, "the series' id in the store"),
    ("runs", INT, "runs of the series read (--last, filters)"), ("latest", FLOAT, "the newest run's value"),
    ("latest_status", STR, "the newest run's status (PASS, FAIL, error, ok, a compare verdict, ...)"),
    ("latest_commit", STR, "the newest run's commit (-dirty when uncommitted)"),
    ("since", STR, "verify, selftest: the commit since which the case FAILs or errors ('' when it passes)"),
    ("trend", STR, "the last 24 values as a sparkline, low to high"),
    ("newest_change_pct", FLOAT, "the newest change point's size, % (--fail-on-regression reads it)"),
    ("changes_text", STR, "every change point: FROM..TO commits, size, p (the JSON's `series` has them as lists)"),
    required=("kind", "series_id", "runs", "latest_status")),
    __name__, 'One series of lnbench history: a case on one machine under one protocol, over the stored runs.')

#: the floors of a modelled row (lnbench.modelled.floors), µs
FLOOR_COLUMNS = ("memory_us", *(f"issue_{c}_us" for c in CLASSES), "lds_us", "launch_us", "bound_us")

ProfileRow = record_class("ProfileRow", cols(
    ("modelled", BOOL, "always true: lower bounds from the emulated profile and published figures, not timings"),
    ("backend", STR, "backend profiled"), ("op", STR, "fwd, fwd-nostats or bwd"), ("dtype", STR, "f32, f16, bf16"),
    ("shape", STR, "MxN"), ("M", INT, "rows"), ("N", INT, "row length"),
    ("launch", STR, "the launch's kernel role (ln_fwd, ln_bwd_det, ln_bwd_reduce, ...)"),
    ("kernel_name", STR, "the kernel's symbol"), ("abi", STR, "pointer or tensor"),
    ("dgamma_strategy", STR, "bwd: deterministic or atomic"), ("arch", STR, "the emulated arch"),
    ("target", STR, "the Instinct target of the floors ([targets.NAME])"),
    ("mode", STR, "cold (HBM) or hot (last-level cache when the working set fits)"),
    ("status", STR, "ok, error, not run"), ("detail", STR, "why a case did not run"),
    ("grid", STR, "workgroups, x×y×z"), ("block", STR, "threads per workgroup, x×y×z"),
    ("workgroups", INT, "workgroups launched"), ("waves_per_group", INT, "waves per workgroup"),
    ("exec_instructions", INT, "wave-instructions executed"),
    *((f"exec_{c}", INT, f"{c} wave-instructions") for c in CLASSES),
    ("unique_bytes_loaded", INT, "distinct global bytes loaded (compulsory)"),
    ("unique_bytes_stored", INT, "distinct global bytes stored (compulsory)"),
    ("global_bytes_loaded", INT, "global bytes the load instructions moved (a re-read counts again)"),
    ("global_bytes_stored", INT, "global bytes the store instructions moved"),
    ("lds_bytes", INT, "LDS bytes read and written"),
    ("lds_bank_cycles", INT, "LDS clocks at 32 banks × 4 bytes, conflicts included"),
    ("lds_conflict_cycles", INT, "LDS clocks beyond one per pass (bank conflicts)"),
    ("vgprs", INT, "VGPRs per wave"), ("agprs", INT, "AGPRs per wave"), ("sgprs", INT, "SGPRs per wave"),
    ("lds_alloc", INT, "LDS bytes per workgroup"),
    ("waves_per_simd", INT, "occupancy: waves per SIMD the registers allow"),
    ("workgroups_per_cu", INT, "occupancy: workgroups per CU"),
    ("occupancy_limiter", STR, "what limits occupancy: slots, vgprs, sgprs, lds, workgroup size"),
    ("busiest_cu_workgroups", INT, "workgroups on the busiest CU: ceil(workgroups / CUs)"),
    ("intensity", FLOAT, "VALU lane-operations per distinct byte (the roofline's x)"),
    *((name, FLOAT, f"modelled floor, µs: {name[:-3]}") for name in FLOOR_COLUMNS[:-1]),
    ("bound_us", FLOAT, "modelled lower bound on the launch's time: the largest floor, µs"),
    ("bound_by", STR, "the floor that sets bound_us"),
    ("notes", STR, "floors not computed and why (a figure that is not published)"),
    ("code_object", STR, "SHA-256 (16 hex digits) of the code object that executed"),
    *_SOURCE, required=("modelled", "backend", "op", "dtype", "shape", "launch", "target", "mode", "status")),
    __name__, 'One launch of lnbench perf --device emu on one target in one mode: its profile and modelled floors.')
