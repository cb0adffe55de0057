"""The semantics table: one handler per opcode (family), registered by name and instruction class
(lnbench.emu.registry), and the binding of a decoded instruction to its handler.

`len(HANDLERS)` is the set of opcodes the emulator runs; an opcode without a handler is a fault
naming it, never a silent default. Handlers live in ops_scalar, ops_vector, ops_memory,
ops_crosslane and ops_control.

Each registration also says what the handler implements (`table()` lists it):
- `forms`: the encodings it runs: native (VOP1/VOP2/VOPC/SOP*/memory), vop3, vop3p, sdwa, dpp;
- `honours`: the modifier fields it applies (omod, clamp, neg/abs, op_sel, SDWA selects, DPP controls, ...);
- `approx`: why its result may differ from the hardware's bits, when it can.
An instruction in another encoding, or with a modifier field set to anything but its neutral value that
the handler does not honour, is a fault naming the field (checked once per PC, when it is bound): the
emulator never runs an instruction while ignoring part of it.
"""
from __future__ import annotations

from lnbench.emu.decode import Instr
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.registry import HANDLERS, NEUTRAL, SPECS, Handler, Spec

_loaded = False


def _load() -> None:
    global _loaded
    from lnbench.emu import ops_control, ops_crosslane, ops_memory, ops_scalar, ops_vector  # noqa: F401
    _loaded = True


def form_of(fmt: str) -> str:
    """The encoding family of a decoded format name (VOP2_SDWA_SDST -> sdwa, VOP1_DPP16 -> dpp, ...)."""
    if "_SDWA" in fmt:
        return "sdwa"
    if fmt.endswith("_DPP16"):
        return "dpp"
    if fmt.startswith("VOP3P"):
        return "vop3p"
    if fmt.startswith("VOP3"):
        return "vop3"
    return "native"


def unhonoured(ins: Instr, spec: Spec) -> list[str]:
    """The modifier fields of `ins` set to a non-neutral value that its handler does not apply."""
    bad = []
    for name, value in ins.f.items():
        if name not in NEUTRAL or name in spec.honours:
            continue
        if name == "dst_unused" and ins.f.get("dst_sel", 6) == 6:
            continue                       # a whole-dword destination has no unused bits
        if NEUTRAL[name] is None or value != NEUTRAL[name]:
            bad.append(f"{name}={value}")
    return bad


def bind(ins: Instr) -> Handler:
    """The handler for a decoded instruction: a fault naming the opcode when there is none, the encoding
    when the handler does not run it, or the modifier field it would otherwise ignore."""
    if not _loaded:
        _load()
    fn = HANDLERS.get(ins.name)
    if fn is None:
        raise EmulatorFault(f"opcode {ins.name} ({ins.fmt}) at PC 0x{ins.pc:x} has no handler in the emulator",
                            pc=ins.pc, opcode=ins.name)
    spec = SPECS[ins.name]
    form = form_of(ins.fmt)
    if form not in spec.forms:
        raise EmulatorFault(f"opcode {ins.name} in {form} form ({ins.fmt}) at PC 0x{ins.pc:x} is not implemented "
                            f"by the emulator (it runs {', '.join(spec.forms)})", pc=ins.pc, opcode=ins.name)
    bad = unhonoured(ins, spec)
    if bad:
        raise EmulatorFault(f"opcode {ins.name} ({ins.fmt}) at PC 0x{ins.pc:x}: modifier field "
                            f"{', '.join(bad)} is not implemented by the emulator's handler", pc=ins.pc,
                            opcode=ins.name)
    return fn


def handlers() -> dict[str, Handler]:
    if not _loaded:
        _load()
    return HANDLERS


def specs() -> dict[str, Spec]:
    if not _loaded:
        _load()
    return SPECS


def approximated() -> dict[str, str]:
    """opcode -> why the emulator's result may differ from the hardware's (for the fidelity ledger)."""
    return {name: s.approx for name, s in specs().items() if s.approx}


def table() -> list[dict[str, str]]:
    """One row per opcode: class, the encodings it runs, the modifier fields it applies, its approximation."""
    return [{"opcode": name, "class": s.cls, "forms": ",".join(s.forms),
             "honours": ",".join(sorted(s.honours)), "approx": s.approx} for name, s in sorted(specs().items())]
