"""Readable tables: times with units and 3–4 significant digits, no exponents, verify's bar column, worker flags."""
from __future__ import annotations

import math
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from lnbench.abi import tables as abi_tables
from lnbench.abi.aggregate import aggregate
from lnbench.abi.messages import AbiWorkerPayload
from lnbench.compare.tables import TABLE_COLUMNS as COMPARE_COLUMNS
from lnbench.compare.markdown import _line as markdown_line
from lnbench.measure.stats import worker_flags
from lnbench.perf.aggregate import build_rows
from lnbench.perf.cases import PerfCase
from lnbench.perf.tables import _CELLS, NOTE_COLUMN, TABLE_COLUMNS
from lnbench.run.workers import WorkerResult
from lnbench.results import CompareRow, VerifyRow
from lnbench.output.tables import fmt_number, fmt_time_range_us, fmt_time_us, render_table
from lnbench.verify.command import verify_command
from lnbench.verify.tables import bar_used

EXPONENT = re.compile(r"\d[eE][+-]?\d")


def _rendered(columns, rows) -> str:
    console = Console(record=True, width=400, highlight=False)
    render_table(console, "t", columns, rows)
    return console.export_text()


@pytest.mark.parametrize("us, text", [
    (32.0123, "32.01 µs"), (149.24, "149.2 µs"), (1149.3, "1.149 ms"), (11490.0, "11.49 ms"), (14400.0, "14.4 ms"),
    (1.2e6, "1.2 s"), (0.532, "532 ns"), (999.96, "1 ms"), (-3.21, "-3.21 µs"), (0.0, "0 µs"),
    (None, ""), (math.nan, ""), (math.inf, ""),
])
def test_time_has_unit_and_four_significant_digits(us, text):
    assert fmt_time_us(us) == text


def test_no_exponent_anywhere_in_times_or_numbers():
    for power in range(-4, 11):
        for mantissa in (1.0, 1.149, 9.999):
            value = mantissa * 10 ** power
            for text in (fmt_time_us(value), fmt_number(4)(value), fmt_number(3, "×")(value)):
                assert not EXPONENT.search(text), text
    assert fmt_number(4)(12345.6) == "12,346" and fmt_number(3, "×")(1.0234) == "1.02×"


def test_time_range_uses_the_unit_of_the_larger():
    assert fmt_time_range_us(1149.0, 1201.0) == "1.149–1.201 ms"
    assert fmt_time_range_us(998.1, 1002.4) == "0.9981–1.002 ms"
    assert fmt_time_range_us(None, 3.0) == ""


# --- perf ------------------------------------------------------------------------------------------------

def _entry(case_id: int, runs: list[float]) -> dict:
    return {"id": case_id, "status": "ok", "detail": "", "nbytes": 10**9, "sets": 1, "working_set_bytes": 10**9,
            "llc_bytes": 1 << 20, "note": "", "measurement": {"iters_per_run": 200, "run_us": runs,
                                                              "warmup_calls": 40, "warmup_s": 0.2, "timer": "wall"}}


def _perf_rows(runs_per_worker: list[list[float]]) -> list[dict]:
    case = PerfCase(0, "torch", "bwd", "bf16", 4096, 4096, "cold", 1e-5, 0)
    results = [WorkerResult(i, True, 0, False, {"cases": [_entry(0, runs)]}, "", 1.0)
               for i, runs in enumerate(runs_per_worker)]
    return build_rows([case], [[case]] * len(results), results, peak_gbps=None, baseline="torch")


def test_perf_table_prints_times_in_ms_never_exponents():
    rows = _perf_rows([[11490.0, 11500.0, 11480.0], [11600.0, 11610.0, 11590.0], [11400.0, 11410.0, 11390.0]])
    shown = [{**c, **{key: cell(c) for key, cell in _CELLS.items()}}
             for c in (r.cells() for r in rows if r.row_kind == "aggregate")]
    text = _rendered(TABLE_COLUMNS, shown)
    assert "11.49 ms" in text and "11.4–11.6 ms" in text and "87.03" in text   # GB/s = 1e9 B / 11.49 ms
    assert "1×" in text and not EXPONENT.search(text)
    assert rows[-1].median_us == 11490.0                                         # the CSV keeps raw µs


def test_a_noisy_worker_is_flagged_in_its_row_and_the_aggregate():
    rows = _perf_rows([[100.0, 101.0, 100.5], [100.0, 160.0, 70.0], [100.2, 100.4, 100.1]])
    workers = {r.worker: r for r in rows if r.row_kind == "worker"}
    assert workers[1].worker_flag.startswith("worker 1 noisy: run spread 90%")
    assert workers[0].worker_flag == workers[2].worker_flag == ""
    aggregate_row = rows[-1]
    assert aggregate_row.worker_flag == workers[1].worker_flag and aggregate_row.status == "ok"
    aggregate_cells = aggregate_row.cells()
    shown = [{**aggregate_cells, **{key: cell(aggregate_cells) for key, cell in _CELLS.items()}}]
    assert "worker 1 noisy" in _rendered(TABLE_COLUMNS + [NOTE_COLUMN], shown)


def test_a_worker_off_the_others_is_flagged_and_ordinary_noise_is_not():
    flags = worker_flags([[100.0, 100.5, 100.2], [112.0, 112.4, 112.1], [100.1, 100.3, 100.0]])
    assert list(flags) == [1] and "off: median +11.9%" in flags[1]
    assert worker_flags([[100.0, 102.0, 101.0], [101.0, 103.0, 102.0], [100.0, 101.5, 100.5]]) == {}
    assert worker_flags([[100.0, 200.0]]) == {}                                   # one worker: nothing to compare
    # two workers: only the spread rule (the median of two sits between them)
    assert list(worker_flags([[100.0, 101.0], [100.0, 150.0]])) == [1]
    assert worker_flags([[100.0, 100.5], [120.0, 120.5]]) == {}


