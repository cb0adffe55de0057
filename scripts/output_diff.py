"""Before/after proof for a refactor of the result model (issue 30, item 5): the outputs of a fixed set of runs.

    python scripts/output_diff.py run OUTDIR             # run the fixed set, writing CSV, JSON, Markdown, stdout
    python scripts/output_diff.py diff BEFORE AFTER      # exit 0 when the two folders agree after normalization
    python scripts/output_diff.py load BEFORE            # every result file still loads with this lnbench

`run` runs every command that writes results (verify on the emulated device, its self-test, perf on the CPU,
abi-compare static and on the null device, inspect --execute, compare of fixed inputs, merge of shards) from
OUTDIR, with relative paths and fixed seeds, and records each command's exit status in OUTDIR/manifest.json.

`diff` compares file by file. What a run measures (times and everything derived from them: GB/s, speed-ups,
verdicts between two timed sides, calls per run, worker flags) and where and when it ran (timestamp, git
commit, machine load, wall time, pids) are dropped before comparing; everything else must be equal: columns,
their order and types, row count, every remaining cell, metadata keys and values, the JSON's other entries,
and the Markdown and printed text (of timed commands with numbers masked). Two runs of the same code diff clean.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

FIXTURES = Path(__file__).with_name("output_diff_fixtures")
MANIFEST = "manifest.json"
INPUTS = "inputs"            # the fixed compare inputs, copied into OUTDIR
console = Console(width=200)


@dataclass(frozen=True)
class Step:
    """One lnbench command of the set: it writes NAME.csv, NAME.json (and NAME.md), its standard output and error to
    NAME.out and NAME.err."""

    name: str
    args: tuple[str, ...]
    md: bool = True          # the command takes --md
    timed: bool = False      # its text output holds measured times (masked in the diff)


_VERIFY = ("verify", "--backend", "torch,flydsl", "--device", "emu", "--shapes", "8x64,5x300", "--seed", "1",
           "--jobs", "2")
_TIMING = ("-P", "2", "-R", "3", "--warmup-s", "0.01", "--target-run-s", "0.005", "--seed", "1")
_PERF = ("perf", "--device", "cpu", "--backend", "torch", "--op", "fwd,bwd", "--mode", "hot", "--dtype", "f32",
         "--shapes", "8x64", *_TIMING, "--peak-file", "no-peak.json")     # no peak: % peak stays empty
_ONE_KERNEL = ("--arch", "gfx942", "--dtype", "bf16", "--shapes", "8x64")

STEPS: tuple[Step, ...] = (
    Step("verify", (*_VERIFY, "--dtype", "bf16,f32")),
    Step("verify-shard1", (*_VERIFY, "--dtype", "bf16", "--shard", "1/2")),
    Step("verify-shard2", (*_VERIFY, "--dtype", "bf16", "--shard", "2/2")),
    Step("selftest", ("verify", "--self-test", "--dtype", "bf16", "--shapes", "8x64", "--seed", "1")),
    Step("perf", _PERF, timed=True),
    Step("perf-shard1", (*_PERF, "--shard", "1/2"), timed=True),
    Step("perf-shard2", (*_PERF, "--shard", "2/2"), timed=True),
    Step("abi-static", ("abi-compare", "--static-only", *_ONE_KERNEL)),
    Step("abi-null", ("abi-compare", "--device", "null", "--op", "fwd", *_ONE_KERNEL, *_TIMING, "--no-execute"),
         timed=True),
    Step("inspect", ("inspect", *_ONE_KERNEL, "--execute")),
    Step("compare-perf", ("compare", f"{INPUTS}/perf-base.json", f"{INPUTS}/perf-new.json", "--fail-if-slower", "5")),
    Step("compare-abi", ("compare", f"{INPUTS}/abi-base.json", f"{INPUTS}/abi-new.json")),
    Step("merge-verify", ("merge", "verify-shard1.json", "verify-shard2.json"), md=False),
    Step("merge-perf", ("merge", "perf-shard1.json", "perf-shard2.json"), md=False, timed=True),
)

# ------------------------------------------------------------------------------------------------ normalization

#: run metadata (also CSV columns, and keys anywhere in the JSON) that say when, where and from which commit a run
#: ran, how loaded the machine was and how long it took: they differ on every run
VOLATILE_KEYS = frozenset({
    "timestamp", "git_commit", "wall_s", "load_before", "load_after", "load_flag", "other_timing_runs",
    "pid", "hostname", "duration_s", "startup_s", "stream_s", "kernel_s", "lock_wait_s",
    "estimate_s", "estimate_range", "actual_s"})     # the estimate (this machine's history, its load) and the time
_KERNEL_TIMER = ("kernel_us", "kernel_min_us", "kernel_max_us", "kernels_per_call", "gap_us")
#: row columns measured by a timing run, or derived from what it measured, per result kind
TIMED_COLUMNS: dict[str, frozenset[str]] = {
    "perf": frozenset({
        "run_us", "median_us", "min_us", "max_us", "spread_pct", "gbps", "pct_peak", "above_peak", "speedup",
        "iters", "iters_range", "warmup_calls", "warmup_s", "worker_flag", "note", "host_fraction",
        "kernel_run_us", "kernel_window_us", "kernel_untraced_window_us", *_KERNEL_TIMER}),
    "abi-compare": frozenset({
        *(f"{side}_{what}" for side in ("tensor", "pointer")
          for what in ("us", "min_us", "max_us", "calls_per_s", *_KERNEL_TIMER)),
        "speedup", "ci_low", "ci_high", "mw_p", "verdict", "slowdown_pct", "iters", "spin_short", "worker_flag",
        "kernel_speedup", "kernel_ci_low", "kernel_ci_high", "kernel_verdict"}),
}
#: JSON entries outside the rows that hold a worker's measurements (abi-compare's workers[].cases[].metrics)
TIMED_ENTRIES = frozenset({"metrics"})

#: progress lines (standard error) say in which order cases finished and how long they took; the estimate line, how
#: long this machine's earlier runs took (lnbench.run.calibration)
_PROGRESS = re.compile(r"^(\[\d+(/\d+ +\d+%)?\] |estimated time: ).*\n?", re.M)
#: in a timed command's text: load warnings, worker flags (and the note column shown when one is there), and a
#: kernel pass shown only when it rounds above 0 s
_TIMED_DROPS = (re.compile(r"^.*busy machine.*\n?", re.M),
                re.compile(r"(Tensor: |Pointer: )?worker \d+ noisy: run spread [^|│\n]*"), re.compile(r"\bnote\b"),
                re.compile(r", kernel pass [\d.]+ s"))
_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?(e[-+]?\d+)?%?( ?(ns|µs|us|ms|s)\b)?×?")
_VERDICT_WORDS = re.compile(r"\b(same|faster|slower|SAME|FASTER|SLOWER|too few runs)\b")
_TABLE_RULES = re.compile(r"[│┃┏┓┗┛┡┩└┘┳┻┴┬├┤╇╈┼─━|]+|:?---+:?")


def normalize_text(text: str, outdir: Path, timed: bool) -> list[str]:
    """The lines of a Markdown or printed output without progress lines, the run's folder named <OUT>.

    A timed command's output becomes a list of words instead: numbers and verdicts masked, load warnings and
    worker flags dropped, table rules removed; rich pads and wraps by the widest value, which the times set."""
    text = _PROGRESS.sub("", text.replace(str(outdir.resolve()), "<OUT>"))
    if not timed:
        return text.splitlines()
    for drop in _TIMED_DROPS:
        text = drop.sub("", text)
    return _TABLE_RULES.sub(" ", _VERDICT_WORDS.sub("<verdict>", _NUMBER.sub("#", text))).split()


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, leaf value) of a JSON value, leaving out volatile keys and measurement entries."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in VOLATILE_KEYS and key not in TIMED_ENTRIES:
                yield from flatten(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value and all(isinstance(v, (dict, list)) for v in value):
        for i, item in enumerate(value):
            yield from flatten(item, f"{path}[{i}]")
    else:
        yield path, value


def volatile_columns(kind: str) -> frozenset[str]:
    return VOLATILE_KEYS | TIMED_COLUMNS.get(kind, frozenset())


# ------------------------------------------------------------------------------------------------ run


def _env(outdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LNBENCH_CONFIG", "LNBENCH_KERNEL_SRC", "LNBENCH_DEBUG", "GITHUB_STEP_SUMMARY")}
    env.update(LNBENCH_RESULTS_DIR=str(outdir / "results-default"), COLUMNS="1000", NO_COLOR="1",
               LNBENCH_CALIBRATION="off")       # no calibration file: the runs' outputs, not this machine's history
    return env


def run_step(step: Step, outdir: Path) -> dict[str, Any]:
    """Run one command from OUTDIR; its exit status and seconds."""
    outputs = ["--csv", f"{step.name}.csv", "--json", f"{step.name}.json"]
    outputs += ["--md", f"{step.name}.md"] if step.md else []
    argv = [sys.executable, "-m", "lnbench.cli", *step.args, *outputs]
    start = time.monotonic()
    with open(outdir / f"{step.name}.out", "w") as out, open(outdir / f"{step.name}.err", "w") as err:
        rc = subprocess.run(argv, cwd=outdir, env=_env(outdir), stdout=out, stderr=err).returncode
    return {"name": step.name, "args": [*step.args, *outputs], "exit_code": rc,
            "seconds": round(time.monotonic() - start, 1)}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Prove a refactor leaves lnbench's outputs as they were: run a fixed set, diff two sets, load old files."""


