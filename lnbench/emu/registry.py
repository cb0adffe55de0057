"""The opcode registry: the `op` decorator each handler module (ops_scalar, ops_vector, ops_memory, ops_crosslane,
ops_control) registers its handlers with, and the tables it fills (handler, instruction class and what each
handler implements, per opcode). lnbench.emu.semantics loads the handler modules and binds instructions to them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lnbench.constants import INSTRUCTION_CLASSES

Handler = Callable[..., None]
HANDLERS: dict[str, Handler] = {}
#: opcode -> class for the executed profile
OP_CLASS: dict[str, str] = {}
CLASSES = INSTRUCTION_CLASSES
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
