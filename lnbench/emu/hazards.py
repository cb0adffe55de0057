"""The wait-count hazard checker: outstanding memory operations per wave, and the s_waitcnt that covers them.

The emulator completes every memory operation at issue; the hardware does not. A load's data reaches its
registers some time later, and the wave learns it has arrived only through the counters CDNA3/CDNA4 keep
per wave: vmcnt (buffer/global/scratch loads and stores, returned in issue order), lgkmcnt (LDS ops,
ds_swizzle/ds_bpermute included, in issue order among themselves; SMEM loads, which may return in any
order) and expcnt (exports and GDS, which these kernels never issue). `s_waitcnt vmcnt(N)` waits until at
most N vector memory operations are outstanding.

This checker keeps, per wave, how many operations of each kind were issued and how many are known to
have completed, and for every register the operation that will write it. An operation is known complete
once a wait guarantees it in every order the hardware may choose:

- vmcnt(N): all but the newest N vector memory operations;
- lgkmcnt(N): all but the newest N LDS operations (SMEM ops may occupy the rest of the count, so this holds
  with SMEM outstanding too); SMEM loads only with lgkmcnt(0) (they return out of order).

A fault, naming kernel, both PCs, register, counter and the wait that would have covered it:

- an instruction reads a register a load that is not known complete will write (read after write);
- an instruction writes such a register, unless it is a later load of the same in-order kind (write after
  write: the late data would overwrite the new value);
- a wave reaches s_barrier with an LDS store not known complete (other waves may read LDS after the
  barrier before the data is there: the memory model asks for lgkmcnt(0) before a workgroup barrier).

Stores read their data registers when they issue on CDNA3/CDNA4 (expcnt covers only exports and GDS),
so overwriting a store's data after it issued is not a wait-count hazard. Which registers an instruction
reads and writes is taken from the handler's own operand accesses on its first execution (recorded once
per instruction), and for memory instructions from their encoding.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lnbench.emu import native
from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.errors import EmulatorFault

VM, LDS, SMEM = 0, 1, 2
KIND_COUNTER = {VM: "vmcnt", LDS: "lgkmcnt", SMEM: "lgkmcnt"}
IN_ORDER = (VM, LDS)
NSGPR = 128                      # operand codes 0..127 (s0..s101, VCC, M0, EXEC, ...)
GLOBAL_OFF = 0x7F                # saddr "off"


class WaitcntFault(EmulatorFault):
    """A register used before the s_waitcnt that guarantees the memory operation writing it completed."""


@dataclass(frozen=True)
class Access:
    """What one instruction does to registers, as unified indices (SGPR code, or 128 + row of the vector register
    file: VGPR number, or accum_offset + N for AGPR aN)."""

    reads: np.ndarray
    writes: np.ndarray
    kind: int = -1               # VM, LDS, SMEM for a memory instruction, else -1
    loads: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # where the operation's data lands
    lds_store: bool = False
    #: reads, writes and loads as bit masks over the unified indices (a cheap first test per instruction)
    read_bits: int = 0
    write_bits: int = 0
    load_bits: int = 0
    #: WaitcntChecker.check has work whenever `always` (a memory operation, s_waitcnt, s_barrier), else only while a
    #: register of `use_bits` (reads | writes | loads) may be pending: the scheduler skips the call otherwise
    always: bool = False
    use_bits: int = 0


def _code_regs(code: int, width: int, acc_base: int) -> list[int]:
    """Unified register indices of an operand code (constants and literals have none); AGPRs sit at acc_base."""
    if code >= AGPR:
        return [NSGPR + acc_base + code - AGPR + i for i in range(width)]
    if code >= 256:
        return [NSGPR + code - 256 + i for i in range(width)]
    if code < NSGPR:
        return [code + i for i in range(width) if code + i < NSGPR]
    return []


def memory_kind(name: str) -> int:
    if name.startswith(("s_load", "s_buffer_load")):
        return SMEM
    if name.startswith("ds_"):
        return LDS
    if name.startswith(("buffer_", "global_", "scratch_", "flat_")):
        return VM
    return -1


def _ds_returns(name: str) -> bool:
    return name.startswith("ds_read") or "_rtn" in name or name in ("ds_swizzle_b32", "ds_bpermute_b32",
                                                                    "ds_permute_b32")


def _memory_regs(ins: Instr, kind: int, acc_base: int) -> tuple[list[int], list[int]]:
    """(registers read directly by the handler, registers the operation loads) for a memory instruction."""
    f, wd, name = ins.f, ins.widths, ins.name
    reads: list[int] = []
    loads: list[int] = []
    is_load = "_load" in name or (("atomic" in name) and (f.get("sc0", 0) or f.get("glc", 0)))
    if kind == SMEM:
        loads = _code_regs(f["sdata"], wd.get("sdata", 1), acc_base)
    elif kind == LDS:
        reads += _code_regs(f["addr"], 1, acc_base)
        if name.startswith("ds_write") or name.startswith("ds_bpermute") or name.startswith("ds_permute") \
                or ("_rtn" in name) or name.startswith(("ds_add", "ds_max", "ds_min")):
            reads += _code_regs(f["data0"], wd.get("data0", 1), acc_base)
        if name.startswith("ds_write2"):
            reads += _code_regs(f["data1"], wd.get("data1", 1), acc_base)
        if _ds_returns(name):
            loads = _code_regs(f["vdst"], wd.get("vdst", 1), acc_base)
    elif ins.fmt.startswith("MUBUF"):
        reads += _code_regs(f["vaddr"], f.get("idxen", 0) + f.get("offen", 0), acc_base) if f["vaddr"] >= 256 else []
        reads += _code_regs(f["srsrc"], 4, acc_base)
        if is_load:
            loads = _code_regs(f["vdata"], wd.get("vdata", 1), acc_base)
        else:
            reads += _code_regs(f["vdata"], wd.get("vdata", 1), acc_base)
    else:                                            # GLOBAL / SCRATCH / FLAT
        scratch = name.startswith("scratch_")
        if not scratch or f.get("sve", 0):
            width = 1 if scratch or f.get("saddr", GLOBAL_OFF) != GLOBAL_OFF else 2
            reads += _code_regs(f["addr"], width, acc_base)
        if is_load:
            loads = _code_regs(f["vdst"], wd.get("vdst", 1), acc_base)
        if "data" in f and not name.startswith(("global_load", "scratch_load", "flat_load")):
            reads += _code_regs(f["data"], wd.get("data", 1), acc_base)
    return reads, loads


def access_of(ins: Instr, recorded_reads: list[tuple[int, int]], recorded_writes: list[tuple[int, int]],
              acc_base: int) -> Access:
    """The register access of `ins`: the handler's recorded operand reads/writes ((code, width) pairs), plus for a
    memory instruction the registers it reads straight from the register file and the ones its data lands in.
    acc_base: the register-file row of a0 (the descriptor's accum_offset)."""
    reads = [r for code, width in recorded_reads for r in _code_regs(code, width, acc_base)]
    writes = [r for code, width in recorded_writes for r in _code_regs(code, width, acc_base)]
    kind = memory_kind(ins.name)
    loads: list[int] = []
    if kind >= 0:
        direct, loads = _memory_regs(ins, kind, acc_base)
        reads += direct
        writes = [r for r in writes if r not in loads]        # the handler's immediate write is the late one
    return make_access(reads, writes, kind, loads, ins.name.startswith("ds_write"),
                       kind >= 0 or ins.name in ("s_waitcnt", "s_barrier"))


def make_access(reads: list[int], writes: list[int], kind: int, loads: list[int], lds_store: bool,
                always: bool) -> Access:
    """An Access of these unified register indices (each set sorted, its bit mask made here)."""
    arr = lambda xs: np.asarray(sorted(set(xs)), np.int64)    # noqa: E731
    bits = _bits(reads), _bits(writes), _bits(loads)
    return Access(arr(reads), arr(writes), kind, arr(loads), lds_store, *bits, always=always,
                  use_bits=bits[0] | bits[1] | bits[2])


def _mask(flags: np.ndarray) -> int:
    """A bit mask with bit r set where flags[r] is set."""
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _bits(regs: list[int]) -> int:
    """A bit mask with bit r set for every unified register index r."""
    mask = 0
    for r in regs:
        mask |= 1 << r
    return mask


def waitcnt_fields(simm16: int) -> tuple[int, int, int]:
    """(vmcnt, expcnt, lgkmcnt) of a gfx9 s_waitcnt immediate."""
    return (simm16 & 0xF) | (((simm16 >> 14) & 3) << 4), (simm16 >> 4) & 7, (simm16 >> 8) & 0xF


def reg_name(r: int, acc_base: int | None = None) -> str:
    """v7, a3 (an AGPR: a row at or past acc_base), s4, vcc_lo, ..."""
    if acc_base is not None and r >= NSGPR + acc_base:
        return f"a{r - NSGPR - acc_base}"
    if r >= NSGPR:
        return f"v{r - NSGPR}"
    return {106: "vcc_lo", 107: "vcc_hi", 124: "m0", 126: "exec_lo", 127: "exec_hi"}.get(r, f"s{r}")


def _every_wave(sel: slice | np.ndarray) -> bool:
    """The step holds every wave of the batch (the scheduler's slice(None)): the bookkeeping runs in C."""
    return isinstance(sel, slice) and sel == slice(None)


class WaitcntChecker:
    """Outstanding memory operations of every wave of one batch (see the module docstring)."""

    def __init__(self, n_waves: int, n_vgprs: int, kernel: str, acc_base: int | None = None) -> None:
        self.kernel = kernel
        self.acc_base = acc_base                             # register-file row of a0 (None: no AGPRs)
        regs = NSGPR + max(1, n_vgprs)
        self.issued = np.zeros((n_waves, 3), np.int64)       # operations issued, per kind
        self.done = np.zeros((n_waves, 3), np.int64)         # operations known complete (the oldest ones)
        self.score = np.zeros((n_waves, regs), np.int64)     # issue number of the op loading each register, 0 none
        self.kind = np.zeros((n_waves, regs), np.int8)
        self.pc = np.zeros((n_waves, regs), np.int64)
        self.lds_store = np.zeros(n_waves, np.int64)         # issue number of the last LDS store
        self.lds_store_pc = np.zeros(n_waves, np.int64)
        self.op_name: dict[int, str] = {}                    # producer PC -> opcode
        self.live = False                                    # some wave may have an operation outstanding
        #: registers some wave may still be waiting for: a superset of those pending (the register tests are exact;
        #: this only spares them), kept as the registers whose newest issue number of some kind, over all waves,
        #: exceeds the fewest completed operations of that kind of any wave
        self.maybe = np.zeros(regs, bool)
        self.maybe_bits = 0                                  # the same as a bit mask
        self.newest = np.zeros((regs, 3), np.int64)          # per register, kind: the highest issue number of any wave
        #: a step of every wave (the usual one) runs the bookkeeping in the native helper, on these arrays in place
        self._lib = native.lib()
        self._at = tuple(native.address(a) for a in (self.issued, self.done, self.score, self.kind, self.pc,
                                                     self.maybe, self.newest, self.lds_store, self.lds_store_pc))

    # ------------------------------------------------------------ per instruction
    def check(self, ins: Instr, acc: Access, sel: slice | np.ndarray) -> None:
        """Fault if the waves `sel` use a register a pending load writes (before issuing `ins`)."""
        if ins.name == "s_waitcnt":
            self._wait(ins, sel)
            return
        if not self.live:
            if acc.kind >= 0:
                self._issue(ins, acc, sel)
            return
        maybe = self.maybe_bits
        if maybe & acc.read_bits:
            self._check_regs(ins, acc.reads, sel, "reads")
        if maybe & acc.write_bits:
            self._check_regs(ins, acc.writes, sel, "overwrites")
        if maybe & acc.load_bits:
            self._check_regs(ins, acc.loads, sel, "loads into", same_kind_ok=acc.kind)
        if ins.name == "s_barrier":
            self._check_barrier(ins, sel)
        if acc.kind >= 0:
            self._issue(ins, acc, sel)

    def _pending(self, regs: np.ndarray, sel: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        score = self.score[sel][:, regs]
        kind = self.kind[sel][:, regs].astype(np.int64)
        done = np.take_along_axis(self.done[sel], kind, axis=1)
        return score > done, score, kind

    def _check_regs(self, ins: Instr, regs: np.ndarray, sel: slice | np.ndarray, verb: str,
                    same_kind_ok: int = -1) -> None:
        if _every_wave(sel):   # every wave: the test in C, numpy only for the report
            _, done_at, score_at, kind_at, _, maybe_at, *_ = self._at
            if not self._lib.lnbench_wc_pending(self.score.shape[0], self.score.shape[1], score_at, kind_at, done_at,
                                                maybe_at,
                                                native.address(regs), regs.size,
                                                same_kind_ok if same_kind_ok in IN_ORDER else -1):
                return
        regs = regs[self.maybe[regs]]                      # only registers some wave may still wait for
        bad, score, kind = self._pending(regs, sel)
        if same_kind_ok in IN_ORDER:
            bad &= kind != same_kind_ok                    # in-order loads of one kind land in issue order
        if not bad.any():
            return
        row, j = (int(v) for v in np.argwhere(bad)[0])
        wave = int(np.arange(self.score.shape[0])[sel][row])
        reg = int(regs[j])
        k = int(kind[row, j])
        prod_pc = int(self.pc[wave, reg])
        if k == SMEM:
            need = 0
        else:
            need = int(self.issued[wave, k] - score[row, j])
        counter = KIND_COUNTER[k]
        raise WaitcntFault(
            f"wait-count hazard: {ins.name} at PC 0x{ins.pc:x} {verb} {reg_name(reg, self.acc_base)} while "
            f"{self.op_name.get(prod_pc, '?')} at PC 0x{prod_pc:x} may still be writing it ({counter}; wave {wave}); "
            f"s_waitcnt {counter}({need}) before PC 0x{ins.pc:x} would cover it", pc=ins.pc, opcode=ins.name)

    def _check_barrier(self, ins: Instr, sel: slice | np.ndarray) -> None:
        bad = self.lds_store[sel] > self.done[sel, LDS]
        if not bad.any():
            return
        row = int(np.flatnonzero(bad)[0])
        wave = int(np.arange(self.score.shape[0])[sel][row])
        prod_pc = int(self.lds_store_pc[wave])
        need = int(self.issued[wave, LDS] - self.lds_store[wave])
        raise WaitcntFault(
            f"wait-count hazard: s_barrier at PC 0x{ins.pc:x} with {self.op_name.get(prod_pc, '?')} at PC "
            f"0x{prod_pc:x} not complete (lgkmcnt; wave {wave}): other waves may read LDS before its data "
            f"lands; s_waitcnt lgkmcnt({need}) before PC 0x{ins.pc:x} would cover it", pc=ins.pc, opcode=ins.name)

    def _issue(self, ins: Instr, acc: Access, sel: slice | np.ndarray) -> None:
        k = acc.kind
        self.op_name[ins.pc] = ins.name
        if _every_wave(sel):   # every wave: the same updates in C
            issued_at, _, *rest_at = self._at                  # (no done counts: an issue does not change them)
            self._lib.lnbench_wc_issue(self.score.shape[0], self.score.shape[1], issued_at, *rest_at,
                                       native.address(acc.loads), acc.loads.size, k, ins.pc, int(acc.lds_store))
            self.maybe_bits |= acc.load_bits
            self.live = True
            return
        self.issued[sel, k] += 1
        if acc.loads.size:
            n = self.issued[sel, k][:, None]
            if isinstance(sel, slice):                       # every wave of the batch: column writes
                self.score[sel, acc.loads] = n
                self.kind[sel, acc.loads] = k
                self.pc[sel, acc.loads] = ins.pc
            else:
                rows = np.arange(self.score.shape[0])[sel][:, None]
                self.score[rows, acc.loads[None, :]] = n
                self.kind[rows, acc.loads[None, :]] = k
                self.pc[rows, acc.loads[None, :]] = ins.pc
            self.maybe[acc.loads] = True
            self.maybe_bits |= acc.load_bits
            self.newest[acc.loads, k] = np.maximum(self.newest[acc.loads, k], int(n.max()))
        if acc.lds_store:
            self.lds_store[sel] = self.issued[sel, LDS]
            self.lds_store_pc[sel] = ins.pc
        self.live = True

    def _wait(self, ins: Instr, sel: slice | np.ndarray) -> None:
        vm, _exp, lgkm = waitcnt_fields(ins.f.get("simm16", 0))
        if _every_wave(sel):   # every wave: the same updates in C
            issued_at, done_at, _, _, _, maybe_at, newest_at, *_ = self._at
            got = self._lib.lnbench_wc_wait(self.score.shape[0], self.score.shape[1], issued_at, done_at, vm, lgkm,
                                            maybe_at, newest_at, int(self.maybe_bits != 0))
            self.live = bool(got & 1)
            if got & 2:
                self.maybe_bits = _mask(self.maybe)
            return
        done = self.done[sel]
        issued = self.issued[sel]
        done[:, VM] = np.maximum(done[:, VM], issued[:, VM] - vm)
        done[:, LDS] = np.maximum(done[:, LDS], issued[:, LDS] - lgkm)
        if lgkm == 0:
            done[:, SMEM] = issued[:, SMEM]
        self.done[sel] = done
        self.live = bool((self.issued > self.done).any())
        if not self.live:                                    # every operation complete: no register is pending
            if self.maybe_bits:
                self.maybe[:] = False
                self.maybe_bits = 0
            return
        if self.maybe_bits:                                  # drop the registers no wave can wait for any more
            self.maybe &= (self.newest > self.done.min(axis=0)).any(axis=1)
            self.maybe_bits = _mask(self.maybe)
