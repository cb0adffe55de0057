"""A planted slowdown for proving the gate: one case of a real perf JSON made FACTOR× slower.

Every run value of that case's worker rows and its aggregate times (stream and kernel) are multiplied by FACTOR
(GB/s divided), and the metadata says so (`planted_slowdown`). `lnbench compare` must then call that case SLOWER.

    python -m lnbench.compare.planted perf.json planted.json --factor 1.10 [--case "torch bwd bf16 4096x4096 cold"]
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import click

from lnbench import validate
from lnbench.cli_common import console, guarded
from lnbench.compare.cases import KEY_FIELDS, CaseKey, key_text
from lnbench.results import PERF as PERF_RECORD, PERF_KIND as PERF, PerfRow, load_result, numbers_of, rows_of
from lnbench.errors import LnbenchUsageError
from lnbench.output.files import write_json

_TIMES = ("median_us", "min_us", "max_us", "kernel_us", "kernel_min_us", "kernel_max_us")
_RATES = ("gbps", "pct_peak")


def _key(row: PerfRow) -> CaseKey:
    return tuple(str(row.value(k)) for k in KEY_FIELDS)  # type: ignore[return-value]


def plant_slowdown(payload: dict[str, Any], factor: float, case: CaseKey | None = None) -> tuple[dict[str, Any], CaseKey]:
    """A copy of a perf JSON payload with one case (default: the first one with an ok aggregate) slowed down."""
    if not 0 < factor <= 1000:  # also refuses nan and inf
        raise LnbenchUsageError(f"factor must be a number in (0, 1000], got {factor}")
    out = copy.deepcopy(payload)
    rows = [PerfRow.of(r) for r in rows_of(out)]
    if case is None:
        case = next((_key(r) for r in rows if r.row_kind == "aggregate" and r.status == "ok"), None)
        if case is None:
            raise LnbenchUsageError("no timed case to plant a slowdown in")
    hit = [r for r in rows if _key(r) == case and r.status == "ok"]
    if not any(r.row_kind == "aggregate" for r in hit):
        raise LnbenchUsageError(f"case {key_text(case)} is not a timed case of this result")
    for row in hit:
        row.run_us = [round(v * factor, 4) for v in numbers_of(row.run_us)]
        if isinstance(row.kernel_run_us, list):          # perf --timer kernel: compare's time
            row.kernel_run_us = [round(float(v) * factor, 4) for v in row.kernel_run_us]
        for name in _TIMES:
            if isinstance(value := row.value(name), (int, float)):
                setattr(row, name, value * factor)
        for name in _RATES:
            if isinstance(value := row.value(name), (int, float)):
                setattr(row, name, value / factor)
    out["data" if "schema" in out else "rows"] = [r.cells() for r in rows]
    run, undeclared = PERF_RECORD.run_record.read(out["metadata"])
    run.planted_slowdown = f"{key_text(case)} x{factor:g}"
    out["metadata"] = {**run.cells(), **undeclared}
    return out, case


def _perf_payload(source: Path) -> dict[str, Any]:
    """The JSON payload of a perf result, read, parsed and validated once (load_result)."""
    what = "the JSON of lnbench perf"
    result = load_result(source, (PERF,), what=what)
    if result.payload is None:                  # a perf CSV: right command, but no JSON to rewrite
        raise LnbenchUsageError(f"{source} is a CSV; this needs {what}")
    return result.payload


@click.command()
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--factor", type=validate.FLOAT, default=1.10, show_default=True, help="Time multiplier of the planted case.")
@click.option("--case", "case_text", help="Case to slow: 'backend op dtype shape mode' (default: the first timed one).")
@guarded
def main(source: Path, target: Path, factor: float, case_text: str | None) -> int:
    """Write TARGET: the perf JSON SOURCE with one case made FACTOR× slower."""
    validate.distinct_outputs({"TARGET": target}, {"SOURCE": source})   # never over the perf JSON it reads
    payload = _perf_payload(source)
    case = tuple(case_text.split()) if case_text else None
    if case is not None and len(case) != len(KEY_FIELDS):
        raise LnbenchUsageError(f"--case needs {len(KEY_FIELDS)} words ({' '.join(KEY_FIELDS)}), got {case_text!r}")
    planted, key = plant_slowdown(payload, factor, case)  # type: ignore[arg-type]
    write_json(planted, target)
    console.print(f"planted {factor:g}x on {key_text(key)} -> {target}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