@cli.command()
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
def run(outdir: Path) -> None:
    """Run the fixed set of commands into OUTDIR (which must be empty or new)."""
    if outdir.exists() and any(outdir.iterdir()):
        raise click.UsageError(f"{outdir} is not empty")
    shutil.copytree(FIXTURES, outdir / INPUTS)
    done, start = [], time.monotonic()
    for step in STEPS:
        done.append(run_step(step, outdir))
        console.print(f"{step.name:15} exit {done[-1]['exit_code']}  {done[-1]['seconds']:6.1f} s")
    total = round(time.monotonic() - start, 1)
    (outdir / MANIFEST).write_text(json.dumps({"steps": done, "seconds": total}, indent=1) + "\n")
    console.print(f"{len(done)} commands in {total} s; outputs in {outdir}")


# ------------------------------------------------------------------------------------------------ diff


def _kind(path: Path) -> str:
    """The result kind a file's `schema` names (perf/1.0 -> perf); "" where none."""
    if path.suffix == ".json":
        return str(json.loads(path.read_text()).get("metadata", {}).get("schema", "")).split("/")[0]
    schema = pd.read_csv(path, usecols=lambda c: c == "schema", dtype=str)
    return str(schema["schema"].iloc[0]).split("/")[0] if "schema" in schema and len(schema) else ""


