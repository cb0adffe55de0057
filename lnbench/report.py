"""Renderers: rich tables on the terminal, CSV (pandas) and JSON files written atomically."""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lnbench.errors import LnbenchUsageError

STATUS_STYLES = {"PASS": "green", "FAIL": "bold red", "error": "bold red", "not run": "yellow",
                 "compiled, not executed": "cyan", "ok": "green", "same": "dim", "faster": "green",
                 "slower": "red"}


@dataclass(frozen=True)
class Column:
    """One table column: the row key it shows, its header, and how a value is printed."""

    key: str
    header: str
    fmt: Callable[[Any], str] = str
    justify: str = "right"
    markup: bool = False  # True when fmt returns rich markup (status colours); other text is escaped


def fmt_float(digits: int = 3) -> Callable[[Any], str]:
    """Formatter for numbers in general format; blanks for missing values."""
    def _fmt(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, (int, float)):
            return f"{value:.{digits}g}"
        return str(value)
    return _fmt


def styled_status(value: Any) -> str:
    """Status text with its colour (PASS green, FAIL red, ...)."""
    text = "" if value is None else str(value)
    for prefix, style in STATUS_STYLES.items():
        if text.startswith(prefix):
            return f"[{style}]{text}[/{style}]"
    return text


def render_table(console: Console, title: str, columns: Sequence[Column], rows: Iterable[dict[str, Any]]) -> None:
    """Print rows as one rich table."""
    table = Table(title=title, header_style="bold", show_lines=False)
    for col in columns:
        table.add_column(col.header, justify=col.justify, overflow="fold")
    for row in rows:
        table.add_row(*[col.fmt(row.get(col.key)) if (col.markup or col.fmt is styled_status)
                        else escape(col.fmt(row.get(col.key))) for col in columns])
    console.print(table)


def default_output_path(command: str, suffix: str, results_dir: Path | None = None) -> Path:
    """results/<command>-<UTC timestamp>-<pid>-<random>.<suffix> under the current folder (git-ignored); the pid
    and random part keep concurrent runs, even ones started in the same second, from sharing a name."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = results_dir or Path(os.environ.get("LNBENCH_RESULTS_DIR", Path.cwd() / "results"))
    return base / f"{command}-{stamp}-{os.getpid()}-{secrets.token_hex(3)}.{suffix}"


def check_writable(path: Path) -> Path:
    """Fail early (usage error) when an output file cannot be created, before any work is done."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LnbenchUsageError(f"cannot create folder for {path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise LnbenchUsageError(f"output path {path} is a directory")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise LnbenchUsageError(f"output path {path} is not writable")
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Write through a temp file in the same folder, then rename: readers never see half a file."""
    path = check_writable(Path(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a result file gets what open() would give it
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def rows_frame(rows: Sequence[dict[str, Any]], metadata: dict[str, Any] | None = None) -> pd.DataFrame:
    """Long-format frame: one row per result, the run metadata repeated as columns."""
    frame = pd.DataFrame(list(rows))
    for key, value in (metadata or {}).items():
        if key not in frame.columns:
            frame[key] = value
    return frame


def write_csv(rows: Sequence[dict[str, Any]], path: Path, metadata: dict[str, Any] | None = None) -> Path:
    """Rows (+ metadata columns) to CSV, atomically."""
    frame = rows_frame(rows, metadata)
    return _atomic_write(Path(path), lambda tmp: frame.to_csv(tmp, index=False))


def write_json(payload: Any, path: Path) -> Path:
    """Any JSON-able payload to a file, atomically (NaN written as null)."""
    def _clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {str(k): _clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_clean(v) for v in value]
        return value

    text = json.dumps(_clean(payload), indent=2, default=str)
    return _atomic_write(Path(path), lambda tmp: tmp.write_text(text + "\n"))
