"""Why a FAIL or error row failed: the pattern its numbers fit, for the `diagnosis` column.

A rule reads only the rows of one run (their err/allowed, relative errors, statuses, details) and what the case
generator promises about its inputs (`cases.MEAN_OVER_SIGMA`: ~0 for N(0, 1) rows, 1e3 for offset rows, ∞ for
constant ones). The first rule that fits a row names it; a row no rule fits keeps an empty diagnosis, and so
does every PASS row. A diagnosis reads `NAME: why (the numbers that show it)`, NAME one of RULES:

    stats dtype             mean or rstd not fp32: the row says so, or its relative error on N(0, 1) rows is
                            the rounding of a 16-bit format (in (u/8, u], u = 2⁻⁸ bf16, 2⁻¹¹ f16)
    backward follows stats  dx/dγ/dβ fail only in the cases where the forward's mean or rstd fail (verify feeds
                            each backward its forward's stats), named with the stats' own diagnosis
    y follows stats         the same for y, when no rule below fits it
    eps not honoured        the same tensor's err/allowed differs GROWTH× between two eps on N(0, 1) rows of one
                            shape (randn vs eps2), the worse one failing; then every failing row of that
                            backend × dtype (offset rows too: rounded to bf16, 1e3 + N(0, 1) leaves rows of
                            (almost) no variance, where eps decides rstd)
    backward's own stats    dx/dγ/dβ fail on rows with |mean|/σ ≥ WIDE where the forward's mean and rstd pass,
                            and pass on N(0, 1) rows: the backward computes its own statistics
    one-pass variance       err/allowed GROWTH× larger on offset rows (|mean|/σ ≈ 1e3) than on N(0, 1) rows of
                            the same shape: E[x²]−E[x]² cancels as (|mean|/σ)²
    constant rows           fails on constant rows (σ = 0) where the same tensor passes on N(0, 1) rows, eps
                            honoured: rstd = 1/√(var + eps) rests on eps, so a variance residue the size of eps
                            (the rounding E[x²]−E[x]² leaves) moves it
    only at N               error rows: every error of the backend is at some widths N, every case at its other
                            widths ran (a width-dependent path: vectorized, a tail, a register limit)
    only in dtype           error rows: the same for dtypes, where the errors are not confined to some N
    ABI difference          (added to the above) the same kernel in the other launch ABI, verified in the same
                            run, passes this check (runs this case, for an error row)
"""
from __future__ import annotations

import math
import numbers
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Callable, Iterable, TypeGuard, TypeVar, Union

from lnbench.results.rows import SelftestRow, VerifyRow
from lnbench.verify.cases import MEAN_OVER_SIGMA

#: a ratio of err/allowed between two cases that counts as growth
GROWTH = 10.0
#: |mean|/σ from which rows are ones where cancellation shows
WIDE = 10.0
STATS = ("mean", "rstd")
BACKWARD = ("dx", "dweight", "dbias")
#: unit roundoff of the 16-bit formats a stat may have been rounded through
ROUNDING = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}
RULES = ("stats dtype", "backward follows stats", "y follows stats", "eps not honoured", "backward's own stats",
         "one-pass variance", "constant rows", "only at N", "only in dtype", "ABI difference")
_NOT_FP32 = re.compile(r"(\w+) is torch\.(\w+), must be torch\.float32")

#: a verify row (lnbench verify, or its --self-test)
Row = Union[VerifyRow, SelftestRow]
#: the rows diagnose() is given, returned as they are
RowT = TypeVar("RowT", VerifyRow, SelftestRow)


def rule_of(diagnosis: str) -> list[str]:
    """The RULES a diagnosis names (in order; empty for none)."""
    return [part.split(":", 1)[0] for part in diagnosis.split("; ") if part.split(":", 1)[0] in RULES]


def _used(row: Row | None) -> float | None:
    """err/allowed of a judged row (None for a row without values)."""
    if row is None or not isinstance(row.max_abs_err, numbers.Real) or not isinstance(row.allowed, numbers.Real):
        return None
    err, allowed = float(row.max_abs_err), float(row.allowed)
    if math.isnan(err) or math.isnan(allowed):
        return None
    return err / allowed if allowed > 0 else (math.inf if err > 0 else 0.0)


def _x(value: float) -> str:
    return f"{value:.2g}×" if value < 10 else f"{value:,.0f}×"


def _mos(kind: str) -> str:
    value = MEAN_OVER_SIGMA.get(kind, 0.0)
    return "|mean|/σ = ∞" if math.isinf(value) else f"|mean|/σ ≈ {value:g}"


