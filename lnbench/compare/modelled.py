"""`lnbench compare` on modelled results (`lnbench perf --device emu`, the `profile` kind): an exact diff.

Two emulated runs are deterministic, so there are no statistics: each launch × target × mode of BASE is matched
with NEW's, every profile and floor value that differs is reported with its magnitude, and the verdict is SAME
(nothing changed), SLOWER / FASTER (bound_us grew / shrank) or CHANGED (the profile moved, the bound did not).
`--fail-if-slower PCT` fails on bound_us growing by more than PCT %, naming what grew. A modelled file against a
measured one (perf on a GPU) is refused unless --force; forced, each measured case is shown beside its modelled
floors summed over its launches (no verdict of speed: a floor above a measurement is a bug in the floors).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from lnbench.version import __version__
from lnbench import validate
from lnbench.cli_common import EXIT_FAILED, EXIT_OK, console, emit_outputs
from lnbench.results.verdicts import Verdict, fails_gate, floor_verdict
from lnbench.errors import LnbenchUsageError
from lnbench.machine.checkout import git_commit, timestamp
from lnbench.machine.checkout import command_line
from lnbench.scaffold.setup import Setup
from lnbench.results import (ABI_KIND, COMPARE, PERF_KIND, PROFILE, PROFILE_KIND, CompareRow,
                             ResultFile, load_result, missing)
from lnbench.output.tables import Column, fmt_time_us, render_table

FASTER, ONLY_BASE, ONLY_NEW, SAME, SLOWER, CHANGED = (Verdict.FASTER, Verdict.ONLY_BASE, Verdict.ONLY_NEW,
                                                  Verdict.SAME, Verdict.SLOWER, Verdict.CHANGED)
KEY = ("backend", "op", "dtype", "shape", "launch", "target", "mode")
#: the values compared, in report order: the profile, then occupancy, then the floors
COMPARED = tuple(c.name for c in PROFILE.columns if c.name not in KEY and c.name not in (
    "modelled", "M", "N", "kernel_name", "abi", "dgamma_strategy", "arch", "detail", "notes", "source",
    "source_module", "source_file", "source_commit"))


def load_pair(base: Path, new: Path) -> tuple[ResultFile, ResultFile] | None:
    """Both files when either is modelled (None: neither is, the statistical compare takes them)."""
    what = "the JSON of lnbench perf or abi-compare"
    pair = (load_result(base, (PERF_KIND, ABI_KIND, PROFILE_KIND), what=what),
            load_result(new, (PERF_KIND, ABI_KIND, PROFILE_KIND), what=what))
    return pair if any(r.kind == PROFILE_KIND for r in pair) else None


def _same(a: Any, b: Any) -> bool:
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b


def _change(name: str, a: Any, b: Any) -> str:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        pct = f" ({(b / a - 1) * 100:+.1f}%)" if a else ""
        fmt = (lambda v: f"{v:,.4g}") if isinstance(a, float) or isinstance(b, float) else (lambda v: f"{v:,}")
        return f"{name} {fmt(a)} → {fmt(b)}{pct}"
    return f"{name} {a if not _same(a, None) else '—'} → {b if not _same(b, None) else '—'}"


def _records(result: ResultFile) -> dict[tuple, dict[str, Any]]:
    frame = result.rows
    frame = frame[frame["status"] == "ok"] if "status" in frame else frame
    out = {}
    for rec in frame.to_dict("records"):
        rec = {k: (None if _same(v, None) else (v.item() if hasattr(v, "item") else v)) for k, v in rec.items()}
        out[tuple(rec.get(k) for k in KEY)] = rec
    return out


def diff_rows(base: ResultFile, new: ResultFile) -> list[CompareRow]:
    """One row per launch × target × mode of either file: every change, exactly."""
    b, n = _records(base), _records(new)
    rows = []
    for key in [*b, *(k for k in n if k not in b)]:
        cells = dict(zip(KEY, key))
        row = CompareRow(modelled=True, **{k: cells[k] for k in ("backend", "op", "dtype", "shape", "mode",
                                                                  "launch", "target")})
        if key not in n or key not in b:
            row.set(verdict=ONLY_BASE if key not in n else ONLY_NEW, changes="")
            rows.append(row)
            continue
        old, now = b[key], n[key]
        changes = [_change(c, old.get(c), now.get(c)) for c in COMPARED if not _same(old.get(c), now.get(c))]
        base_us, new_us = old.get("bound_us"), now.get("bound_us")
        ratio = new_us / base_us if base_us else None
        if not changes:
            verdict = SAME
        elif base_us is None or new_us is None:         # a bound on one side only: changed, not faster or slower
            verdict = CHANGED
        else:
            verdict = SLOWER if new_us > base_us else FASTER if new_us < base_us else CHANGED
        row.set(base_us=base_us, new_us=new_us, ratio=ratio, verdict=verdict, changes="; ".join(changes),
                change_pct=(ratio - 1) * 100 if ratio is not None else None)
        rows.append(row)
    return rows


def against_measured(modelled: ResultFile, measured: ResultFile) -> list[CompareRow]:
    """--force: each measured aggregate beside the modelled bound summed over the case's launches, per target."""
    bounds: dict[tuple, float] = {}
    for key, rec in _records(modelled).items():
        case = (rec["backend"], rec["op"], rec["dtype"], rec["shape"], rec["mode"], rec["target"])
        bounds[case] = bounds.get(case, 0.0) + float(rec["bound_us"])
    frame = measured.rows
    frame = frame[frame["row_kind"] == "aggregate"] if "row_kind" in frame else frame
    timed = {(r["backend"], r["op"], r["dtype"], r["shape"], r["mode"]): r.get("median_us")
             for r in frame.to_dict("records")}
    rows = []
    for (backend, op, dtype, shape, mode, target), floor in bounds.items():
        median = timed.get((backend, op, dtype, shape, mode))
        if median is None or _same(median, None):
            continue
        rows.append(CompareRow(modelled=True, backend=backend, op=op, dtype=dtype, shape=shape, mode=mode,
                               target=target, base_us=floor, new_us=float(median), ratio=float(median) / floor,
                               verdict=floor_verdict(floor, float(median)),
                               detail="base_us: modelled floor; new_us: measured median"))
    return rows


