"""Pieces every subcommand shares: error handling, output options, writing results.

The option declarations here are imported by every command module, also for its `--help`: what they need is
imported at the top (click, rich's console, lnbench's light leaf modules); what writing results needs (the result
model's pandas frames and numpy, the Markdown and file writers) is imported inside the functions that use it
(tests/test_fast_help.py checks that a --help imports no torch, pandas or numpy)."""
from __future__ import annotations

import functools
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import click
from rich.console import Console
from rich.markup import escape

from lnbench import settings as cfg
from lnbench import validate
from lnbench.errors import ContractError, LnbenchUsageError, one_line
from lnbench.machine.install import missing_module_hint
from lnbench.run.processes import Terminated, terminate_on_signals
from lnbench.store import hook as store_hook

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.output.files import Writer
    from lnbench.results.records import Cells


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


def nothing_ran(why: str) -> int:
    """The one rule for a run that executed nothing it was asked for (every case `not run`, or compiled only
    where a verdict or a time was asked): one line saying why, and exit 1 (docs/running.md, exit status)."""
    err_console.print(f"[bold red]lnbench: nothing could run here:[/bold red] {escape(why)}", soft_wrap=True)
    return EXIT_FAILED


def fail_usage(message: str) -> None:
    """Print a one-line error and exit 2."""
    err_console.print(f"[bold red]lnbench: error:[/bold red] {escape(message)}", soft_wrap=True)
    sys.exit(EXIT_USAGE)


def _debug_traceback() -> None:
    """With LNBENCH_DEBUG set, the traceback of the exception being handled, to stderr."""
    if os.environ.get("LNBENCH_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off"):
        traceback.print_exc(file=sys.stderr)


