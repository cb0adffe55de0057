"""Pieces every subcommand shares: error handling, output options, writing results."""
from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import click
from rich.console import Console
from rich.markup import escape

from lnbench import validate
from lnbench.errors import ContractError, LnbenchUsageError
from lnbench.report import check_writable, default_output_path, release_outputs, write_csv, write_json


def console_width() -> int | None:
    """The width tables are drawn at: $COLUMNS when it is a sane width (validate.terminal_width; anything else
    is ignored); else, outside a terminal (CI logs, pipes), 200 columns, where rich would wrap at 80; in a
    terminal its own size (None: rich reads it)."""
    width = validate.terminal_width(os.environ.get("COLUMNS"))
    if width is not None:
        return width
    if not sys.stdout.isatty():
        return 200
    if "COLUMNS" not in os.environ:
        return None
    try:                                         # rich would trust a bad $COLUMNS: ask the terminal instead
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 80


_WIDTH = console_width()
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def fail_usage(message: str) -> None:
    """Print a one-line error and exit 2."""
    err_console.print(f"[bold red]lnbench: error:[/bold red] {escape(message)}", soft_wrap=True)
    sys.exit(EXIT_USAGE)


def _debug_traceback() -> None:
    """With LNBENCH_DEBUG set, the traceback of the exception being handled, to stderr."""
    if os.environ.get("LNBENCH_DEBUG"):
        traceback.print_exc(file=sys.stderr)


def guarded(func: Callable[..., int | None]) -> Callable[..., None]:
    """Run a command body: usage/contract errors become one line + exit 2, never a traceback.

    LNBENCH_DEBUG=1 also prints the traceback (to stderr); the exit code stays the same.
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = func(*args, **kwargs)
        except (LnbenchUsageError, ContractError) as exc:
            _debug_traceback()
            fail_usage(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except KeyboardInterrupt:
            err_console.print("lnbench: interrupted")
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - last line of defence: one line, no traceback
            _debug_traceback()
            first = str(exc).splitlines()[0] if str(exc) else ""
            fail_usage(f"internal error: {type(exc).__name__}: {first} (set LNBENCH_DEBUG=1 for a traceback)")
        finally:
            release_outputs()       # outputs made ready by prepare_outputs but not written (an error on the way)
        sys.exit(code or EXIT_OK)
    return wrapper


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--csv, --json, --quiet."""
    func = click.option("--quiet", "-q", is_flag=True, help="Print only the summary line.")(func)
    func = click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
                        help="Also write the results as JSON to this file.")(func)
    func = click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
                        help="CSV output file (default: results/<command>-<timestamp>.csv).")(func)
    return func


def reserve_outputs(command: str, outputs: Mapping[str, Path | None]) -> dict[str, Path]:
    """Make a command's output files ready before any work runs, in the order given (report.check_writable:
    an unwritable path, or two options naming one file, is a usage error). `outputs` maps an option (`--csv`,
    `--json`, `--md`, ...) to its path or None; the CSV is always written, by default to
    results/<command>-<timestamp>.csv. Returns where each given result goes (a symlink's target)."""
    validate.distinct_outputs(outputs)
    paths = {**outputs, "--csv": outputs.get("--csv") or default_output_path(command, "csv")}
    return {option: check_writable(path) for option, path in paths.items() if path}


def prepare_outputs(command: str, csv_path: Path | None, json_path: Path | None) -> tuple[Path, Path | None]:
    """reserve_outputs for a command with only --csv and --json: where the CSV and the JSON (if any) go."""
    final = reserve_outputs(command, {"--csv": csv_path, "--json": json_path})
    return final["--csv"], final.get("--json")


def emit_outputs(rows: Sequence[dict[str, Any]], metadata: dict[str, Any], csv_path: Path,
                 json_path: Path | None, extra_json: dict[str, Any] | None = None) -> None:
    """Write the CSV (and JSON) and say where they went."""
    write_csv(rows, csv_path, metadata)
    console.print(f"CSV written to {csv_path}")
    if json_path:
        write_json({"metadata": metadata, **(extra_json or {}), "rows": list(rows)}, json_path)
        console.print(f"JSON written to {json_path}")
