"""`lnbench merge FILES... --csv/--json OUT`: the result files of one command's parts (`--shard K/N` on several
machines, a CI matrix) joined into one result, as if one run had made it.

Refused (one line, exit 2) unless --force: files of different commands (never allowed), of different formats
(CSV and JSON: their list cells differ), of different lnbench versions, devices or protocols, incomplete
files, or files that hold the same case twice. The merged metadata keeps what every part agrees on; what
differs between them (timestamps, wall time, clocks, the shard) is listed per part in `parts`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click
from rich.markup import escape

from lnbench.cli_common import EXIT_OK, console, emit_outputs, err_console, guarded, output_options
from lnbench.errors import LnbenchUsageError

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.results import IdentifiedRun, Record, ResultFile


def case_columns(kind: str) -> tuple[str, ...]:
    """The columns that name one case of a result kind (a case's rows share them)."""
    from lnbench.results import ABI_KIND, PERF_KIND, PROFILE_KIND, VERIFY_KIND

    return {PERF_KIND: ("backend", "op", "dtype", "shape", "mode"),
            VERIFY_KIND: ("backend", "case", "dtype", "shape", "eps"),
            ABI_KIND: ("part", "op", "dtype", "shape", "metric", "arch", "N", "kernel"),
            PROFILE_KIND: ("backend", "op", "dtype", "shape")}[kind]


def _plain(value: Any) -> Any:
    """A cell as a comparable key part (NaN and None alike)."""
    from lnbench.results import missing

    if missing(value):
        return None
    return value.item() if hasattr(value, "item") else value


def case_keys(result: ResultFile) -> list[tuple[Any, ...]]:
    """The distinct cases of a result, in file order."""
    columns = [c for c in case_columns(result.kind) if c in result.rows.columns]
    keys = (tuple(_plain(v) for v in row) for row in result.rows[columns].itertuples(index=False, name=None))
    return list(dict.fromkeys(keys))


def problems(results: Sequence[ResultFile]) -> list[str]:
    """Why these results should not be merged (empty: they may); the command and format are checked apart."""
    from lnbench.compare.match import device_name, protocol

    first, out = results[0], []
    for other in results[1:]:
        if device_name(other) != device_name(first):
            out.append(f"{other.path} ran on {device_name(other)!r}, {first.path} on {device_name(first)!r}")
        # the protocol (compare.match.protocol) and what a case's result depends on (RunRecord.AGREE)
        a, b = protocol(first), protocol(other)
        mine, theirs = first.run.agreement(), other.run.agreement()
        for key in mine.keys() & theirs.keys():
            a[key], b[key] = mine[key], theirs[key]
        diffs = [f"{k} {a[k]} vs {b[k]}" for k in a if k in b and _plain(a[k]) != _plain(b[k])]
        if diffs:
            out.append(f"{other.path} differs from {first.path}: {', '.join(diffs)}")
    for result in results:
        if result.incomplete:
            out.append(f"{result.path} is incomplete ({result.incomplete})")
    gap = split_gap(results)
    if gap:
        out.append(f"not a whole split: {gap}")
    seen: dict[tuple[Any, ...], Path] = {}
    for result in results:
        for case in case_keys(result):
            if case in seen:
                shown = " ".join(str(k) for k in case if k is not None)
                out.append(f"case {shown} is in both {seen[case]} and {result.path}")
                break
            seen[case] = result.path
    return out


def _split(results: Sequence[ResultFile]) -> tuple[str, str]:
    """(note, gap): the summary's words on the files as parts of a `--shard K/N` split, and what keeps them from
    being one whole split ('' when every part is here, or when the files are no parts: none, or whole runs)."""
    from lnbench.results import CasesRun

    shards = [str(r.run_as(CasesRun).shard or "") for r in results]
    if not all("/" in s and s != "1/1" for s in shards):       # 1/1: a whole run, no part of a split
        return "", ""
    # a split is its N and the size of the case list it divided (parts of another list cover nothing together)
    splits = [f"{s} of {r.run_as(CasesRun).shard_total_cases or '?'} cases" for s, r in zip(shards, results)]
    if len({s.split("/")[1] for s in splits}) != 1:
        text = f"the files are parts of different splits ({', '.join(sorted(set(splits)))})"
        return text, text
    total = int(shards[0].split("/")[1])
    numbers = [int(s.split("/")[0]) for s in shards]
    repeated = sorted({k for k in numbers if numbers.count(k) > 1})
    if repeated:          # their cases are in two files: a problem of its own (problems)
        return f"part(s) {', '.join(map(str, repeated))} of {total} in more than one file", ""
    have = sorted(numbers)
    missing = [k for k in range(1, total + 1) if k not in have]
    if not missing:
        return f"all {total} parts of a --shard split", ""
    text = f"parts {', '.join(map(str, have))} of {total}: part(s) {', '.join(map(str, missing))} missing"
    return text, text


def shard_note(results: Sequence[ResultFile]) -> str:
    """Which parts of a `--shard K/N` split the files are ('' when they carry none, or are whole runs)."""
    return _split(results)[0]


def split_gap(results: Sequence[ResultFile]) -> str:
    """What the parts lack to be one whole split: missing parts, or parts of different splits. A merge of
    them is not the whole run (a CI gate would compare fewer cases than it ran), so it is refused without
    --force and marked incomplete with it."""
    return _split(results)[1]


def merged_run(results: Sequence[ResultFile]) -> IdentifiedRun:
    """The merged file's run record: the fields every part agrees on, plus the merge's own (parts, complete)."""
    from lnbench.results import KINDS

    first = results[0].run
    per_part = set(first.PER_PART)
    agreed = first.copy()
    for name in list(agreed.cells()):
        if name in per_part or not all(r.run.has(name) and _plain(r.run.value(name)) == _plain(agreed.value(name))
                                        for r in results[1:]):
            agreed.unset(name)
    why = [f"{r.path}: {r.incomplete}" for r in results if r.incomplete] + [split_gap(results)]
    merged = agreed.merged(len(results), "; ".join(w for w in why if w))
    merged.schema = KINDS[results[0].kind].schema
    return merged


def merged_rows(results: Sequence[ResultFile]) -> list[Record]:
    """Every part's rows, in the order of the files: the columns its kind declares (lnbench.results; a CSV's
    metadata columns are left to the merged metadata, what differs per part to the JSON's `parts`)."""
    import pandas as pd

    from lnbench.results import KINDS, LIST, list_from_cell, ordered_columns

    kind = KINDS[results[0].kind]
    frame = pd.concat([r.rows for r in results], ignore_index=True)
    frame = frame[ordered_columns(kind, frame.columns)]
    lists = {c.name for c in kind.columns if c.type == LIST}           # CSV parts: `;`-joined text
    return [kind.row(**{k: list_from_cell(_plain(v)) if k in lists else _plain(v) for k, v in row.items()})
            for row in frame.to_dict("records")]


def load_parts(paths: Sequence[Path]) -> list[ResultFile]:
    """Every file read; one of another command or format than the first is refused (exit 2), --force or not."""
    from lnbench.results import ABI_KIND, PERF_KIND, PROFILE_KIND, VERIFY_KIND, load_result

    results = [load_result(p, (PERF_KIND, ABI_KIND, VERIFY_KIND, PROFILE_KIND),
                           what="a perf, abi-compare or verify result") for p in paths]
    first = results[0]
    for other in results[1:]:
        if other.kind != first.kind:
            raise LnbenchUsageError(f"{first.path} is an lnbench {first.kind} result and {other.path} an lnbench "
                                    f"{other.kind} result: merge joins results of one command")
        if (other.payload is None) != (first.payload is None):
            raise LnbenchUsageError(f"{first.path} and {other.path} are a CSV and a JSON: merge files of one format "
                                    f"(the JSON of every part, or the CSV of every part)")
    return results


@click.command("merge")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Merge even when versions, devices or protocols differ, a file is "
                                            "incomplete, or a case is in two files.")
