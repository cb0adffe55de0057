"""The scheduler: run one kernel launch of a code object over a grid of workgroups.

Workgroups run in batches (bounded memory). Within a batch every wave has its own PC; each step
takes the lowest PC among the runnable waves and executes that instruction for every wave sitting
there, with numpy over all of their lanes. Waves that branch apart rejoin when the lagging group
reaches the same PC, so uniform code costs one step per instruction however large the grid.
s_barrier parks a wave until every live wave of its workgroup has arrived.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
from collections.abc import Callable, Iterator

import numpy as np

from lnbench.emu.checks import CHECKS
from lnbench.emu.codeobject import CodeObject, Kernel, read_code_object
from lnbench.emu.decode import UNPLANNED, Program
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.access_store import Accesses
from lnbench.emu.fastpath import known_operands
from lnbench.emu.fastpath import plan as plan_fast
from lnbench.emu.hazards import Access, WaitcntChecker, access_of
from lnbench.emu.memory import Memory
from lnbench.emu.profile import LaunchProfile
from lnbench.emu.registry import OP_CLASS
from lnbench.emu.semantics import bind
from lnbench.emu.state import EXEC, WAVE, RecordingStep, Step, Waves

MAX_WAVES_PER_BATCH = 2048
#: descriptor FLOAT_MODE: round to nearest even (bits 0-3 = 0), keep f32 and f16/f64 denormals (bits 4-7 = 0xF)
SUPPORTED_FLOAT_MODE = 0xF0
MAX_STEPS = 50_000_000
_NO_PC = np.iinfo(np.int64).max


def _no_stop() -> None:
    return None


#: what the scheduler calls before every step to raise a stop (a signal) that the launch callback swallowed, so that
#: a stop is never turned into a result: the run machinery's check (lnbench.run.device.activate installs
#: lnbench.run.processes.check_stop with set_stop_check), passed in so that the emulator does not import the run machinery
_stop_check: Callable[[], None] = _no_stop


def set_stop_check(check: Callable[[], None] | None) -> None:
    """Install `check` as the scheduler's between-steps stop check (None: no check)."""
    global _stop_check
    _stop_check = check or _no_stop


def check_stop() -> None:
    """The installed stop check (set_stop_check): raises the pending stop, if any."""
    _stop_check()


@functools.lru_cache(maxsize=256)
def _parse(code_object: bytes) -> CodeObject:
    return read_code_object(code_object)


_programs: dict[tuple[str, str], tuple[Program, Accesses]] = {}


def program_for(code_object: bytes, kernel: Kernel) -> tuple[Program, Accesses]:
    """The kernel's decoded program and its per-PC register accesses (with those earlier processes stored), cached
    per code object hash and kernel."""
    key = (hashlib.sha1(code_object).hexdigest(), kernel.name)
    entry = _programs.get(key)
    if entry is None:
        entry = _programs[key] = (Program(kernel.code, kernel.name, bind, stored=True),
                                  Accesses(kernel.code, _acc_base(kernel)))
    return entry


def _acc_base(kernel: Kernel) -> int | None:
    """The register-file row of a0 (the descriptor's accum_offset) where the kernel uses AGPRs, else None."""
    return kernel.descriptor.accum_offset if int(kernel.metadata.get(".agpr_count", 0)) else None


