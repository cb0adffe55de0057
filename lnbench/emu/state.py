"""Per-wave state of a batch of workgroups, and operand access for the instruction being executed.

All waves of a batch live in numpy arrays: S (waves, 128) uint32 indexed by the operand code
(s0..s101, VCC 106/107, M0 124, EXEC 126/127), V (waves, vgprs, 64) uint32 (a view of the register-major R),
SCC, PC. V is the unified
register file of gfx90a and later: the accumulation registers (AGPRs) are its rows from `acc_base` (the
kernel descriptor's accum_offset) on, so a[N] is V[:, acc_base + N]. The scheduler
steps every wave that sits at the same PC together; `Step` is that group for one instruction.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.errors import EmulatorFault

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile

WAVE = 64
VCC, M0, EXEC = 106, 124, 126
LANES = np.arange(WAVE, dtype=np.uint64)
U32 = np.uint32
ALL_LANES = np.uint64(0xFFFFFFFFFFFFFFFF)

#: inline float constants (operand codes 240..248) as f32, f16 and f64 bit patterns
_F32 = {240: 0x3F000000, 241: 0xBF000000, 242: 0x3F800000, 243: 0xBF800000, 244: 0x40000000,
        245: 0xC0000000, 246: 0x40800000, 247: 0xC0800000, 248: 0x3E22F983}
_F16 = {240: 0x3800, 241: 0xB800, 242: 0x3C00, 243: 0xBC00, 244: 0x4000, 245: 0xC000, 246: 0x4400,
        247: 0xC400, 248: 0x3118}
_F64 = {240: 0x3FE0000000000000, 241: 0xBFE0000000000000, 242: 0x3FF0000000000000,
        243: 0xBFF0000000000000, 244: 0x4000000000000000, 245: 0xC000000000000000,
        246: 0x4010000000000000, 247: 0xC010000000000000, 248: 0x3FC45F306DC9C882}


def mask_to_lanes(bits: np.ndarray) -> np.ndarray:
    """(k,) uint64 lane masks -> (k, 64) bool."""
    raw = np.ascontiguousarray(bits, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(raw, axis=1, bitorder="little").view(bool)


def lanes_to_mask(lanes: np.ndarray) -> np.ndarray:
    """(k, 64) bool -> (k,) uint64 lane masks."""
    return np.packbits(lanes, axis=1, bitorder="little").view("<u8")[:, 0]


def _inline(code: int, floats: dict[int, int], mask: int) -> int | None:
    """The value of an inline constant operand code at the width of `mask`: the integers 0..64 and -1..-16, the
    floats (codes 240..248) as the bit patterns `floats` gives; None for any other code."""
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return (-(code - 192)) & mask
    return floats.get(code)


def inline_const32(code: int, kind: str, literal: int | None) -> int:
    """The 32-bit value of a constant operand code (inline integer, inline float as `kind`, the literal)."""
    value = _inline(code, _F16 if kind == "f16" else _F32, 0xFFFFFFFF)
    if value is not None:
        return value
    if code == 255:
        if literal is None:
            raise EmulatorFault("literal operand without a literal")
        return literal
    if code == 253:
        raise EmulatorFault("SCC as an operand is not supported")
    raise EmulatorFault(f"unsupported operand code {code}")


class Waves:
    """Registers, LDS and scratch of every wave in one batch of workgroups."""

    def __init__(self, n_waves: int, n_vgprs: int, n_groups: int, lds_bytes: int, scratch_bytes: int,
                 arch: str, acc_base: int | None = None) -> None:
        self.arch = arch
        self.n = n_waves
        self.S = np.zeros((n_waves, 128), U32)
        #: the register file, register-major: R[r] holds register r of every wave, contiguous, so an instruction of
        #: a step of every wave reads and writes whole contiguous rows. V is the same memory indexed (wave, register,
        #: lane), the layout every handler and test addresses.
        self.R = np.zeros((max(1, n_vgprs), n_waves, WAVE), U32)
        self.V = self.R.transpose(1, 0, 2)
        #: the register file's address and row length for the native helper (fastpath.py), and a scratch of two rows
        self.R_address, self.row_len = self.R.ctypes.data, n_waves * WAVE
        self.S_address = self.S.ctypes.data
        self.row_scratch = np.empty((2, n_waves * WAVE), np.float32)
        self.row_scratch_address = self.row_scratch.ctypes.data
        #: the row of V that holds a0 (accum_offset); at the end of the file (no AGPRs) unless given
        self.acc_base = self.V.shape[1] if acc_base is None else acc_base
        self.SCC = np.zeros(n_waves, bool)
        self.PC = np.zeros(n_waves, np.int64)
        self.alive = np.ones(n_waves, bool)
        self.waiting = np.zeros(n_waves, bool)          # arrived at s_barrier, not yet released
        self.group = np.zeros(n_waves, np.int64)        # workgroup index within the batch
        self.epoch = np.zeros(n_waves, np.int64)        # barriers passed (LDS race checking)
        self.lds = np.zeros((n_groups, lds_bytes), np.uint8)
        self.scratch = np.zeros((n_waves, WAVE, scratch_bytes), np.uint8)
        # LDS race checker, per dword: (barrier epoch << 32) | wave of the last writer and of the last reader
        # (wave SEVERAL_READERS: more than one read it in that epoch); -1: never
        n_dw = (lds_bytes + 3) // 4
        self.lds_wkey = np.full((n_groups, n_dw), -1, np.int64)
        self.lds_rkey = np.full((n_groups, n_dw), -1, np.int64)
        self.wave_id = np.arange(n_waves, dtype=np.int64)
        self.global_group = np.zeros(n_waves, np.int64)  # workgroup id in the whole grid (x-major)
        # EXEC as (n, 64) bool per wave, valid until the wave's EXEC is written (Step.exec_mask, set_s)
        self.exec_lanes = np.zeros((n_waves, WAVE), bool)
        self.exec_valid = np.zeros(n_waves, bool)
        self.exec_full = np.zeros(n_waves, bool)         # EXEC all ones (valid where exec_valid)
        self.exec_writes = 0                             # EXEC writes by instructions (Step.set_s, set_s64)
        self._all_active_at, self._all_active = -1, False
        # which checkers run (machine.run_kernel sets them from the launch's checks)
        self.check_lds = True                            # the LDS race checker
        self.lds_written: np.ndarray | None = None       # initcheck: LDS bytes written in this workgroup


    def all_lanes_active(self) -> bool:
        """EXEC is all ones in every wave of the batch (cached until an instruction writes EXEC)."""
        if self._all_active_at != self.exec_writes:
            S = self.S
            self._all_active = bool((S[:, EXEC] == 0xFFFFFFFF).all() and (S[:, EXEC + 1] == 0xFFFFFFFF).all())
            self._all_active_at = self.exec_writes
        return self._all_active


class Step:
    """The waves `sel` executing instruction `ins` together (one lockstep group)."""

    __slots__ = ("w", "sel", "ins", "k", "next_pc", "_exec", "_full", "profile")

    def __init__(self, waves: Waves, sel: slice | np.ndarray, ins: Instr, k: int, profile: LaunchProfile) -> None:
        self.w, self.sel, self.ins, self.k = waves, sel, ins, k
        self.next_pc: np.ndarray | int | None = None
        self._exec: np.ndarray | None = None
        self._full: bool | None = None
        self.profile = profile

    # ------------------------------------------------------------ masks
    @property
    def exec64(self) -> np.ndarray:
        S = self.w.S
        return S[self.sel, EXEC].astype(np.uint64) | (S[self.sel, EXEC + 1].astype(np.uint64) << np.uint64(32))

    @property
    def exec_mask(self) -> np.ndarray:
        """(k, 64) bool: the active lanes."""
        if self._exec is None:
            w = self.w
            if w.exec_valid[self.sel].all():
                self._exec = w.exec_lanes[self.sel]
            else:
                bits = self.exec64
                self._exec = w.exec_lanes[self.sel] = mask_to_lanes(bits)
                w.exec_full[self.sel] = bits == ALL_LANES
                w.exec_valid[self.sel] = True
        return self._exec

    @property
    def all_active(self) -> bool:
        """Every lane of every wave of the step is active: handlers may skip the masks and the lane lists."""
        if self._full is None:
            self.exec_mask                               # noqa: B018 - makes exec_full valid for these waves
            self._full = bool(self.w.exec_full[self.sel].all())
        return self._full

    def invalidate_exec(self) -> None:
        self._exec = None
        self._full = None

    def fault(self, message: str) -> EmulatorFault:
        return EmulatorFault(message)

    # ------------------------------------------------------------ scalar operands
    def sval(self, code: int, kind: str = "b32") -> np.ndarray:
        """A 32-bit scalar operand for each wave: (k,) uint32."""
        if code < 128:
            return self.w.S[self.sel, code]
        return np.full(self.k, self.const32(code, kind), U32)

    def const32(self, code: int, kind: str = "b32") -> int:
        return inline_const32(code, kind, self.ins.literal)

    def sval64(self, code: int, kind: str = "b64") -> np.ndarray:
        """A 64-bit scalar operand (register pair or constant): (k,) uint64."""
        if code < 127:                   # the pair's two dwords, low first: one uint64 each (x86-64: little-endian)
            return self.w.S[self.sel, code:code + 2].copy().view(np.uint64)[:, 0]
        if code == 127:
            S = self.w.S
            return S[self.sel, code].astype(np.uint64) | (S[self.sel, code + 1].astype(np.uint64) << np.uint64(32))
        return np.full(self.k, self.const64(code, kind), np.uint64)

    def const64(self, code: int, kind: str = "b64") -> int:
        value = _inline(code, _F64 if kind == "f64" else _F32, 0xFFFFFFFFFFFFFFFF)
        if value is not None:
            return value
        if code == 255:
            return self.const32(255)
        raise EmulatorFault(f"unsupported 64-bit operand code {code}")

    def set_s(self, code: int, values: np.ndarray | int) -> None:
        if code >= 128:
            raise EmulatorFault(f"write to non-SGPR operand code {code}")
        self.w.S[self.sel, code] = values
        if code in (EXEC, EXEC + 1):
            self._exec = self._full = None
            self.w.exec_valid[self.sel] = False
            self.w.exec_writes += 1

    def set_s64(self, code: int, values: np.ndarray) -> None:
        values = np.asarray(values, np.uint64)
        if code >= 127:                  # not a pair of SGPRs: set_s faults
            self.set_s(code, (values & np.uint64(0xFFFFFFFF)).astype(U32))
            self.set_s(code + 1, (values >> np.uint64(32)).astype(U32))
            return
        if values.shape != (self.k,):
            values = np.broadcast_to(values, (self.k,))
        pairs = np.ascontiguousarray(values).view(U32).reshape(self.k, 2)
        self.w.S[self.sel, code:code + 2] = pairs        # low dword first (x86-64: little-endian)
        if EXEC - 1 <= code <= EXEC + 1:
            self._exec = self._full = None
            self.w.exec_valid[self.sel] = False
            self.w.exec_writes += 1

    # ------------------------------------------------------------ vector operands
    def row(self, code: int, count: int = 1) -> int:
        """The row of V holding VGPR or AGPR operand `code` (and the count - 1 after it); a fault past the file."""
        if code < AGPR:
            return code - 256
        r = self.w.acc_base + code - AGPR
        if r + count > self.w.V.shape[1]:
            raise EmulatorFault(f"a{code - AGPR + count - 1} is beyond the {self.w.V.shape[1] - self.w.acc_base} "
                                f"AGPRs the descriptor allocates (accum_offset {self.w.acc_base})")
        return r

    def vval(self, code: int, kind: str = "b32") -> np.ndarray:
        """A 32-bit vector operand: (k, 64) uint32 for a VGPR or AGPR, (k, 1) for a scalar or constant."""
        if code >= 256:
            return self.w.V[self.sel, code - 256 if code < AGPR else self.row(code)]
        return self.sval(code, kind)[:, None]

    def vval64(self, code: int, kind: str = "b64") -> np.ndarray:
        """A 64-bit vector operand (VGPR pair, SGPR pair or constant): (k, 64) or (k, 1) uint64."""
        if code >= 256:
            r = code - 256 if code < AGPR else self.row(code, 2)
            V = self.w.V
            return V[self.sel, r].astype(np.uint64) | (V[self.sel, r + 1].astype(np.uint64) << np.uint64(32))
        return self.sval64(code, kind)[:, None]

    def set_v(self, code: int, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Write a VGPR or AGPR in the active lanes (or under `mask`); other lanes keep their value."""
        r = code - 256 if code < AGPR else self.row(code)
        if r < 0:
            raise EmulatorFault(f"vector write to non-VGPR operand code {code}")
        if r >= self.w.V.shape[1]:
            raise EmulatorFault(f"write to v{r}, beyond the {self.w.V.shape[1]} VGPRs the descriptor allocates")
        if mask is None and self.all_active:             # no lane to keep: a plain copy (3-5x faster)
            if isinstance(self.sel, slice):
                np.copyto(self.w.V[self.sel, r], values, casting="unsafe")
            else:
                old = self.w.V[self.sel, r]
                np.copyto(old, values, casting="unsafe")
                self.w.V[self.sel, r] = old
            return
        m = self.exec_mask if mask is None else mask
        if isinstance(self.sel, slice):                  # a view: write the masked lanes in place
            np.copyto(self.w.V[self.sel, r], values, casting="unsafe", where=m)
            return
        old = self.w.V[self.sel, r]
        np.copyto(old, values, casting="unsafe", where=m)
        self.w.V[self.sel, r] = old

    def set_v64(self, code: int, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        values = np.asarray(values, np.uint64)
        self.set_v(code, (values & np.uint64(0xFFFFFFFF)).astype(U32), mask)
        self.set_v(code + 1, (values >> np.uint64(32)).astype(U32), mask)

    # ------------------------------------------------------------ control
    def branch_if(self, taken: np.ndarray) -> None:
        """Per wave: jump to the SOPP target where `taken`, else fall through."""
        simm = self.ins.f["simm16"]
        simm = simm - 0x10000 if simm & 0x8000 else simm
        target = self.ins.pc + 4 + 4 * simm
        self.next_pc = np.where(taken, target, self.ins.pc + self.ins.size)


def _noted(name: str, dwords: int, written: bool) -> Callable[..., Any]:
    """Step's operand accessor `name`, noting its register operand (code, dwords) as read or written first."""
    plain = getattr(Step, name)

    def noted(self: RecordingStep, code: int, *args: Any) -> Any:
        (self.writes if written else self.reads).append((code, dwords))
        return plain(self, code, *args)
    noted.__name__ = noted.__qualname__ = name
    return noted


class RecordingStep(Step):
    """A Step that also notes the register operands the handler reads and writes: (operand code, dwords).

    Used on an instruction's first execution; the wait-count checker takes its register use from it."""

    __slots__ = ("reads", "writes")

    def __init__(self, waves: Waves, sel: slice | np.ndarray, ins: Instr, k: int, profile: LaunchProfile) -> None:
        super().__init__(waves, sel, ins, k, profile)
        self.reads: list[tuple[int, int]] = []
        self.writes: list[tuple[int, int]] = []

    sval, sval64 = _noted("sval", 1, written=False), _noted("sval64", 2, written=False)
    vval, vval64 = _noted("vval", 1, written=False), _noted("vval64", 2, written=False)
    set_s, set_v = _noted("set_s", 1, written=True), _noted("set_v", 1, written=True)

    def set_s64(self, code: int, values: np.ndarray) -> None:
        if code < 127:                   # (from 127 on, set_s64 calls set_s, which notes them)
            self.writes.extend([(code, 1), (code + 1, 1)])
        super().set_s64(code, values)