# --- abi-compare -----------------------------------------------------------------------------------------

def test_abi_compare_table_times_and_worker_flag(monkeypatch):
    def payload(worker: int, tensor: list[float]) -> dict:
        metrics = {"direct": {"iters": 150, "tensor": tensor, "pointer": [8000.0, 8010.0, 8005.0], "spin_short": 0}}
        return {"worker": worker, "checks": [], "cases": {
            "bwd/bf16/1024x8192": {"op": "bwd", "dtype": "bf16", "shape": [1024, 8192], "metrics": metrics}}}
    payloads = [payload(0, [8343.2, 8350.0, 8345.0]), payload(1, [8340.0, 14000.0, 8342.0]),
                payload(2, [8344.0, 8346.0, 8341.0])]
    rows = aggregate("torch-entry", {"tensor": "T", "pointer": "P"}, [AbiWorkerPayload.from_wire(p) for p in payloads],
                     ["direct"], n_boot=200)
    assert rows[0].worker_flag.startswith("Tensor: worker 1 noisy")
    console = Console(record=True, width=400, highlight=False)
    monkeypatch.setattr(abi_tables, "console", console)
    abi_tables.render_runtime(rows, "t")
    text = console.export_text()
    assert "8.344 ms [8.342–8.345]" in text and "Tensor: worker 1 noisy" in text
    assert not EXPONENT.search(text)


# --- compare ---------------------------------------------------------------------------------------------

def test_compare_table_and_markdown_print_times_with_units():
    row = {"backend": "torch", "op": "fwd", "dtype": "bf16", "shape": "4096x4096", "mode": "cold",
           "base_us": 11490.0, "new_us": 32.0123, "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01, "change_pct": 0.0,
           "mw_p": 0.5, "verdict": "SAME", "detail": "", "_ratio": "", "_verdict": "SAME"}
    text = _rendered(COMPARE_COLUMNS, [row])
    assert "11.49 ms" in text and "32.01 µs" in text and not EXPONENT.search(text)
    record = CompareRow(**{k: v for k, v in row.items() if CompareRow.declares(k)})      # the Markdown reads records
    assert "| 11.49 ms | 32.01 µs |" in markdown_line(record)


# --- verify ----------------------------------------------------------------------------------------------

def test_bar_used_is_err_over_allowed():
    assert bar_used(VerifyRow().set(max_abs_err=0.5, allowed=2.0)) == 0.25
    assert bar_used(VerifyRow().set(max_abs_err=None, allowed=None)) is None
    assert bar_used(VerifyRow()) is None                                       # unset fields read None
    assert bar_used(VerifyRow().set(max_abs_err=0.0, allowed=0.0)) == 0.0          # a zero bar, met exactly (tests/test_verify_edges.py)


def test_verify_table_shows_err_over_allowed_and_csv_keeps_rel_err(tmp_path, results_dir, monkeypatch):
    from lnbench.verify import command
    monkeypatch.setattr(command.console, "width", 300)   # one line per row, whatever COLUMNS says
    csv = tmp_path / "v.csv"
    result = CliRunner().invoke(verify_command, ["--device", "cpu", "--backend", "torch", "--dtype", "bf16",
                                                 "--shapes", "3x257", "--csv", str(csv)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "err/allowed" in result.output and "max rel err" not in result.output
    assert not re.search(r"\d[eE]\+\d", result.output)          # the 1e+24 relative errors are gone
    import pandas as pd
    frame = pd.read_csv(csv)
    assert "max_rel_err" in frame.columns and frame["max_rel_err"].max() > 1e6   # near-zero references


def test_verify_help_explains_margin():
    text = CliRunner().invoke(verify_command, ["--help"]).output
    assert "margin" in text and "allowed − max abs err" in text and "err/allowed" in text


def test_csv_keeps_integer_columns_with_gaps_integer(tmp_path):
    """A column of integers with gaps (perf's worker `order`, empty in aggregate rows) is written 0, 6, not 0.0."""
    from lnbench.output.files import csv_writer
    out = tmp_path / "o.csv"
    csv_writer([{"order": 0, "x": 1.5}, {"order": None, "x": 2.0}, {"order": 6, "x": 3.0}])(out)
    assert out.read_text().splitlines() == ["order,x", "0,1.5", ",2.0", "6,3.0"]


@pytest.mark.parametrize("width", [20, 40, 60, 79])
def test_a_narrow_console_folds_a_wide_table_and_loses_no_value(width):
    """rich gives columns it cannot fit no width at all, and their values vanish (at 40 columns a 15-column
    table was an empty grid); every character of every header and cell must still be printed."""
    from collections import Counter

    from lnbench.output.tables import Column

    headers = ["arch", "ABI", "op", "kernel", "dtype", "N", "kernarg B", "args", "host slots", "VGPR", "SGPR",
               "spills v/s", "LDS B", "instrs", "status"]
    columns = [Column(f"c{i}", header) for i, header in enumerate(headers)]
    row = dict(zip((c.key for c in columns), ["gfx942", "pointer", "fwd", "ln_fwd_bf16_n4096_pointer", "bf16", "4096",
                                               "52", "7", "8", "47", "28", "0/0", "64", "380", "ok"]))
    console = Console(record=True, width=width, highlight=False)
    render_table(console, "t", columns, [row])
    shown = Counter(ch for ch in console.export_text() if ch.isalnum() or ch in "_/")
    wanted = Counter(ch for text in [*headers, *row.values()] for ch in text if ch.isalnum() or ch in "_/")
    assert not wanted - shown, f"lost at width {width}: {wanted - shown}"
    assert console.width == width          # the console's own width is back for what prints next
