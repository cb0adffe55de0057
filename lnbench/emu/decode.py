"""Machine code -> pre-decoded instructions, using tinygrad's CDNA decoder (encodings generated from
AMD's ISA XML; CDNA4 is a superset of gfx942 and gfx950).

Instructions are decoded lazily by PC (the binary is what runs; code after `s_endpgm` is reached
only through branches) and cached per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from lnbench.emu import decode_store
from lnbench.emu.decode_store import Entry
from lnbench.emu.errors import EmulatorFault

_SUFFIXES = ("_e32", "_e64", "_sdwa", "_dpp")
#: tinygrad names LLVM's fused v_fma_mix* after the older v_mad_mix*; ours are fused (see ops_vector)
_RENAME = {"v_mad_mix_f32": "v_fma_mix_f32", "v_mad_mixlo_f16": "v_fma_mixlo_f16", "v_mad_mixhi_f16": "v_fma_mixhi_f16",
           "v_accvgpr_read": "v_accvgpr_read_b32", "v_accvgpr_write": "v_accvgpr_write_b32"}   # LLVM's names
#: operand codes of the accumulation registers: a[N] is AGPR + N (VGPRs are 256 + N, SGPRs and constants below)
AGPR = 512
#: operand types (the ISA XML's, through tinygrad) that always name an AGPR, and those that do when the
#: instruction's `acc` bit is set (memory instructions: the data registers are AGPRs)
_AGPR_ALWAYS = frozenset({"OPR_ACCVGPR", "OPR_SRC_ACCVGPR"})
_AGPR_WITH_ACC = frozenset({"OPR_VGPR_OR_ACCVGPR", "OPR_SRC_VGPR_OR_ACCVGPR", "OPR_SRC_VGPR_OR_ACCVGPR_OR_CONST"})


#: Instr.fast before the scheduler planned the instruction
UNPLANNED: Any = object()


@dataclass
class Instr:
    """One decoded instruction. Register operands are their operand codes: SGPRs and constants below 256,
    VGPRs 256 + N, AGPRs (accumulation registers) AGPR + N."""

    pc: int
    size: int
    name: str                      # e.g. "v_add_f32" (encoding suffix stripped)
    fmt: str                       # tinygrad format class: VOP2, VOP3P, MUBUF, VOP1_SDWA, ...
    f: dict[str, int]              # field name -> value (operand code for register fields)
    widths: dict[str, int]         # register field -> number of dwords
    literal: int | None = None
    run: Callable[..., Any] | None = field(default=None, repr=False)   # the bound handler
    #: s_barrier or s_endpgm: the scheduler releases barriers after it
    ends_group: bool = False
    #: the whole-batch fast path (fastpath.plan), set at the first execution (UNPLANNED before); None: the handler
    #: always
    fast: Any = field(default=UNPLANNED, repr=False)

    def __getitem__(self, key: str) -> int:
        return self.f[key]

    def text(self) -> str:
        ops = ", ".join(f"{k}={v}" for k, v in self.f.items() if k not in ("encoding",))
        return f"{self.name} {ops}"


def _field_value(value: Any) -> tuple[int, int | None]:
    """(value, dwords) for a decoded field: Reg -> (operand code, size), ints as they are."""
    offset = getattr(value, "offset", None)
    if offset is not None:
        return int(offset), int(getattr(value, "sz", 1))
    return int(value), None


_SDWA, _DPP = 249, 250


def _dpp_fields(word: int) -> dict[str, int]:
    """The DPP dword of a VOP1/VOP2/VOPC instruction (GFX9 layout), as tinygrad names its fields."""
    return {"vsrc0": 256 + (word & 0xFF), "dpp": (word >> 8) & 0x1FF, "bc": (word >> 19) & 1,
            "src0_neg": (word >> 20) & 1, "src0_abs": (word >> 21) & 1, "src1_neg": (word >> 22) & 1,
            "src1_abs": (word >> 23) & 1, "bank_mask": (word >> 24) & 0xF, "row_mask": (word >> 28) & 0xF}


#: decoded instructions by the bytes the decoder saw (the 16 from the PC on, and how many of them are code):
#: kernels compiled from one source share most instructions, and tinygrad's decoder is slow (~0.1 ms each)
_decoded: dict[tuple[bytes, int], Entry] = {}


def decode_at(code: bytes, pc: int, kernel: str = "") -> Instr:
    """Decode the instruction at byte offset `pc` of `code`."""
    return instr_from(pc, decoded_fields(code, pc, kernel))


def decoded_fields(code: bytes, pc: int, kernel: str = "") -> Entry:
    """(size, name, format, fields, widths, literal) of the instruction at `pc` of `code` (shared: copy to change)."""
    if pc < 0 or pc + 4 > len(code):
        raise EmulatorFault(f"{kernel}: PC 0x{pc:x} is outside the kernel's code", kernel=kernel, pc=pc)
    key = (bytes(code[pc:pc + 16]), min(16, len(code) - pc))
    hit = _decoded.get(key)
    if hit is None:
        if len(_decoded) >= 1 << 18:                       # bounded: a long-lived process decoding many kernels
            _decoded.clear()
        hit = _decoded[key] = _decode(code, pc, kernel)
    return hit


def instr_from(pc: int, entry: Entry) -> Instr:
    """A fresh Instr at `pc` from decoded fields (its own field dicts)."""
    size, name, fmt, fields, widths, literal = entry
    return Instr(pc=pc, size=size, name=name, fmt=fmt, f=dict(fields), widths=dict(widths), literal=literal,
                 ends_group=name in ("s_barrier", "s_endpgm"))


def _decode(code: bytes, pc: int, kernel: str) -> Entry:
    """(size, name, format, fields, widths, literal) of the instruction at `pc`, from tinygrad's decoder."""
    from tinygrad.renderer.amd import decode_inst  # imported lazily: only the emulator needs tinygrad
    try:
        raw = decode_inst(bytes(code[pc:pc + 16]).ljust(16, b"\0"), "cdna")
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a fault at this PC
        word = int.from_bytes(code[pc:pc + 4], "little")
        raise EmulatorFault(f"{kernel}: cannot decode instruction 0x{word:08x} at PC 0x{pc:x}: {exc}",
                            kernel=kernel, pc=pc) from None
    name = raw.op_name.lower()
    for sfx in _SUFFIXES:
        if name.endswith(sfx):
            name = name[: -len(sfx)]
            break
    name = _RENAME.get(name, name)
    fields: dict[str, int] = {}
    widths: dict[str, int] = {}
    for fname, _bf in raw._fields:
        if fname == "op":
            continue
        val, dwords = _field_value(getattr(raw, fname))
        fields[fname] = val
        if dwords is not None:
            widths[fname] = dwords
    _mark_agprs(raw, name, fields, pc, kernel)
    lit = getattr(raw, "literal", None)
    size = raw.size()
    fmt = type(raw).__name__
    if fields.get("src0") in (_SDWA, _DPP) and fmt in ("VOP1", "VOP2", "VOPC"):
        if fields["src0"] == _DPP and pc + 8 <= len(code):      # the decoder has no VOPC DPP class
            fields.update(_dpp_fields(int.from_bytes(code[pc + 4:pc + 8], "little")))
            fmt, size = f"{fmt}_DPP16", 8
        else:
            raise EmulatorFault(f"{kernel}: {name} at PC 0x{pc:x}: its {'SDWA' if fields['src0'] == _SDWA else 'DPP'} "
                                f"word is not decoded", kernel=kernel, pc=pc)
    return size, name, fmt, fields, widths, None if lit is None else int(lit) & 0xFFFFFFFF


