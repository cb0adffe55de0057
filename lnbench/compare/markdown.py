"""A Markdown summary of a comparison, fit for a pull-request comment (`lnbench compare --md FILE`)."""
from __future__ import annotations

import math
from typing import Sequence

from lnbench.output.markdown import cell
from lnbench.results import CompareRow, CompareRun
from lnbench.output.tables import fmt_float, fmt_time_us
from lnbench.results.verdicts import Verdict
HEADER = ("| backend | op | dtype | shape | mode | base time | new time | new/base [CI] | p | verdict |\n"
          "|---|---|---|---|---|---:|---:|---:|---:|---|")


def ratio_text(row: CompareRow) -> str:
    """`1.102 [1.091, 1.113] (+10.2%)`, or '—' for rows that were not compared."""
    ratio = row.ratio
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        return "—"
    low, high = row.ci_low, row.ci_high
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high)):
        return f"{ratio:.3f} ({row.change_pct:+.1f}%)"          # no interval: too few workers
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}] ({row.change_pct:+.1f}%)"


def _line(row: CompareRow) -> str:
    word = Verdict(str(row.verdict))
    verdict = word.markdown
    if row.detail and word not in (Verdict.SLOWER, Verdict.FASTER, Verdict.SAME):
        verdict = f"{verdict}: {row.detail}"
    cells = [row.backend, row.op, row.dtype, row.shape, row.mode, fmt_time_us(row.base_us) or "—",
             fmt_time_us(row.new_us) or "—", ratio_text(row), fmt_float(2)(row.p) or "—", verdict]
    return "| " + " | ".join(cell(str(c)) for c in cells) + " |"


def render(rows: Sequence[CompareRow], run: CompareRun, summary: str, gate: str) -> str:
    """The comment: what was compared (the compare's run record), the verdict line, the cases that changed, then
    every case folded."""
    changed = [r for r in rows if Verdict(str(r.verdict)).changed]
    other = [r for r in rows if r not in changed]
    out = ["## lnbench compare", "",
           f"**{summary}**" + (f" — {gate}" if gate else ""), "",
           f"- base: `{run.base}` ({run.base_device}, commit {run.base_commit or '?'}, {run.base_timestamp})",
           f"- new: `{run.new}` ({run.new_device}, commit {run.new_commit or '?'}, {run.new_timestamp})",
           f"- ratio = new/base of the median of worker medians; {run.confidence:.0%} paired t interval over "
           f"the worker medians (worker w of new against worker w of base) with a "
           f"{run.run_noise_pct or 0:g}% run noise floor"
           f"{' (or the session shift the other backends show, when larger)' if run.peer_controls else ''}; "
           f"p = that test's; SAME when the "
           f"interval contains 1 or |change| < {run.threshold_pct:g}%; too few runs with fewer than 2 "
           f"paired workers", ""]
    if run.forced:
        out += [f"⚠️ compared with `--force` although {run.forced}", ""]
    if changed:
        out += ["### Changed", "", HEADER, *(_line(r) for r in changed), ""]
    if other:
        out += [f"<details><summary>{len(other)} other case(s)</summary>", "", HEADER, *(_line(r) for r in other), "",
                "</details>", ""]
    return "\n".join(out)