def _columns_report(before: list[str], after: list[str]) -> list[str]:
    lines = []
    added, removed = [c for c in after if c not in before], [c for c in before if c not in after]
    if added:
        lines.append(f"columns added: {', '.join(added)}")
    if removed:
        lines.append(f"columns removed: {', '.join(removed)}")
    common_b, common_a = [c for c in before if c in after], [c for c in after if c in before]
    if common_b != common_a:
        moved = [c for c, d in zip(common_b, common_a) if c != d]
        lines.append(f"columns reordered (first moved: {', '.join(moved[:5])})")
    return lines


def _rows_report(before: pd.DataFrame, after: pd.DataFrame, skip: frozenset[str], show: int = 4) -> list[str]:
    """Row count, and the rows whose compared cells differ (by position; a few shown, cell by cell)."""
    lines = []
    if len(before) != len(after):
        lines.append(f"row count {len(before)} -> {len(after)}")
    columns = [c for c in before.columns if c in after.columns and c not in skip]
    b, a = before[columns].head(len(after)), after[columns].head(len(before))
    differs = [i for i in range(len(b)) if list(b.iloc[i]) != list(a.iloc[i])]
    if differs:
        lines.append(f"{len(differs)} of {len(b)} rows differ")
    for i in differs[:show]:
        cells = [f"{c}: {b.iloc[i][c]!r} -> {a.iloc[i][c]!r}" for c in columns if b.iloc[i][c] != a.iloc[i][c]]
        lines.append(f"  row {i}: " + "; ".join(cells[:4]) + (f" (+{len(cells) - 4} more)" if len(cells) > 4 else ""))
    return lines


