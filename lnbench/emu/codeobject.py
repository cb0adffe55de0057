"""Read an AMDGPU code object (ELF): kernel symbols, the msgpack metadata note, kernel descriptors.

Only what the emulator needs: where each kernel's code starts, its descriptor (initial SGPR/VGPR
setup, LDS and scratch sizes, float mode) and the metadata's argument list.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import msgpack

EM_AMDGPU = 224
NT_AMDGPU_METADATA = 32
MACH_TO_ARCH = {0x4C: "gfx942", 0x4F: "gfx950"}


class CodeObjectError(ValueError):
    """The bytes are not an AMDGPU code object this emulator understands."""


@dataclass(frozen=True)
class KernelDescriptor:
    """The 64-byte amdhsa kernel descriptor, decoded into the fields that set up a wave."""

    group_segment_size: int
    private_segment_size: int
    kernarg_size: int
    code_offset: int               # entry relative to the descriptor's own address
    rsrc1: int
    rsrc2: int
    rsrc3: int
    properties: int

    @property
    def float_mode(self) -> int:
        return (self.rsrc1 >> 12) & 0xFF

    @property
    def ieee_mode(self) -> bool:
        return bool((self.rsrc1 >> 23) & 1)

    @property
    def user_sgpr_count(self) -> int:
        return (self.rsrc2 >> 1) & 0x1F

    @property
    def private_segment_enabled(self) -> bool:
        return bool(self.rsrc2 & 1)

    @property
    def workgroup_id_enabled(self) -> tuple[bool, bool, bool]:
        return bool((self.rsrc2 >> 7) & 1), bool((self.rsrc2 >> 8) & 1), bool((self.rsrc2 >> 9) & 1)

    @property
    def workitem_id_vgprs(self) -> int:
        """0: only X in v0; 1: X, Y; 2: X, Y, Z (packed in v0 on gfx90a+)."""
        return (self.rsrc2 >> 11) & 3

    @property
    def user_sgpr_flags(self) -> dict[str, bool]:
        p = self.properties
        names = ("private_segment_buffer", "dispatch_ptr", "queue_ptr", "kernarg_segment_ptr",
                 "dispatch_id", "flat_scratch_init", "private_segment_size")
        return {n: bool((p >> i) & 1) for i, n in enumerate(names)}

    @property
    def accum_offset(self) -> int:
        return ((self.rsrc3 & 0x3F) + 1) * 4


@dataclass
class Kernel:
    name: str
    code: bytes                    # from the entry point to the end of .text
    descriptor: KernelDescriptor
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def args(self) -> list[dict[str, Any]]:
        return list(self.metadata.get(".args", []))


@dataclass
class CodeObject:
    arch: str
    kernels: dict[str, Kernel]


def _sections(data: bytes) -> list[tuple[str, int, int, int, int, int, int]]:
    """(name, type, addr, offset, size, link, entsize) per section header."""
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(e_shnum):
        sh = struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
        raw.append(sh)
    strtab_off = raw[e_shstrndx][4]
    out = []
    for name_off, typ, _flags, addr, off, size, link, _info, _align, entsize in raw:
        end = data.index(b"\0", strtab_off + name_off)
        out.append((data[strtab_off + name_off:end].decode(), typ, addr, off, size, link, entsize))
    return out


def code_object_size(data: bytes) -> int:
    """Bytes the ELF occupies (end of the section header table): the launch path gets no size."""
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    return e_shoff + e_shentsize * e_shnum


def _notes(data: bytes, off: int, size: int) -> list[tuple[str, int, bytes]]:
    out, pos, end = [], off, off + size
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12
        name = data[pos:pos + namesz].rstrip(b"\0").decode(errors="replace")
        pos += (namesz + 3) & ~3
        desc = data[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        out.append((name, ntype, desc))
    return out


def _descriptor(raw: bytes) -> KernelDescriptor:
    group, private, kernarg = struct.unpack_from("<III", raw, 0)
    code_off, = struct.unpack_from("<q", raw, 16)
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
    props, = struct.unpack_from("<H", raw, 56)
    return KernelDescriptor(group, private, kernarg, code_off, rsrc1, rsrc2, rsrc3, props)


def read_code_object(data: bytes) -> CodeObject:
    """Parse the ELF bytes of a code object (as hipModuleLoadData receives them)."""
    data = bytes(data)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise CodeObjectError("not a 64-bit ELF code object")
    e_machine, = struct.unpack_from("<H", data, 0x12)
    if e_machine != EM_AMDGPU:
        raise CodeObjectError(f"ELF machine {e_machine} is not AMDGPU ({EM_AMDGPU})")
    e_flags, = struct.unpack_from("<I", data, 0x30)
    arch = MACH_TO_ARCH.get(e_flags & 0xFF)
    if arch is None:
        raise CodeObjectError(f"code object for mach 0x{e_flags & 0xFF:x}: the emulator runs "
                              f"{', '.join(sorted(MACH_TO_ARCH.values()))}")
    secs = _sections(data)
    by_name = {s[0]: s for s in secs}
    meta: dict[str, Any] = {}
    for name, typ, _a, off, size, _l, _e in secs:
        if typ == 7:  # SHT_NOTE
            for owner, ntype, desc in _notes(data, off, size):
                if owner == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
                    meta = msgpack.unpackb(desc, raw=False, strict_map_key=False)
    text = by_name.get(".text")
    if text is None:
        raise CodeObjectError("code object has no .text section")
    symtab = by_name.get(".symtab") or by_name.get(".dynsym")
    if symtab is None:
        raise CodeObjectError("code object has no symbol table (.symtab or .dynsym)")
    strtab = secs[symtab[5]]
    syms: dict[str, int] = {}
    for i in range(symtab[4] // 24):
        st_name, _info, _other, _shndx, value, _size = struct.unpack_from("<IBBHQQ", data, symtab[3] + i * 24)
        end = data.index(b"\0", strtab[3] + st_name)
        syms[data[strtab[3] + st_name:end].decode()] = value

    def file_offset(vaddr: int) -> int:
        for _n, _t, addr, off, size, _l, _e in secs:
            if addr and addr <= vaddr < addr + size:
                return off + vaddr - addr
        raise CodeObjectError(f"address 0x{vaddr:x} is in no section")

    kernels: dict[str, Kernel] = {}
    metas = {k.get(".name"): k for k in meta.get("amdhsa.kernels", [])}
    for sym, value in syms.items():
        if not sym.endswith(".kd"):
            continue
        name = sym[:-3]
        kd = _descriptor(data[file_offset(value):file_offset(value) + 64])
        entry = value + kd.code_offset
        t_name, _t, t_addr, t_off, t_size, _l, _e = text
        if not t_addr <= entry < t_addr + t_size:
            raise CodeObjectError(f"kernel {name}: entry 0x{entry:x} outside .text")
        start = t_off + entry - t_addr
        kernels[name] = Kernel(name, data[start:t_off + t_size], kd, metas.get(name, {}))
    if not kernels:
        raise CodeObjectError("code object defines no kernel (no .kd symbol)")
    return CodeObject(arch, kernels)