def _tolerant_streams() -> None:
    """A terminal or log that cannot encode γ, µ or a path's ü (PYTHONIOENCODING=ascii, latin-1) gets a
    replacement character, not an encoding error after the work is done (and its results unwritten)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and str(getattr(stream, "errors", "")) == "strict":
            try:
                reconfigure(errors="replace")
            except (OSError, ValueError):
                pass


def guarded(func: Callable[..., int | None]) -> Callable[..., None]:
    """Run a command body: usage/contract errors become one line + exit 2, never a traceback.

    LNBENCH_DEBUG=1 also prints the traceback (to stderr); the exit code stays the same. Ctrl-C exits 130;
    SIGTERM (SIGHUP) exits 143 (129) with `lnbench: terminated` after the same cleanup (workers stopped,
    temp folders removed; lnbench.run.processes).
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from lnbench.output.files import release_outputs
        from lnbench.output.tables import SHOWN

        _tolerant_streams()
        SHOWN.clear()               # this command's tables (its Markdown summary), none of an earlier one's
        try:
            with terminate_on_signals():
                code = func(*args, **kwargs)
        except (LnbenchUsageError, ContractError) as exc:
            _debug_traceback()
            fail_usage(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except KeyboardInterrupt:
            err_console.print("lnbench: interrupted")
            sys.exit(130)
        except Terminated as exc:
            err_console.print("lnbench: terminated")
            sys.exit(exc.exit_code)
        except ModuleNotFoundError as exc:
            _debug_traceback()
            hint = missing_module_hint(exc)
            fail_usage(hint or f"internal error: ModuleNotFoundError: {exc} (set LNBENCH_DEBUG=1 for a traceback)")
        except Exception as exc:  # noqa: BLE001 - last line of defence: one line, no traceback
            _debug_traceback()
            first = str(exc).splitlines()[0] if str(exc) else ""
            fail_usage(f"internal error: {type(exc).__name__}: {first} (set LNBENCH_DEBUG=1 for a traceback)")
        finally:
            release_outputs()       # outputs made ready by prepare_outputs but not written (an error on the way)
            failed = store_hook.failure()
            store_hook.reset()
        if failed:                  # the result files are written; the store could not take the run
            fail_usage(f"{failed} (the run is not recorded; its result files are written)")
        sys.exit(code or EXIT_OK)
    return wrapper


@dataclass(frozen=True)
class SharedOptions:
    """The options the commands share, declared once: each command's options record extends it (perf.options'
    PerfOptions, abi.plan's AbiOptions, verify.plan's VerifyOptions, compare.plan's CompareOptions,
    inspect.command's InspectOptions, perf.peak_run's PeakOptions), and each command builds its record from its
    typed parameters, by keyword. As given: None or empty is left out (the config's value applies); a command
    without one of these options leaves it at its default."""

    config_path: Path | None = None
    kernel_src: Path | None = None
    dtypes: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    shape_set: str | None = None
    device: str | None = None
    emu_checks: str | None = None
    seed: int | None = None
    force: bool = False
    devices: str | None = None
    shard: str | None = None
    md_path: Path | None = None
    csv_path: Path | None = None
    json_path: Path | None = None


class OutputFile(click.Path):
    """click.Path for an output file: a path ending in a separator names a folder, and would otherwise be
    written as a file of that folder's name (pathlib drops the slash), so it is refused here. dir_okay=True
    leaves an existing folder to report.check_writable (`is a directory`)."""

    def __init__(self, dir_okay: bool = False) -> None:
        super().__init__(dir_okay=dir_okay, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value} is a directory path; give a file path", param, ctx)
        return super().convert(value, param, ctx)


def _no_csv(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[NO_CSV] = True
    return value


#: click context key set by --no-csv (reserve_outputs reads it, so commands need no parameter for it)
NO_CSV = "lnbench.no_csv"


def no_csv_requested() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(NO_CSV))


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--csv, --no-csv, --json, --quiet, --store."""
    func = store_hook.store_option(func)
    func = click.option("--quiet", "-q", is_flag=True,
                        help="Print no tables: only the summary line, where the result files went, and warnings.")(func)
    func = click.option("--no-csv", is_flag=True, expose_value=False, callback=_no_csv,
                        help="Write no CSV (by default one is always written).")(func)
    func = click.option("--json", "json_path", type=OutputFile(),
                        help="Also write the results as JSON to this file.")(func)
    func = click.option("--csv", "csv_path", type=OutputFile(),
                        help="CSV output file (default: results/<command>-<timestamp>.csv).")(func)
    return func


#: the help of --config where a command says nothing of its own
CONFIG_HELP = "TOML file merged over the packaged defaults (default: $LNBENCH_CONFIG, else none)."


def config_option(func: Callable[..., Any] | None = None, *, help_text: str = CONFIG_HELP) -> Any:
    """--config FILE (the parameter `config_path`) of every command that reads the config: `@config_option`, or
    `@config_option(help_text=...)` where a command says what it reads from it."""
    option = click.option("--config", "config_path", type=click.Path(path_type=Path), help=help_text)
    return option if func is None else option(func)


def kernel_source_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--kernel-src DIR: where kernel-source backends import from (`flydsl-src`: a FlyDSL checkout)."""
    return click.option("--kernel-src", "kernel_src", type=click.Path(path_type=Path),
                        help="Folder kernel sources import from: a FlyDSL checkout for --backend flydsl-src, or a "
                             "folder holding the module of --backend module:PKG.MOD (default: "
                             "$LNBENCH_KERNEL_SRC).")(func)


def emu_checks_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--emu-checks: which sanitizer checks emulated launches run (lnbench.emu.checks)."""
    return click.option("--emu-checks", "emu_checks",
                        help="Sanitizer checks of emulated launches: all (default), none, or a comma list of "
                             "memory, lds, waitcnt, initcheck, race (see docs/emulator.md).")(func)


def apply_emu_checks(value: str | None) -> str:
    """Set the emulator's checks from --emu-checks (None: $LNBENCH_EMU_CHECKS, else all); a bad value is a
    usage error. Returns the one line a run prints about them."""
    from lnbench.emu import checks

    try:
        chosen = checks.parse(value) if value is not None else checks.from_env()
    except checks.ChecksError as exc:
        raise LnbenchUsageError(str(exc) if value is not None else f"${checks.ENV}: {exc}") from None
    from lnbench.emu import runtime

    runtime.set_checks(chosen)
    return checks.describe(chosen)


Inputs = Mapping[str, Path | None]
"""The files a command reads, by name (BASE, --config, --peak-file, ...): no output may overwrite one."""


def config_input(config_path: Path | None) -> dict[str, Path | None]:
    """The config file a command loaded (config.config_file: --config, else $LNBENCH_CONFIG), as an input."""
    return {"--config" if config_path else "LNBENCH_CONFIG": cfg.config_file(config_path)}


def check_writable(path: Path) -> Path:
    """lnbench.output.files.check_writable, imported when a command reserves its outputs (not for its --help)."""
    from lnbench.output import files

    return files.check_writable(path)


def reserve_outputs(command: str, outputs: Mapping[str, Path | None], inputs: Inputs | None = None) -> dict[str, Path]:
    """Make a command's output files ready before any work runs, in the order given (report.check_writable:
    an unwritable path, `-`, two options naming one file, or a file the command reads (`inputs`) is a usage
    error). `outputs` maps an option (`--csv`, `--json`, `--md`, ...) to its path or None; the CSV is always
    written, by default to results/<command>-<timestamp>.csv. Returns where each given result goes (a
    symlink's target)."""
    from lnbench.output.files import default_output_path

    validate.distinct_outputs(outputs, inputs)
    if no_csv_requested():
        if outputs.get("--csv"):
            raise LnbenchUsageError("--csv and --no-csv both given: choose one")
        paths = {k: v for k, v in outputs.items() if k != "--csv"}
    else:
        paths = {**outputs, "--csv": outputs.get("--csv") or default_output_path(command, "csv")}
    final = {option: check_writable(path) for option, path in paths.items() if path}
    store_hook.prepare()            # --store: the store opened (or refused) before any work
    return final


def prepare_outputs(command: str, csv_path: Path | None, json_path: Path | None,
                    inputs: Inputs | None = None, md_path: Path | None = None
                    ) -> tuple[Path | None, Path | None, Path | None]:
    """reserve_outputs for a command with --csv, --json and --md: where the CSV (None with --no-csv), the JSON
    (if any) and the Markdown (if any) go."""
    final = reserve_outputs(command, {"--csv": csv_path, "--json": json_path, "--md": md_path}, inputs)
    return final.get("--csv"), final.get("--json"), final.get("--md")


def emit_outputs(rows: Sequence[Cells], metadata: Cells, csv_path: Path | None,
                 json_path: Path | None, extra_json: dict[str, Any] | None = None,
                 more: Sequence[tuple[str, Path, Writer]] = (), announce: bool = True,
                 md_path: Path | None = None, summary: str = "", md_text: str | None = None,
                 step_summary: bool = True) -> None:
    """Write the CSV (if any), the JSON (if any), the Markdown summary (--md, if any) and `more` outputs ((what,
    path, writer)) all or nothing (report.atomic_write_all), then say where they went (unless not `announce`:
    a checkpoint of lnbench.scaffold.sink). The metadata names the rows' kind (results.Kind.run stamps it). Rows
    that cannot be encoded (a value a writer refuses, rows that break their kind's declaration) are kept as JSON
    lines (output_fallback.keep_rows): ResultsNotWritten names where. A final write (`announce`) also appends the
    Markdown to $GITHUB_STEP_SUMMARY when that is set (unless not `step_summary`). The Markdown is `md_text`, else
    the tables the command showed (report.SHOWN) and `summary`."""
    from lnbench.output import fallback as output_fallback, markdown
    from lnbench.output.files import ResultsNotWritten, atomic_write_all, csv_writer, result_json_writer
    from lnbench.output.tables import SHOWN
    from lnbench.results import kind_of_metadata

    kind = kind_of_metadata(metadata)
    step_summary = step_summary and announce and markdown.step_summary_path() is not None
    try:
        outputs: list[tuple[str, Path, Writer]] = [("CSV", csv_path, csv_writer(rows, metadata))] if csv_path else []
        if json_path:
            outputs.append(("JSON", json_path, result_json_writer(rows, metadata, extra_json)))
        if md_text is None and (md_path or step_summary):
            md_text = markdown.document(f"lnbench {kind.name}", summary, SHOWN)
        if md_path and md_text is not None:
            outputs.append(("Markdown summary", md_path, markdown.writer(md_text)))
        outputs += more
        placed = atomic_write_all([(path, write) for _, path, write in outputs])
    except LnbenchUsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - rows that cannot be encoded as asked are still kept
        where, kept = output_fallback.keep_rows(kind.name, rows, metadata)
        raise ResultsNotWritten(f"cannot encode the results ({one_line(exc)}); {where}",
                                kept) from exc
    for (what, _, _), path in zip(outputs, placed):
        if announce:
            console.print(f"{what} written to {path}", markup=False)
    recorded = store_hook.record(rows, metadata) if announce else None
    if recorded:
        console.print(recorded, markup=False, highlight=False)
    problem = markdown.append_step_summary(md_text) if step_summary and md_text else None
    if problem:
        err_console.print(f"lnbench: warning: the step summary could not be appended: {problem}", soft_wrap=True,
                          markup=False, highlight=False)


def md_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--md FILE: also write the Markdown summary (lnbench.output.markdown; in GitHub Actions it also goes to the step
    summary)."""
    return click.option("--md", "md_path", type=OutputFile(dir_okay=True),
                        help="Also write a Markdown summary (the tables shown, for a PR comment or CI summary; "
                             "$GITHUB_STEP_SUMMARY gets it too when set).")(func)


#: `--flydsl-table` without a FILE (or `-`): FlyDSL's table goes to the log only
FLYDSL_LOG_ONLY = Path("-")


class _FlydslTableFile(OutputFile):
    """--flydsl-table's optional FILE: none (the bare flag) or `-` is the log only (FLYDSL_LOG_ONLY)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return FLYDSL_LOG_ONLY if value in ("", "-") else super().convert(value, param, ctx)


def flydsl_table_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--flydsl-table [FILE] (the parameter `flydsl_table`: None when not given, FLYDSL_LOG_ONLY for the bare flag,
    else the file that gets FlyDSL's text as well as the log)."""
    return click.option("--flydsl-table", "flydsl_table", type=_FlydslTableFile(), is_flag=False, flag_value="",
                        default=None, metavar="[FILE]", help=help_text)


def reserve_flydsl_file(value: Path | None, outputs: Mapping[str, Path | None],
                        inputs: Inputs | None = None) -> Path | None:
    """The file `--flydsl-table FILE` writes (None: the log only, or not asked), made ready before any work like
    every output (check_writable): not a file another output option in `outputs` names, nor an input."""
    if value is None or value == FLYDSL_LOG_ONLY:
        return None
    validate.distinct_outputs({**outputs, "--flydsl-table": value}, inputs)
    return check_writable(value)


def emit_flydsl_text(text: str, path: Path | None) -> None:
    """FlyDSL's table (or compare block) on stdout, the log FlyDSL's CI parses, and in `path` too when given."""
    click.echo(text, nl=False)
    if path is not None:
        from lnbench.output.files import atomic_write_all

        placed = atomic_write_all([(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))])[0]
        console.print(f"FlyDSL CI text written to {placed}", markup=False, highlight=False)


def device_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--device NAME (the parameter `device`; None: the command's default device), with the command's words for
    which devices it takes."""
    return click.option("--device", help=help_text)


def eps_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--eps: LayerNorm's eps (None: the config's)."""
    return click.option("--eps", type=validate.FLOAT, help="LayerNorm eps (default: config).")(func)


def seed_option(help_text: str = "Base random seed (default: config).") -> Callable[[Callable[..., Any]],
                                                                                 Callable[..., Any]]:
    """--seed N: the base random seed (None: the config's)."""
    return click.option("--seed", type=validate.INT, help=help_text)
