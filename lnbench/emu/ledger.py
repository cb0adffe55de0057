"""The fidelity ledger of emulated launches: what executed, what of it the emulator approximates, and which
code object it was.

Every LaunchProfile counts wave-instructions per opcode and carries the code object's SHA-256; `ledger()`
folds one or more launches into a plain dict (JSON- and CSV-ready), `summary()` into one line:

    emulated 41 opcodes, 2 approximated (v_rsq_f32, global_atomic_add_f32); code 3f2a9c1e07b4
"""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from lnbench.emu.semantics import approximated

if TYPE_CHECKING:
    from lnbench.results.rows import VerifyRow


def ledger(launches: Iterable[Any]) -> dict[str, Any]:
    """{opcodes: {name: wave-instructions}, approximated: {name: why}, code_objects: [sha256, ...],
    lds_benign_writes: n} over the launches (LaunchProfile objects)."""
    ops: Counter = Counter()
    codes: list[str] = []
    benign = 0
    for p in launches:
        ops.update(getattr(p, "opcodes", {}) or {})
        sha = getattr(p, "code_object_sha256", "")
        if sha and sha not in codes:
            codes.append(sha)
        benign += int(getattr(p, "lds_benign_writes", 0) or 0)
    approx = approximated()
    return {"opcodes": dict(sorted(ops.items())),
            "approximated": {name: approx[name] for name in sorted(ops) if name in approx},
            "code_objects": codes, "lds_benign_writes": benign}


def merge(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One ledger from several (e.g. a case's forward and backward launches)."""
    ops: Counter = Counter()
    approx: dict[str, str] = {}
    codes: list[str] = []
    benign = 0
    for e in entries:
        ops.update(e.get("opcodes", {}))
        approx.update(e.get("approximated", {}))
        codes += [c for c in e.get("code_objects", []) if c not in codes]
        benign += int(e.get("lds_benign_writes", 0))
    return {"opcodes": dict(sorted(ops.items())), "approximated": dict(sorted(approx.items())),
            "code_objects": codes, "lds_benign_writes": benign}


def summary(entry: dict[str, Any]) -> str:
    """One line: how many opcodes executed, which are approximated, the code objects' short hashes."""
    approx = list(entry.get("approximated", {}))
    codes = " ".join(c[:12] for c in entry.get("code_objects", []))
    line = (f"emulated {len(entry.get('opcodes', {}))} opcodes, {len(approx)} approximated"
            + (f" ({', '.join(approx)})" if approx else "") + (f"; code {codes}" if codes else ""))
    benign = int(entry.get("lds_benign_writes", 0))
    return line + (f"; {benign} benign same-value LDS writes" if benign else "")


@contextlib.contextmanager
def recording(device: Any) -> Iterator[list[Any]]:
    """The launches inside, on the emulated device (an empty list on any other device)."""
    if not getattr(device, "emulated", False):
        yield []
        return
    from lnbench.emu import runtime
    with runtime.recording() as launches:
        yield launches


#: the result-row columns of the ledger (CSV/JSON): opcodes executed, those approximated, code object hashes
ROW_COLUMNS = ("emu_opcodes", "emu_approx", "emu_code")


def row_columns(launches: list[Any]) -> dict[str, str]:
    """The ledger of one case's launches as row columns (space-separated; hashes shortened to 12 hex digits)."""
    if not launches:
        return {}
    entry = ledger(launches)
    return {"emu_opcodes": " ".join(entry["opcodes"]), "emu_approx": " ".join(entry["approximated"]),
            "emu_code": " ".join(c[:12] for c in entry["code_objects"])}


def rows_summary(rows: Iterable[VerifyRow]) -> str | None:
    """One line over result rows carrying ledger columns (None when no row ran on the emulator)."""
    ops: set[str] = set()
    approx: set[str] = set()
    codes: set[str] = set()
    for row in rows:
        if not row.emu_code:
            continue
        ops.update(str(row.emu_opcodes or "").split())
        approx.update(str(row.emu_approx or "").split())
        codes.update(str(row.emu_code).split())
    if not codes:
        return None
    listed = f" ({', '.join(sorted(approx))})" if approx else ""
    return (f"emulator fidelity: {len(ops)} opcodes executed, {len(approx)} approximated{listed}; "
            f"{len(codes)} code object(s), sha256 per row in emu_code")
