"""Markdown summaries of a command's results: `--md FILE` and, in GitHub Actions, the step summary.

A command's Markdown holds the tables it shows on the terminal (report.render_table records each one, with
its columns' formatting), then its summary line: verify's per backend × dtype verdicts and its failures,
perf's headline table, abi-compare's tables, inspect's static facts (compare writes its own PR comment,
compare.markdown, with the table cells of `cell`). When $GITHUB_STEP_SUMMARY names a file, every command
that writes results appends its Markdown there (never overwriting what earlier steps wrote).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from rich.text import Text

from lnbench.output.tables import Column, styled_status
from lnbench.output.files import TEXT_ERRORS, atomic_write

#: GitHub Actions' step summary file (appended to, in Markdown)
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
#: rows of one table beyond which the Markdown says how many more the CSV holds (a step summary is <= 1 MiB)
MAX_ROWS = 200


def cell(text: Any) -> str:
    """One table cell: the text on one line, `|` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(col: Column, row: Mapping[str, Any]) -> str:
    """A column's terminal text for a row, as plain text (a markup column's rich markup dropped)."""
    try:
        text = col.fmt(row.get(col.key))
    except Exception:  # noqa: BLE001 - a formatter for the terminal; a Markdown cell must not fail the run
        return str(row.get(col.key, ""))
    return Text.from_markup(text).plain if col.markup or col.fmt is styled_status else text


def table(columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], limit: int = MAX_ROWS) -> list[str]:
    """The rows as a Markdown table (at most `limit` of them, then a line saying how many more)."""
    out = ["| " + " | ".join(cell(c.header) for c in columns) + " |",
           "|" + "|".join("---" if c.justify == "left" else "---:" for c in columns) + "|"]
    out += ["| " + " | ".join(cell(_value(c, row)) for c in columns) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        out += ["", f"… {len(rows) - limit} more rows (the CSV/JSON has every row)"]
    return out


def document(heading: str, summary: str, tables: Iterable[tuple[str, Sequence[Column], Sequence[Mapping[str, Any]]]],
             notes: Sequence[str] = ()) -> str:
    """`## heading`, the summary line in bold, each (title, columns, rows) table under its title, then notes."""
    out = [f"## {heading}", ""]
    if summary:
        out += [f"**{cell(summary)}**", ""]
    for title, columns, rows in tables:
        out += [f"### {cell(title)}", "", *table(columns, list(rows)), ""]
    out += [f"- {cell(note)}" for note in notes]
    return "\n".join(out).rstrip("\n") + "\n"


def writer(text: str):
    """A report.Writer of the Markdown (cli_common.emit_outputs writes it with the CSV and JSON)."""
    return lambda tmp: Path(tmp).write_text(text, encoding="utf-8", errors=TEXT_ERRORS)


def write(text: str, path: Path) -> Path:
    """Write the Markdown atomically (the report writers' temp-file-and-rename)."""
    return atomic_write(Path(path), writer(text))


def step_summary_path() -> Path | None:
    """$GITHUB_STEP_SUMMARY as a path, or None when unset or empty."""
    value = os.environ.get(STEP_SUMMARY_ENV, "").strip()
    return Path(value) if value else None


def append_step_summary(text: str) -> str | None:
    """Append `text` to the step summary file (a blank line before it when the file has content). Returns
    None, or why it could not be appended (the caller warns; results are already written)."""
    path = step_summary_path()
    if path is None:
        return None
    try:
        with open(path, "a", encoding="utf-8", errors=TEXT_ERRORS) as fh:
            if fh.tell() > 0:
                fh.write("\n")
            fh.write(text)
    except OSError as exc:
        return f"${STEP_SUMMARY_ENV} ({path}): {exc.strerror or exc}"
    return None