def _mapping_report(what: str, before: dict[str, Any], after: dict[str, Any], show: int = 6) -> list[str]:
    lines = []
    added, removed = [k for k in after if k not in before], [k for k in before if k not in after]
    changed = [k for k in before if k in after and before[k] != after[k]]
    if added:
        lines.append(f"{what} added: {', '.join(added[:show])}" + (" ..." if len(added) > show else ""))
    if removed:
        lines.append(f"{what} removed: {', '.join(removed[:show])}" + (" ..." if len(removed) > show else ""))
    for key in changed[:show]:
        lines.append(f"{what} {key}: {before[key]!r} -> {after[key]!r}")
    if len(changed) > show:
        lines.append(f"... and {len(changed) - show} more {what} changed")
    return lines


def diff_csv(before: Path, after: Path) -> list[str]:
    """Columns, their inferred dtypes, row count and cells (compared as the text written) of two CSVs."""
    raw_b, raw_a = (pd.read_csv(p, dtype=str, keep_default_na=False).map(_number_text) for p in (before, after))
    skip = volatile_columns(_kind(before))
    lines = _columns_report(*([c for c in raw.columns if c not in VOLATILE_KEYS] for raw in (raw_b, raw_a)))
    typed_b, typed_a = pd.read_csv(before), pd.read_csv(after)
    for column in typed_b.columns:
        if column in typed_a.columns and column not in skip and typed_b[column].dtype != typed_a[column].dtype:
            lines.append(f"dtype of {column}: {typed_b[column].dtype} -> {typed_a[column].dtype}")
    return lines + _rows_report(raw_b, raw_a, skip)


#: two numbers are compared at DECIMALS decimal places and DIGITS significant digits: a JSON written before issue 41
#: kept 15 decimal places (pandas' writer: 9.313226e-09 for 9.313225760032573e-09), one written after keeps every
#: digit, and what compare and merge compute from such files moves in the 16th digit
DECIMALS, DIGITS = 15, 12


def _number(value: float) -> str:
    return f"{round(value, DECIMALS):.{DIGITS}g}"