@output_options
@guarded
def merge_command(files: tuple[Path, ...], force: bool, csv_path: Path | None, json_path: Path | None,
                  quiet: bool) -> int:
    """Join the result files of one command's parts (--shard K/N) into one result, CSV and/or JSON."""
    from lnbench.perf.aggregate import add_speedups
    from lnbench.results import PerfRow, PerfRun
    from lnbench.scaffold.setup import Setup

    results = load_parts(files)
    found = problems(results)
    if found and not force:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise LnbenchUsageError(f"{found[0]}{more}: merge refused (--force merges anyway)")
    csv_final, json_final, _ = Setup("merge").reserve_outputs(
        csv_path, json_path, inputs={f"FILE {i + 1}": path for i, path in enumerate(files)})
    metadata = merged_run(results)
    parts = []
    for r in results:
        extra = {k: v for k, v in r.extra.items() if k != "workers"}      # the workers go to the top level
        own = {k: v for k, v in r.run.cells().items() if not metadata.has(k) or k in r.run.PER_PART}
        parts.append({"path": str(r.path), **own, **({"extra": extra} if extra else {})})
    # every part's worker payloads, as one run's: abi-compare's hold the run values `compare` pairs by worker
    workers = [w for r in results if isinstance(r.extra.get("workers"), list) for w in r.extra["workers"]]
    rows = merged_rows(results)
    if isinstance(metadata, PerfRun) and metadata.baseline:
        add_speedups([row for row in rows if isinstance(row, PerfRow)], str(metadata.baseline))         # a part lacks the speed-ups whose baseline another ran
    emit_outputs(rows, metadata, csv_final, json_final, {"parts": parts, **({"workers": workers} if workers else {})},
                 announce=not quiet, step_summary=False)
    for line in found:
        err_console.print(f"[yellow]merged with --force: {escape(line)}[/yellow]", soft_wrap=True)
    note = shard_note(results)
    cases = sum(len(case_keys(r)) for r in results)
    console.print(f"merged {len(results)} {results[0].kind} result(s): {cases} cases, {len(rows)} rows"
                  + (f"; {note}" if note else ""))
    return EXIT_OK