def gate(rows: list[CompareRow], pct: float | None) -> list[CompareRow]:
    """Rows whose bound_us grew by more than `pct` %, or that BASE had and NEW lost."""
    if pct is None:
        return []
    return [r for r in rows if r.verdict == ONLY_BASE
            or (r.change_pct is not None and fails_gate(r.verdict, r.change_pct, pct))]


def _grew(row: CompareRow) -> str:
    grew = [c for c in str(row.changes or "").split("; ") if "(+" in c]
    return "; ".join(grew) or "lost in NEW"


def run(base_path: Path, new_path: Path, pair: tuple[ResultFile, ResultFile], fail_pct: float | None, force: bool,
        md_path: Path | None, csv_path: Path | None, json_path: Path | None, quiet: bool) -> int:
    """Compare a modelled pair (or, forced, modelled against measured); print, write, gate."""
    if fail_pct is not None:
        validate.number(fail_pct, "fail_if_slower", "--fail-if-slower")
    base, new = pair
    mixed = base.kind != new.kind
    if mixed and not force:
        side = "BASE" if base.kind == PROFILE_KIND else "NEW"
        raise LnbenchUsageError(f"{side} holds modelled floors (lnbench perf --device emu) and the other file "
                                f"measured times ({'NEW' if side == 'BASE' else 'BASE'} is lnbench "
                                f"{new.kind if side == 'BASE' else base.kind}): they are never mixed (--force "
                                f"shows each measurement beside its floors)")
    if not mixed and base.run.device != new.run.device and not force:
        raise LnbenchUsageError(f"BASE ran on {base.run.device} and NEW on {new.run.device}: "
                                f"different arches (--force compares anyway)")
    rows = (against_measured(*((base, new) if base.kind == PROFILE_KIND else (new, base))) if mixed
            else diff_rows(base, new))
    hits = [] if mixed else gate(rows, fail_pct)
    csv_final, json_final, md_final = Setup("compare").reserve_outputs(csv_path, json_path, md_path,
                                                                       {"BASE": base_path, "NEW": new_path})
    meta = COMPARE.run(command="compare", source_command=PROFILE_KIND, command_line=command_line(),
                       lnbench_version=__version__, git_commit=git_commit(), timestamp=timestamp(),
                       base=str(base_path), new=str(new_path), interval="exact (modelled: no statistics)",
                       fail_if_slower_pct=fail_pct, forced="modelled against measured" if mixed else "")
    if not quiet:
        _print(rows, f"lnbench compare (modelled, exact): {base_path} → {new_path}")
    emit_outputs(rows, meta, csv_final, json_final, md_path=md_final)
    counts = {v: sum(r.verdict == v for r in rows) for v in dict.fromkeys(r.verdict for r in rows)}
    console.print(f"{len(rows)} modelled row(s): " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    for row in hits:
        console.print(f"[bold red]--fail-if-slower {fail_pct:g}: {escape(_label(row))}: bound_us "
                      f"{_pct(row)}; grew: {escape(_grew(row))}[/bold red]", soft_wrap=True)
    return EXIT_FAILED if hits else EXIT_OK


def _label(row: CompareRow) -> str:
    return " ".join(str(row.value(k)) for k in KEY if row.value(k))


def _pct(row: CompareRow) -> str:
    return f"{row.change_pct:+.1f}%" if row.change_pct is not None else "lost in NEW"


def _print(rows: list[CompareRow], title: str) -> None:
    columns = [Column(k, k, justify="left") for k in KEY] + [
        Column("base_us", "base bound", fmt_time_us), Column("new_us", "new bound", fmt_time_us),
        Column("verdict", "verdict", justify="left"), Column("changes", "changes", justify="left")]
    render_table(console, title, columns, [{**r.cells(), "changes": r.changes or r.detail or ""} for r in rows])
