"""Rich tables on the terminal: columns, cell formatters, status colours."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table

from lnbench.results.verdicts import Verdict

if TYPE_CHECKING:
    from lnbench.results.records import Cells

STATUS_STYLES = {"PASS": "green", "FAIL": "bold red", "error": "bold red", "not run": "yellow",
                 "compiled, not executed": "cyan", "ok": "green", **{v.value: v.style for v in Verdict}}


@dataclass(frozen=True)
class Column:
    """One table column: the row key it shows, its header, and how a value is printed."""

    key: str
    header: str
    fmt: Callable[[Any], str] = str
    justify: JustifyMethod = "right"
    markup: bool = False  # True when fmt returns rich markup (status colours); other text is escaped


def missing(value: Any) -> bool:
    """lnbench.results.records.missing, imported when a table is drawn (that module's numpy is not needed for a
    command's --help, which imports this one for its column declarations)."""
    from lnbench.results.records import missing as record_missing

    return record_missing(value)


def fmt_float(digits: int = 3) -> Callable[[Any], str]:
    """Formatter for numbers in general format; blanks for missing values."""
    def _fmt(value: Any) -> str:
        if missing(value):
            return ""
        if isinstance(value, (int, float)):
            return f"{value:.{digits}g}"
        return str(value)
    return _fmt


def _missing(value: Any) -> bool:
    return value is None or not isinstance(value, (int, float)) or not math.isfinite(value)


def plain_number(value: float, digits: int = 4) -> str:
    """`value` with `digits` significant digits, never in exponent notation: 0.0123, 14.4, 1,149, 12,346."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(float(f"{value:.{digits}g}"))))
    text = f"{value:,.{max(digits - 1 - magnitude, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


#: display units of a time held in µs: (unit, µs per unit), smallest first
TIME_UNITS: tuple[tuple[str, float], ...] = (("ns", 1e-3), ("µs", 1.0), ("ms", 1e3), ("s", 1e6))


def time_unit(us: float, digits: int = 4) -> tuple[str, float]:
    """The unit a time of `us` µs reads best in: the largest one it is >= 1 of, after rounding to `digits`."""
    rounded = abs(float(f"{us:.{digits}g}"))
    unit = TIME_UNITS[1] if rounded == 0 else TIME_UNITS[0]
    for name, scale in TIME_UNITS:
        if rounded >= scale:
            unit = (name, scale)
    return unit


def fmt_time_us(value: Any, digits: int = 4) -> str:
    """A time held in µs, with its unit and `digits` significant digits: 532 ns, 32.01 µs, 1.149 ms, 14.4 ms,
    1.2 s; blank for a missing value. Every table shows times through this (the CSV keeps raw µs)."""
    if _missing(value):
        return ""
    name, scale = time_unit(value, digits)
    return f"{plain_number(value / scale, digits)} {name}"


def fmt_time_range_us(low: Any, high: Any, digits: int = 4) -> str:
    """A min–max pair of times in µs, in the unit of the larger: `1.149–1.201 ms`; blank when either is missing."""
    if _missing(low) or _missing(high):
        return ""
    name, scale = time_unit(max(abs(low), abs(high)), digits)
    return f"{plain_number(low / scale, digits)}–{plain_number(high / scale, digits)} {name}"


def fmt_duration(seconds: float) -> str:
    """A duration for people: 45 s, 3 min, 1 h 05 min."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def fmt_number(digits: int = 4, suffix: str = "") -> Callable[[Any], str]:
    """Formatter of plain numbers (GB/s, ratios): `digits` significant digits, no exponent; blank when missing."""
    def _fmt(value: Any) -> str:
        return "" if _missing(value) else plain_number(value, digits) + suffix
    return _fmt


def styled_status(value: Any) -> str:
    """Status text with its colour (PASS green, FAIL red, ...)."""
    text = "" if value is None else str(value)
    for prefix, style in STATUS_STYLES.items():
        if text.startswith(prefix):
            return f"[{style}]{text}[/{style}]"
    return text


#: the tables this command has shown (title, columns, rows), in order: its Markdown summary (lnbench.output.markdown)
SHOWN: list[tuple[str, list[Column], list[dict[str, Any]]]] = []


def silent_console() -> Console:
    """A console that shows nothing: render_table into it records the table (SHOWN, for the Markdown) under
    --quiet without printing it, or laying it out (history's 200 rows: 0.4 s)."""
    import io
    return Console(file=io.StringIO(), width=200, quiet=True)


#: a column's least width (two characters of text, its padding and its rule): on a console narrower than the
#: columns need at this, rich shrinks some columns to nothing and their values vanish without a word
MIN_COLUMN_WIDTH = 5


def render_table(console: Console, title: str, columns: Sequence[Column], rows: Iterable[Cells]) -> None:
    """Print rows (records, or display dicts) as one rich table (and keep it in SHOWN for the command's
    Markdown)."""
    from lnbench.results.records import plain
    shown = [plain(row) for row in rows]
    SHOWN.append((title, list(columns), shown))
    if console.quiet:
        return
    table = Table(title=title, header_style="bold", show_lines=False)
    for col in columns:
        table.add_column(col.header, justify=col.justify, overflow="fold")
    for row in shown:
        table.add_row(*[col.fmt(row.get(col.key)) if (col.markup or col.fmt is styled_status)
                        else escape(col.fmt(row.get(col.key))) for col in columns])
    needed = len(columns) * MIN_COLUMN_WIDTH + 1
    if console.width >= needed:
        console.print(table)
        return
    saved = console._width          # rich's own setting: None follows the terminal's size
    console.width = needed          # lines longer than the terminal, which wraps them: no value is lost
    try:
        console.print(table)
    finally:
        console._width = saved