def _mark_agprs(raw: Any, name: str, fields: dict[str, int], pc: int, kernel: str) -> None:
    """Give every operand that names an AGPR its AGPR code (the encoding holds the same 256 + N as for a VGPR)."""
    acc = fields.get("acc", 0)
    for fname, spec in getattr(raw, "operands", {}).items():
        kind = getattr(spec[2], "name", str(spec[2]))
        if kind in _AGPR_ALWAYS or (acc and kind in _AGPR_WITH_ACC):
            code = fields.get(fname)
            if code is None:
                continue
            if not 256 <= code < AGPR:
                raise EmulatorFault(f"{kernel}: {name} at PC 0x{pc:x}: operand {fname} must be an AGPR, "
                                    f"its code is {code}", kernel=kernel, pc=pc)
            fields[fname] = code - 256 + AGPR


class Program:
    """A kernel's code with a PC -> Instr cache and each instruction bound to its handler once. Instructions an
    earlier process decoded from the same code come from decode_store; `keep()` stores the ones decoded here."""

    def __init__(self, code: bytes, kernel: str, bind: Callable[[Instr], Callable[..., Any]],
                 stored: bool = False) -> None:
        self.code, self.kernel, self._bind = code, kernel, bind
        self._cache: dict[int, Instr] = {}
        self._stored: dict[int, Entry] | None = decode_store.load(code) if stored else None
        self._new = 0                                      # instructions decoded here, not yet stored

    def at(self, pc: int) -> Instr:
        ins = self._cache.get(pc)
        if ins is None:
            entry = None if self._stored is None else self._stored.get(pc)
            if entry is None:
                entry = decoded_fields(self.code, pc, self.kernel)
                if self._stored is not None:
                    self._stored[pc] = entry
                    self._new += 1
            ins = instr_from(pc, entry)
            ins.run = self._bind(ins)
            self._cache[pc] = ins
        return ins

    def keep(self) -> None:
        """Store what this process decoded (once per new instruction: a launch reaching no new PC writes nothing)."""
        if self._stored is not None and self._new:
            decode_store.save(self.code, self._stored)
            self._new = 0