class _Run:
    """The rows of one run indexed by case: (backend, dtype, kind, shape, eps) -> tensor -> row."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.cases: dict[tuple, dict[Any, Row]] = defaultdict(dict)
        for row in rows:
            self.cases[self.key(row)][row.tensor] = row
        self.eps = {(r.backend, r.dtype, r.shape): r.eps for r in rows if r.case == "randn"}

    @staticmethod
    def key(row: Row) -> tuple:
        return (row.backend, row.dtype, row.case, row.shape, row.eps)

    def case(self, row: Row) -> dict[Any, Row]:
        return self.cases.get(self.key(row), {})

    def of(self, row: Row, kind: str = "randn") -> dict[Any, Row]:
        """The case of `kind` (first eps) beside `row`: the same backend, dtype and shape; for an autograd-3d row
        (a 3-D shape) the first such case with the same N."""
        eps = self.eps.get((row.backend, row.dtype, row.shape))
        if eps is not None:
            return self.cases.get((row.backend, row.dtype, kind, row.shape, eps), {})
        return next((rows for (b, d, k, shape, _), rows in self.cases.items()
                     if (b, d, k) == (row.backend, row.dtype, kind)
                     and shape.split("x")[-1] == str(row.N)), {})

    def stats(self, row: Row) -> dict[Any, Row]:
        """The forward's mean and rstd rows of the row's case (autograd-3d has none: its N(0, 1) twin's)."""
        case = self.of(row) if row.case == "autograd-3d" else self.case(row)
        return {t: case[t] for t in STATS if t in case}

    def same(self, row: Row) -> Iterable[dict[Any, Row]]:
        """Every case of the row's backend and dtype."""
        return (rows for key, rows in self.cases.items() if key[:2] == (row.backend, row.dtype))


def _fails(row: Row | None) -> TypeGuard[Row]:
    return row is not None and row.status == "FAIL"


def _passes(row: Row | None) -> TypeGuard[Row]:
    return row is not None and row.status == "PASS"


def stats_dtype(row: Row, run: _Run, done: dict[int, str]) -> str:
    """mean/rstd: not fp32 by the row's own detail, or by its relative error on N(0, 1) rows."""
    if row.tensor not in STATS:
        return ""
    said = _NOT_FP32.search(str(row.detail or ""))
    if said:
        return f"stats dtype: {said.group(1)} is {said.group(2)}, not float32"
    rel = [float(case[row.tensor].max_rel_err or 0.0) for case in run.same(row)
           if _fails(case.get(row.tensor)) and case[row.tensor].case in ("randn", "eps2")]
    worst = max(rel, default=0.0)
    for name, u in sorted(ROUNDING.items(), key=lambda item: -item[1]):
        if u / 8 < worst <= u:
            return (f"stats dtype: {row.tensor}'s relative error on N(0, 1) rows ({worst:.2g}) is {name} rounding "
                    f"(≤ {u:.2g}), fp32 would be ~1e-7")
    return ""


def follows_stats(row: Row, run: _Run, done: dict[int, str]) -> str:
    """dx/dγ/dβ (or y) failing only in the cases whose forward stats fail; `done`: the stats rows' diagnoses."""
    if row.tensor not in (*BACKWARD, "y"):
        return ""
    bad = [t for t, s in run.stats(row).items() if _fails(s)]
    if not bad:
        return ""
    for case in run.same(row):           # wherever the forward's stats pass, this tensor passes
        stats = run.stats(next(iter(case.values())))
        if stats and all(_passes(s) for s in stats.values()) and row.tensor in case \
                and case[row.tensor].status in ("FAIL", "error"):
            return ""
    stats = run.stats(row)
    why = ", ".join(dict.fromkeys(r for t in bad for r in rule_of(done.get(id(stats[t]), "")))) or "undiagnosed"
    name = "y follows stats" if row.tensor == "y" else "backward follows stats"
    return f"{name}: fails only where the forward's {'/'.join(bad)} fail{'s' * (len(bad) == 1)} ({why})"


def eps_ignored(row: Row, run: _Run, done: dict[int, str]) -> str:
    """Any row of a backend × dtype whose error on N(0, 1) rows changes GROWTH× with eps alone."""
    best: tuple[float, str] | None = None
    for case in run.same(row):
        for name, hi in case.items():
            if hi.case != "eps2":
                continue
            lo = run.of(hi).get(name)
            a, b = _used(hi), _used(lo)
            if lo is None or a is None or b is None:      # (_used(None) is None)
                continue
            (worse, w), (other, o) = sorted(((hi, a), (lo, b)), key=lambda p: -p[1])
            if _fails(worse) and w >= GROWTH * o and (best is None or w / max(o, 1e-300) > best[0]):
                best = (w / max(o, 1e-300), f"{name} {_x(w)} the bar at eps={worse.eps:g}, "
                                            f"{_x(o)} at eps={other.eps:g}")
    return f"eps not honoured: the error grows with eps ({best[1]})" if best else ""


def own_stats(row: Row, run: _Run, done: dict[int, str]) -> str:
    """dx/dγ/dβ failing on large-|mean|/σ rows whose forward stats pass, passing on N(0, 1) rows."""
    stats = run.stats(row)
    if row.tensor not in BACKWARD or MEAN_OVER_SIGMA.get(str(row.case), 0.0) < WIDE or not stats \
            or not all(_passes(s) for s in stats.values()) or not _passes(run.of(row).get(row.tensor)):
        return ""
    return (f"backward's own stats: fails on rows with {_mos(str(row.case))} where the forward's mean and rstd pass "
            f"(and on N(0, 1) rows it passes): the backward computes its own statistics (e.g. a one-pass variance) "
            f"instead of using the saved ones")


def one_pass(row: Row, run: _Run, done: dict[int, str]) -> str:
    """Offset rows GROWTH× further outside the bar than the N(0, 1) rows of the same shape."""
    if not WIDE <= MEAN_OVER_SIGMA.get(str(row.case), 0.0) < math.inf:
        return ""
    mine, peer = _used(row), _used(run.of(row).get(row.tensor))
    if mine is None or peer is None or mine < GROWTH * peer:
        return ""
    return (f"one-pass variance: the error grows with |mean|/σ ({_x(mine)} the bar at {_mos(str(row.case))}, "
            f"{_x(peer)} on N(0, 1) rows): E[x²]−E[x]² cancels")


def constant_rows(row: Row, run: _Run, done: dict[int, str]) -> str:
    """Constant rows failing where the N(0, 1) rows of the same shape pass."""
    if row.case != "constant" or not _passes(run.of(row).get(row.tensor)):
        return ""
    rstd = run.case(row).get("rstd")
    off = f" (rstd off by {float(rstd.max_rel_err or 0.0):.2%})" if _fails(rstd) else ""
    return (f"constant rows: variance 0, so rstd = 1/√(var + eps) rests on eps alone and a variance residue the "
            f"size of eps (what E[x²]−E[x]² leaves in rounding) shifts it{off}")


#: rules in the order they are tried, per tensor kind; a row's first fitting rule names it
Rule = Callable[[Row, _Run, dict[int, str]], str]
ORDER: dict[str, tuple[Rule, ...]] = {
    "stats": (stats_dtype, eps_ignored, one_pass, constant_rows),
    "forward": (eps_ignored, one_pass, constant_rows, follows_stats),
    "backward": (follows_stats, eps_ignored, own_stats, one_pass, constant_rows),
}


def confined(row: Row, run: _Run) -> str:
    """An error row whose backend errs only at some N (or only in some dtypes) and runs every other."""
    errs: dict[str, set] = {"N": set(), "dtype": set()}
    ran: dict[str, set] = {"N": set(), "dtype": set()}
    for (backend, _, _, _, _), case in run.cases.items():
        if backend != row.backend:
            continue
        first = next(iter(case.values()))
        bucket = errs if any(r.status == "error" for r in case.values()) else \
            ran if any(r.status in ("PASS", "FAIL") for r in case.values()) else None
        if bucket is not None:
            bucket["N"].add(int(first.N or 0))
            bucket["dtype"].add(first.dtype)
    for what, name in (("N", "only at N"), ("dtype", "only in dtype")):
        if ran[what] and not errs[what] & ran[what]:
            return (f"{name}: errors only at {what} = {', '.join(map(str, sorted(errs[what])))} "
                    f"({what} = {', '.join(map(str, sorted(ran[what])))} ran)")
    return ""


def _abi(row: Row, run: _Run, twins: dict[str, str]) -> str:
    """The other-ABI twin passes this check (runs this case, for an error row)."""
    twin = twins.get(str(row.backend))
    if twin is None:
        return ""
    other = run.cases.get((twin, *_Run.key(row)[1:]), {})
    if row.status == "error":
        ran = other and not any(r.status == "error" for r in other.values())
        return f"ABI difference: {twin} runs this case" if ran else ""
    return f"ABI difference: {twin} passes this check" if _passes(other.get(row.tensor)) else ""


def diagnose(rows: list[RowT], twins: dict[str, str] | None = None) -> list[RowT]:
    """Set every row's `diagnosis` (empty but for FAIL and error rows a rule fits) and return the rows.

    `twins`: backend -> the same kernel in the other launch ABI, where both were verified in this run."""
    done: dict[int, str] = {}
    run, twins = _Run(rows), twins or {}
    for group in ("stats", "forward", "backward"):      # the stats first: a backward row names their diagnosis
        for row in rows:
            tensor = row.tensor
            kind = "stats" if tensor in STATS else "backward" if tensor in BACKWARD else "forward"
            if kind != group:
                continue
            found = ""
            if row.status == "FAIL":
                found = next((text for rule in ORDER[kind] if (text := rule(row, run, done))), "")
            elif row.status == "error":
                found = confined(row, run)
            if row.status in ("FAIL", "error"):
                found = "; ".join(filter(None, (found, _abi(row, run, twins))))
            row.diagnosis = done[id(row)] = found
    return rows


def abi_twins(names: Iterable[str]) -> dict[str, str]:
    """backend name -> its twin: the same kernel built for the other launch ABI (lnbench's flydsl and
    flydsl-tensor; kernel sources differing only in `builder_kwargs` abi), among the backends `names`."""
    from lnbench.backends import get_backend

    seen: dict[tuple, dict[str, str]] = defaultdict(dict)
    for name in names:
        try:
            backend = get_backend(name)
        except Exception:  # noqa: BLE001 - a backend that cannot be made here has its own rows saying why
            continue
        variant = _variant(backend)
        if variant is not None:
            seen[variant[0]][variant[1]] = backend.name
    twins = {}
    for abis in seen.values():
        if len(abis) == 2:
            a, b = abis.values()
            twins[a], twins[b] = b, a
    return twins


def _variant(backend: Any) -> tuple[tuple, str] | None:
    """(what identifies the kernel apart from its ABI, the ABI), or None for a backend without ABI variants."""
    spec = getattr(backend, "spec", None)
    if spec is not None:
        kwargs = dict(spec.builder_kwargs)
        abi = kwargs.pop("abi", None)
        key = (spec.module, spec.path, spec.fwd_builder, spec.bwd_builder, repr(sorted(kwargs.items())))
        return (key, str(abi)) if abi is not None else None
    abi = getattr(backend, "abi", None)
    if isinstance(abi, str):
        return (type(backend).__module__, getattr(backend, "dgamma_strategy", "")), abi
    return None


#: the rule name of FAIL/error rows no rule fits, in by_rule's rows
UNEXPLAINED = "no pattern fits"


def _text(row: Row, rule: str) -> str:
    """The part of a row's diagnosis `rule` gave, without the rule's name."""
    return next((part.split(": ", 1)[1] for part in (row.diagnosis or "").split("; ")
                 if part.startswith(rule + ":")), "")


def by_rule(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """One row per backend × rule over the FAIL/error rows (first-seen order): how many rows, which dtype ×
    case × tensors, and the diagnosis text of the row furthest outside its bar (with its numbers)."""
    groups: dict[tuple[Any, str], list[Row]] = {}
    for row in rows:
        if row.status in ("FAIL", "error"):
            for rule in rule_of(row.diagnosis or "") or [UNEXPLAINED]:
                groups.setdefault((row.backend, rule), []).append(row)
    out = []
    for (backend, rule), members in groups.items():
        where: dict[str, list[Any]] = {}
        for row in members:
            where.setdefault(f"{row.dtype} {row.case}", []).append(row.tensor)
        worst = max(members, key=lambda r: _used(r) or 0.0)
        text = _text(worst, rule)
        if rule.endswith("follows stats"):       # name every stats diagnosis the group's rows follow
            reasons = dict.fromkeys(_text(r, rule).rpartition(" (")[2].rstrip(")") for r in members)
            text = f"{text.rpartition(' (')[0]} ({'; '.join(reasons)})"
        out.append({"backend": backend, "rule": rule, "rows": len(members),
                    "where": "; ".join(f"{k}: {' '.join(dict.fromkeys(v))}" for k, v in where.items()),
                    "why": text, "status": "FAIL" if any(r.status == "FAIL" for r in members) else "error"})
    return out