def _initial_state(kernel: Kernel, arch: str, groups: list[tuple[int, int, int]], block: tuple[int, int, int],
                   waves_per_group: int, lds_bytes: int, kernarg_addr: int, first_group: int = 0) -> Waves:
    d = kernel.descriptor
    n = len(groups) * waves_per_group
    # gfx90a+ unified register file: .vgpr_count counts VGPRs and AGPRs; a0 sits at the descriptor's accum_offset
    nv = int(kernel.metadata.get(".vgpr_count", 0)) or 256
    agprs = int(kernel.metadata.get(".agpr_count", 0))
    nv = max(nv, d.accum_offset + agprs if agprs else 0)
    w = Waves(n, nv, len(groups), lds_bytes, d.private_segment_size, arch, acc_base=_acc_base(kernel))
    threads = block[0] * block[1] * block[2]
    # user SGPRs, in descriptor order
    flags = d.user_sgpr_flags
    sizes = {"private_segment_buffer": 4, "dispatch_ptr": 2, "queue_ptr": 2, "kernarg_segment_ptr": 2,
             "dispatch_id": 2, "flat_scratch_init": 2, "private_segment_size": 1}
    s = 0
    for name, size in sizes.items():
        if flags[name]:
            if name == "kernarg_segment_ptr":
                w.S[:, s] = kernarg_addr & 0xFFFFFFFF
                w.S[:, s + 1] = kernarg_addr >> 32
            elif name not in ("private_segment_size",):
                raise EmulatorFault(f"kernel {kernel.name}: user SGPR {name} is not supported by the emulator")
            s += size
    if s != d.user_sgpr_count:
        s = d.user_sgpr_count
    group_ids = np.repeat(np.asarray(groups, np.int64), waves_per_group, axis=0)      # (n, 3)
    for axis, enabled in enumerate(d.workgroup_id_enabled):
        if enabled:
            w.S[:, s] = group_ids[:, axis]
            s += 1
    if (d.rsrc2 >> 10) & 1:      # workgroup info
        s += 1
    if d.private_segment_enabled:
        w.S[:, s] = 0            # private segment wave offset: scratch is per wave here
        s += 1
    # work-item ids (packed x | y << 10 | z << 20) and EXEC for partial waves
    w.group = np.repeat(np.arange(len(groups)), waves_per_group)
    tid = (np.arange(waves_per_group)[:, None] * WAVE + np.arange(WAVE)[None, :])      # (waves, 64)
    x = tid % block[0]
    y = (tid // block[0]) % block[1]
    z = tid // (block[0] * block[1])
    packed = (x | (y << 10) | (z << 20)).astype(np.uint32)
    w.V[:, 0, :] = np.tile(packed, (len(groups), 1))
    live = tid < threads
    bits = np.packbits(live, axis=1, bitorder="little").view("<u8")[:, 0]
    bits = np.tile(bits, len(groups))
    w.S[:, EXEC] = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    w.S[:, EXEC + 1] = (bits >> np.uint64(32)).astype(np.uint32)
    w.global_group = np.repeat(np.arange(first_group, first_group + len(groups)), waves_per_group)
    return w


def _release_barriers(w: Waves, groups: np.ndarray) -> None:
    """Release every workgroup (among `groups`) whose live waves have all arrived."""
    ng = w.lds.shape[0]
    candidate = np.zeros(ng, bool)
    candidate[groups] = True
    has_live = np.bincount(w.group[w.alive], minlength=ng) > 0
    still_running = np.bincount(w.group[w.alive & ~w.waiting], minlength=ng) > 0
    release = (candidate & has_live & ~still_running)[w.group]          # per wave: its group is released
    if release.any():
        w.waiting[release & w.alive] = False
        w.epoch[release] += 1


def run_kernel(code_object: bytes, kernel_name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               dynamic_lds: int, kernarg_addr: int, memory: Memory, arch: str | None = None,
               checks: frozenset[str] | tuple[str, ...] = CHECKS) -> LaunchProfile:
    """Execute one launch with the sanitizer `checks` on; raises EmulatorFault naming kernel, PC and opcode."""
    co = _parse(bytes(code_object))
    kernel = co.kernels.get(kernel_name)
    if kernel is None:
        raise EmulatorFault(f"kernel {kernel_name} is not in the code object ({', '.join(co.kernels)})",
                            kernel=kernel_name)
    if kernel.metadata.get(".wavefront_size", 64) != 64:
        raise EmulatorFault(f"kernel {kernel_name}: only wave64 code runs here", kernel=kernel_name)
    mode = kernel.descriptor.float_mode
    if mode != SUPPORTED_FLOAT_MODE:
        raise EmulatorFault(f"kernel {kernel_name}: float mode 0x{mode:02x} in its descriptor; the emulator runs "
                            f"0x{SUPPORTED_FLOAT_MODE:02x} (round to nearest even, f32/f16/f64 denormals kept)",
                            kernel=kernel_name)
    threads = block[0] * block[1] * block[2]
    if threads < 1 or threads > 1024:
        raise EmulatorFault(f"kernel {kernel_name}: block of {threads} threads", kernel=kernel_name)
    req = kernel.metadata.get(".reqd_workgroup_size")
    if req and tuple(req) != tuple(block):
        raise EmulatorFault(f"kernel {kernel_name} requires workgroup size {tuple(req)}, launched with {block}",
                            kernel=kernel_name)
    prog, accesses = program_for(bytes(code_object), kernel)
    waves_per_group = -(-threads // WAVE)
    lds_bytes = kernel.descriptor.group_segment_size + dynamic_lds
    on = tuple(c for c in CHECKS if c in checks)
    meta = kernel.metadata
    profile = LaunchProfile(kernel=kernel_name, grid=(*grid,), block=(*block,), memory=memory, checks=on,
                            code_object_sha256=hashlib.sha256(bytes(code_object)).hexdigest(),
                            vgprs=int(meta.get(".vgpr_count", 0)), agprs=int(meta.get(".agpr_count", 0)),
                            sgprs=int(meta.get(".sgpr_count", 0)), lds_alloc=lds_bytes)
    all_groups = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    per_batch = max(1, MAX_WAVES_PER_BATCH // waves_per_group)
    loaded0, stored0 = memory.bytes_loaded, memory.bytes_stored
    memory.start_footprint()
    memory.start_checks((*grid,), bounds="memory" in on, race="race" in on, initcheck="initcheck" in on)
    try:
        with np.errstate(all="ignore"), collector_paused():
            for start in range(0, len(all_groups), per_batch):
                batch = all_groups[start:start + per_batch]
                w = _initial_state(kernel, co.arch, batch, block, waves_per_group, lds_bytes, kernarg_addr, start)
                _configure(w, on)
                hz = WaitcntChecker(w.n, w.V.shape[1], kernel_name, w.acc_base) if "waitcnt" in on else None
                _run_batch(w, prog, profile, accesses, hz)
    finally:
        profile.buffers = memory.take_footprint()
        memory.stop_checks()
        prog.keep()
        accesses.keep()
    profile.global_bytes_loaded = memory.bytes_loaded - loaded0
    profile.global_bytes_stored = memory.bytes_stored - stored0
    return profile


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one launch. A launch allocates many short-lived objects (steps,
    operand arrays), which reference counting frees; they still trigger the collector's passes, which walk the
    process's long-lived heap (torch, FlyDSL, MLIR objects): ~10 % of the main job's CPU time. Cycles made during the
    launch are collected after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _configure(w: Waves, on: tuple[str, ...]) -> None:
    """Switch the per-batch checkers (LDS race, LDS initcheck) on or off."""
    w.check_lds = "lds" in on
    w.lds_written = np.zeros(w.lds.shape, bool) if "initcheck" in on else None


def _run_batch(w: Waves, prog: Program, profile: LaunchProfile, accesses: dict[int, Access],
               hz: WaitcntChecker | None = None) -> None:
    executed: dict[int, list[int]] = {}    # PC -> [wave-instructions, steps], added to the profile when the batch ends
    try:
        _step_batch(w, prog, profile, accesses, hz, executed)
    finally:
        counts, opcodes = profile.wave_instructions, profile.opcodes
        for pc, (k, steps) in executed.items():
            name = prog.at(pc).name
            counts[OP_CLASS[name]] += k
            opcodes[name] += k
            profile.steps += steps


def _step_batch(w: Waves, prog: Program, profile: LaunchProfile, accesses: dict[int, Access],
                hz: WaitcntChecker | None, executed: dict[int, list[int]]) -> None:
    n = w.n
    rows = w.R.shape[0]
    #: (pc, sel, k) while every runnable wave sits at one PC: the next step needs no search. Only s_barrier and
    #: s_endpgm change which waves are runnable, and a branch that sends the waves apart ends it.
    together: tuple[int, slice | np.ndarray, int] | None = None
    for _ in range(MAX_STEPS):
        check_stop()            # a stop signal swallowed by the launch callback raises again here
        if together is None:
            runnable = w.alive & ~w.waiting
            if not runnable.any():
                if w.alive.any():
                    raise EmulatorFault(f"{prog.kernel}: deadlock: waves wait at s_barrier for waves that never "
                                        f"arrive", kernel=prog.kernel)
                return
            pcs = np.where(runnable, w.PC, _NO_PC)
            pc = int(pcs.min())
            here = pcs == pc
            k = int(here.sum())
            sel: slice | np.ndarray = slice(None) if k == n else np.flatnonzero(here)
            all_runnable = k == int(runnable.sum())
        else:
            pc, sel, k = together
            all_runnable = True
        try:
            ins = prog.at(pc)
            assert ins.run is not None       # Program.at binds every instruction it returns
            acc = accesses.get(pc)
            fast = ins.fast
            if fast is UNPLANNED:            # first execution in this process: the plan, once; the record too where
                fast = ins.fast = plan_fast(ins)   # it is known (or an earlier process stored it: access_store)
                if acc is None and (known := known_operands(ins, fast)) is not None:
                    acc = accesses[pc] = access_of(ins, *known, w.acc_base)
            if acc is None:                  # (unknown: the handler runs and notes it)
                fast = None
            if fast is not None and k == n and fast[1] < rows and w.all_lanes_active() \
                    and fast[0](w, profile) is not False:   # every wave, every lane: on whole rows (fastpath.py)
                nxt = None
            else:
                st: Step
                if acc is None:              # first execution: note the registers the handler uses
                    rst = st = RecordingStep(w, sel, ins, k, profile)
                    ins.run(st)
                    acc = accesses[pc] = access_of(ins, rst.reads, rst.writes, w.acc_base)
                else:
                    st = Step(w, sel, ins, k, profile)
                    ins.run(st)
                nxt = st.next_pc
            if hz is not None and acc is not None and (acc.always or hz.maybe_bits & acc.use_bits):
                hz.check(ins, acc, sel)      # (else the check has nothing to do)
        except EmulatorFault as exc:
            raise _located(exc, prog.kernel, pc, prog) from None
        except Exception as exc:  # noqa: BLE001 - a handler bug is still a fault at this PC, not a crash
            raise _located(EmulatorFault(f"{type(exc).__name__}: {exc}"), prog.kernel, pc, prog) from exc
        if nxt is None:
            nxt = pc + ins.size
        elif not isinstance(nxt, int):
            first = int(nxt[0])
            if not (nxt == first).all():                      # the waves branch apart
                all_runnable = False
            nxt = first if all_runnable else nxt
        tally = executed.get(pc)
        if tally is None:
            executed[pc] = [k, 1]
        else:
            tally[0] += k
            tally[1] += 1
        if ins.ends_group:                                    # s_barrier, s_endpgm
            w.PC[sel] = nxt
            _release_barriers(w, w.group[sel])
            together = None
        elif all_runnable and isinstance(nxt, int):
            together = (nxt, sel, k)         # w.PC is written when the waves stop running together
        else:
            w.PC[sel] = nxt
            together = None
    raise EmulatorFault(f"{prog.kernel}: more than {MAX_STEPS} steps (an endless loop?)", kernel=prog.kernel)


def _located(exc: EmulatorFault, kernel: str, pc: int, prog: Program) -> EmulatorFault:
    try:
        ins = prog.at(pc)
        opcode, text = ins.name, ins.text()
    except EmulatorFault:
        opcode, text = exc.opcode or "?", "?"
    msg = str(exc)
    if msg.startswith(f"{kernel}:"):
        msg = msg[len(kernel) + 1:].strip()
    return type(exc)(f"kernel {kernel}, PC 0x{pc:x} ({opcode}): {msg}  [{text}]", kernel=kernel, pc=pc,
                     opcode=opcode)


def run_code(code: bytes, *, waves: int = 1, vgprs: int = 64, lds_bytes: int = 0, scratch_bytes: int = 0,
             sgpr: dict[int, int | list[int]] | None = None, vgpr: dict[int, object] | None = None,
             agprs: int = 0, agpr: dict[int, object] | None = None,
             memory: Memory | None = None, arch: str = "gfx942", exec_mask: int = (1 << 64) - 1,
             name: str = "test", checks: frozenset[str] | tuple[str, ...] = ("memory", "lds")
             ) -> tuple[Waves, LaunchProfile]:
    """Run raw machine code (ending in s_endpgm) as one workgroup of `waves` waves; for unit tests. Semantics
    tests read LDS nobody wrote and use loads at once, so by default only the memory and LDS race checkers run.

    sgpr: {operand code: value or per-wave list}; vgpr: {register number: value, (64,) or (waves, 64)
    array}; agprs: AGPRs after the VGPRs (accum_offset = vgprs rounded up to 4), agpr: their values like vgpr's.
    Returns the final state and the profile.
    """
    prog = Program(bytes(code), name, bind)
    acc_base = -(-vgprs // 4) * 4
    w = Waves(waves, acc_base + agprs if agprs else vgprs, 1, lds_bytes, scratch_bytes, arch, acc_base=acc_base)
    on = tuple(c for c in CHECKS if c in checks)
    _configure(w, on)
    w.S[:, EXEC] = exec_mask & 0xFFFFFFFF
    w.S[:, EXEC + 1] = exec_mask >> 32
    for code_, svalue in (sgpr or {}).items():
        w.S[:, code_] = (np.asarray(svalue, np.uint64).astype(np.uint32) if not isinstance(svalue, int)
                         else svalue & 0xFFFFFFFF)
    for reg, value in (vgpr or {}).items():
        w.V[:, reg, :] = np.asarray(value).astype(np.uint32) if np.asarray(value).dtype != np.float32 \
            else np.asarray(value, np.float32).view(np.uint32)
    for reg, value in (agpr or {}).items():
        w.V[:, acc_base + reg, :] = np.asarray(value).astype(np.uint32)
    profile = LaunchProfile(kernel=name, memory=memory or Memory(), checks=on)
    hz = WaitcntChecker(w.n, w.V.shape[1], name, w.acc_base) if "waitcnt" in on else None
    with np.errstate(all="ignore"):
        _run_batch(w, prog, profile, {}, hz)
    return w, profile