def _number_text(cell: Any) -> Any:
    """A CSV cell (text) that is a fractional number, as _number writes it; anything else as it is."""
    if isinstance(cell, str) and any(c in cell for c in ".e") and not cell.isalpha():
        try:
            return _number(float(cell))
        except ValueError:
            return cell
    return cell


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(_number(value))
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _cells(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows with every cell as its JSON text (numbers as _number writes them), so that 1 and 1.0, or a list
    and its string, stay apart."""
    return pd.DataFrame([{k: json.dumps(_rounded(v), sort_keys=True) for k, v in row.items()}
                         for row in rows]).fillna("<absent>")


def diff_json(before: Path, after: Path) -> list[str]:
    """Table Schema fields (names, order, types), rows, metadata and the other top-level entries of two JSONs."""
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    skip = volatile_columns(_kind(before))
    lines = _mapping_report("top-level entry", {k: 1 for k in b}, {k: 1 for k in a})
    fields_b = {f["name"]: f for f in b.get("schema", {}).get("fields", [])}
    fields_a = {f["name"]: f for f in a.get("schema", {}).get("fields", [])}
    lines += _columns_report(list(fields_b), list(fields_a))
    for name, field in fields_b.items():
        if name in fields_a and field != fields_a[name]:
            lines.append(f"type of {name}: {field} -> {fields_a[name]}")
    lines += _mapping_report("schema entry", *({k: v for k, v in s.get("schema", {}).items() if k != "fields"}
                                                 for s in (b, a)))
    rows_key = "data" if "data" in b else "rows"
    lines += _rows_report(_cells(b.get(rows_key, [])), _cells(a.get(rows_key, [])), skip)
    lines += _mapping_report("metadata", dict(flatten(b.get("metadata", {}))), dict(flatten(a.get("metadata", {}))))
    rest = [k for k in b if k in a and k not in ("metadata", "schema", rows_key)]
    lines += _mapping_report("entry", dict(flatten({k: b[k] for k in rest})), dict(flatten({k: a[k] for k in rest})))
    return lines


def diff_text(before: Path, after: Path, timed: bool, show: int = 8) -> list[str]:
    """Lines (a timed command's: words) added or removed, a few shown."""
    lines_b = normalize_text(before.read_text(), before.parent, timed)
    lines_a = normalize_text(after.read_text(), after.parent, timed)
    delta = [line for line in difflib.unified_diff(lines_b, lines_a, lineterm="", n=0)
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    what = "word" if timed else "line"
    return [f"{len(delta)} text {what}(s) differ", *(f"  {line[:180]}" for line in delta[:show])] if delta else []


def _step_of(name: str) -> Step | None:
    return next((s for s in STEPS if s.name == name), None)


def diff_file(before: Path, after: Path) -> list[str]:
    """The differences of one pair of files (a file that does not parse is one)."""
    try:
        if before.suffix == ".csv":
            return diff_csv(before, after)
        if before.suffix == ".json":
            return diff_json(before, after)
    except (ValueError, KeyError, TypeError, AttributeError, pd.errors.ParserError) as exc:
        return [f"unreadable: {type(exc).__name__}: {exc}"]
    step = _step_of(before.stem)
    return diff_text(before, after, timed=bool(step and step.timed))


def _files(folder: Path) -> list[str]:
    """The outputs to compare: every file of the run but the copied inputs and the manifest."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.name != MANIFEST and p.relative_to(folder).parts[0] != INPUTS)


@cli.command()
@click.argument("before", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("after", type=click.Path(exists=True, file_okay=False, path_type=Path))
def diff(before: Path, after: Path) -> None:
    """Compare two OUTDIRs of `run`; exit 0 when they agree after normalization, 1 otherwise."""
    for folder in (before, after):
        if not (folder / MANIFEST).is_file():
            raise click.UsageError(f"{folder} holds no {MANIFEST}: not a folder `run` wrote")
    names_b, names_a = _files(before), _files(after)
    report: list[tuple[str, list[str]]] = []
    steps_b, steps_a = ({s["name"]: s["exit_code"] for s in json.loads((d / MANIFEST).read_text())["steps"]}
                        for d in (before, after))
    report.append((MANIFEST, [f"exit status of {k}: {steps_b.get(k)} -> {steps_a.get(k)}"
                              for k in dict.fromkeys([*steps_b, *steps_a]) if steps_b.get(k) != steps_a.get(k)]))
    for name in dict.fromkeys([*names_b, *names_a]):
        if name not in names_a or name not in names_b:
            report.append((name, ["only in " + ("BEFORE" if name in names_b else "AFTER")]))
        else:
            report.append((name, diff_file(before / name, after / name)))
    console.print(f"output diff: {before} (BEFORE) -> {after} (AFTER)", highlight=False)
    table = Table("file", "result")
    for name, lines in report:
        table.add_row(name, "same" if not lines else f"[red]{len(lines)} difference line(s)[/red]")
    console.print(table)
    for name, lines in report:
        if lines:
            console.print(f"[bold]{name}[/bold]", highlight=False)
            for line in lines:
                console.print(f"  {line}", markup=False, highlight=False)
    differ = sum(bool(lines) for _, lines in report)
    console.print(f"{len(report)} files compared: {differ} differ" + ("" if differ else " (clean)"))
    sys.exit(1 if differ else 0)


# ------------------------------------------------------------------------------------------------ load


@cli.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
def load(folder: Path) -> None:
    """Read every CSV and JSON result of FOLDER with this lnbench's reader; exit 1 when one fails."""
    from lnbench.results import load_result     # the reader under test: imported where it is used

    table, failed = Table("file", "kind", "schema version", "rows", "error"), 0
    paths = sorted(p for p in folder.rglob("*") if p.suffix in (".csv", ".json") and p.name != MANIFEST)
    for path in paths:
        try:
            result = load_result(path)
            table.add_row(str(path.relative_to(folder)), result.kind, result.version, str(len(result.rows)), "ok")
        except Exception as exc:      # a usage error or any other failure to read an old file is the finding
            failed += 1
            table.add_row(str(path.relative_to(folder)), "", "", "", f"[red]{type(exc).__name__}: {exc}[/red]")
    console.print(table)
    console.print(f"{len(paths)} files read: {failed} failed")
    sys.exit(1 if failed or not paths else 0)


if __name__ == "__main__":
    cli()
