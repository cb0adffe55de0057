"""The semantics table: one handler per opcode (family), registered by name and instruction class.

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

from dataclasses import dataclass
from typing import Callable

from lnbench.emu.decode import Instr
from lnbench.emu.errors import EmulatorFault

Handler = Callable[..., None]
HANDLERS: dict[str, Handler] = {}
#: opcode -> class for the executed profile
OP_CLASS: dict[str, str] = {}
CLASSES = ("salu", "valu", "vmem_load", "vmem_store", "smem", "lds", "cross_lane", "branch", "sync")
FORMS = ("native", "vop3", "vop3p", "sdwa", "dpp")


@dataclass(frozen=True)
class Spec:
    """What one opcode's handler implements."""

    cls: str
    forms: tuple[str, ...]
    honours: frozenset[str]
    approx: str = ""


SPECS: dict[str, Spec] = {}

#: modifier fields and their neutral values (a field not listed here is an operand or an offset: always used).
#: `dpp` has no neutral value: a DPP instruction needs a handler that runs the dpp form.
NEUTRAL: dict[str, int | None] = {
    "omod": 0, "clmp": 0, "neg": 0, "abs": 0, "neg_hi": 0, "opsel": 0,
    "src0_neg": 0, "src0_abs": 0, "src1_neg": 0, "src1_abs": 0,
    "dst_sel": 6, "src0_sel": 6, "src1_sel": 6, "src0_sext": 0, "src1_sext": 0, "s0": 0, "s1": 0, "sd": 0,
    "dst_unused": 0, "dpp": None, "bc": 0, "row_mask": 15, "bank_mask": 15,
    "acc": 0, "lds": 0, "gds": 0, "acc_cd": 0, "cbsz": 0, "abid": 0, "blgp": 0,
}
#: the modifier fields of the common helper paths in ops_vector (src/fsrc/out/fout), by what they mean
FLOAT_MODS = frozenset({"neg", "abs", "omod", "clmp", "src0_neg", "src0_abs", "src1_neg", "src1_abs"})
SDWA_INT = frozenset({"dst_sel", "dst_unused", "src0_sel", "src1_sel", "src0_sext", "src1_sext", "s0", "s1"})
DPP_CTRL = frozenset({"dpp", "bc", "row_mask", "bank_mask"})
VALU_FORMS = ("native", "vop3", "sdwa", "dpp")
DEFAULT_FORMS = ("native", "vop3", "vop3p")


def op(*names: str, cls: str, forms: tuple[str, ...] = DEFAULT_FORMS, honours: frozenset[str] | set[str] = frozenset(),
       approx: str = "") -> Callable[[Handler], Handler]:
    """Register `fn` as the handler of every opcode in `names` (see the module docstring for the rest)."""
    if cls not in CLASSES:
        raise ValueError(f"unknown instruction class {cls!r}")
    if set(forms) - set(FORMS):
        raise ValueError(f"unknown forms {set(forms) - set(FORMS)}")

    def register(fn: Handler) -> Handler:
        for name in names:
            if name in HANDLERS:
                raise ValueError(f"opcode {name} registered twice")
            HANDLERS[name] = fn
            OP_CLASS[name] = cls
            SPECS[name] = Spec(cls, tuple(forms), frozenset(honours), approx)
        return fn
    return register


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
