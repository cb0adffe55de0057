"""Which opcodes a code object contains, and whether the emulator has a handler for each.

A linear sweep decodes every kernel of a code object from its entry to the end of .text (or its
last s_endpgm), so paths a test did not execute (spill code, rare branches) are covered too.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable, Iterator

from lnbench.emu.codeobject import read_code_object
from lnbench.emu.decode import Instr, decode_at
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.semantics import bind, handlers


def code_object_of(compiled: Any) -> bytes:
    """The ELF code object inside a FlyDSL 0.5 CompiledFunction (its `gpu.binary` in the kept IR)."""
    ir = compiled._keepalive.ir
    hit = re.search(r'bin = "(.*?)"', ir, re.S)
    if hit is None:
        raise ValueError("no gpu.binary in the compiled function's IR")
    text, out, i = hit.group(1), bytearray(), 0
    while i < len(text):                       # MLIR string escapes: \\, \" and \XX hex
        if text[i] == "\\":
            nxt = text[i + 1]
            if nxt in '\\"':
                out.append(ord(nxt))
                i += 2
            else:
                out.append(int(text[i + 1:i + 3], 16))
                i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def _sweep(code_object: bytes) -> Iterator[Instr]:
    """Every decodable instruction of every kernel, in order (a linear sweep to the last s_endpgm)."""
    for kernel in read_code_object(code_object).kernels.values():
        code, pc = kernel.code, 0
        ends = [m.start() for m in re.finditer(re.escape(b"\x00\x00\x81\xbf"), code) if m.start() % 4 == 0]
        limit = (ends[-1] + 4) if ends else len(code)
        while pc < limit:
            try:
                ins = decode_at(code, pc, kernel.name)
            except EmulatorFault:
                break
            yield ins
            pc += ins.size


def opcodes(code_object: bytes) -> Counter:
    """Static count of every opcode in every kernel of the code object."""
    return Counter(ins.name for ins in _sweep(code_object))


def unsupported(code_object: bytes) -> Counter:
    """Instructions of the code object the emulator would refuse when reached, by reason (see refusals)."""
    return refusals(_sweep(code_object))


def refusals(instructions: Iterable[Instr]) -> Counter:
    """Reason -> count: no handler, an encoding its handler does not run, or a modifier field it does not
    apply (the handler table's own check at bind time, done statically)."""
    found: Counter = Counter()
    for ins in instructions:
        try:
            bind(ins)
        except EmulatorFault as exc:
            found[re.sub(r" at PC 0x[0-9a-f]+", "", str(exc))] += 1
    return found


def missing_handlers(counts: Counter) -> list[str]:
    """Opcodes present in the code but unknown to the emulator."""
    known = handlers()
    return sorted(name for name in counts if name not in known)
