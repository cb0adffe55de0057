"""The `lnbench` command line: a thin click group; each subcommand lives in its package, `lnbench/<name>/command.py`.

The subcommands are loaded lazily, as click documents it ("Lazily loading subcommands": a Group whose
`list_commands` and `get_command` import a command's module only when that command is asked for): `COMMANDS`
names each command's module and the start of its help, so `lnbench --help` imports no command module, and `lnbench
CMD --help` imports only CMD's. A command module's top holds its click declarations and what they need (click, rich's
console, lnbench's light modules); torch, numpy, pandas, FlyDSL, SQLAlchemy and SciPy are imported inside the
functions that run the command (tests/test_fast_help.py checks that no --help imports them)."""
from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
import threading
from pathlib import Path
from typing import NoReturn

from lnbench.run.processes import exit_quietly_on_signals

#: the command line, not a library import (nor a test's in-process CliRunner, nor a test that sets sys.argv to
#: `lnbench ...` before its first import of this module: the installed script's argv[0] is its file's path)
COMMAND_LINE = __name__ == "__main__" or (Path(sys.argv[0]).name == "lnbench" and os.path.isfile(sys.argv[0]))
if COMMAND_LINE:
    exit_quietly_on_signals()                                       # a signal during the imports below: one line
    gc.disable()     # until the command's imports are done (get_command): they make no garbage, yet their objects
    #                  trigger full collections that walk all of them (0.4-0.75 s of the main job's parent imports,
    #                  docs/running.md "Start-up"; tests/test_cli_gc.py)

import click  # noqa: E402

from lnbench.version import __version__  # noqa: E402

#: subcommand -> (module, attribute, the start of its help for `lnbench --help`); a command's module is imported
#: only when that command runs or shows its help (tests/test_fast_help.py checks these against the commands)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "abi-compare": ("lnbench.abi.command", "abi_compare_command",
                    "Tensor vs Pointer launch ABI: compiled-kernel facts side by side"),
    "compare": ("lnbench.compare.command", "compare_command",
                "Compare two `perf --json` (or `abi-compare --json`) results case by case"),
    "config": ("lnbench.config.command", "config_group", "Show the effective configuration"),
    "env": ("lnbench.env.command", "env_command",
            "Print devices, software versions, the emulator, every backend's availability"),
    "inspect": ("lnbench.inspect.command", "inspect_command",
                "Compile the FlyDSL kernels (compile-only, no GPU) and report kernarg bytes, registers"),
    "merge": ("lnbench.merge.command", "merge_command",
              "Join the result files of one command's parts (--shard K/N) into one result"),
    "peak": ("lnbench.perf.command", "peak_command",
             "Measure device-to-device copy bandwidth (bytes read + written) and cache it"),
    "perf": ("lnbench.perf.command", "perf_command",
             "Time LayerNorm fwd/bwd: P worker processes, each warm-up + R runs of I calls"),
    "plot": ("lnbench.plot.command", "plot_command", "Draw PNGs from result files (JSON or CSV)"),
    "report": ("lnbench.history.command", "report_command",
               "Write a static HTML dashboard of the results store (what changed, trends, checks)"),
    "store": ("lnbench.history.command", "store_command",
              "Record result files in the results store, each run once"),
    "flydsl-table": ("lnbench.history.command", "flydsl_table_command",
                     "Print a perf result as FlyDSL's CI benchmark table (op shape dtype TB/s TFLOPS)"),
    "history": ("lnbench.history.command", "history_command",
                "Per case over the stored runs: latest value, trend, change points; since when a check fails"),
    "verify": ("lnbench.verify.command", "verify_command",
               "Check forward (y, mean, rstd) and backward (dx, dγ, dβ) against an fp64 autograd reference"),
}


def _shorten(text: str, limit: int) -> str:
    """`text`, cut at a word boundary with `...` when longer than `limit` characters."""
    if len(text) <= limit:
        return text
    return text[:max(limit - 3, 1)].rsplit(" ", 1)[0] + "..."


def _fail_usage(message: str) -> None:
    from lnbench.cli_common import fail_usage
    fail_usage(message)


def exit_now(code: str | int | None) -> NoReturn:
    """End the command line's process as sys.exit(code) would, without the interpreter's teardown of every module it
    imported (torch's, FlyDSL's MLIR contexts: ~0.5 s of a verify run, docs/running.md "Start-up"): the atexit
    handlers run, the output is flushed, the process exits. Where another thread still runs (which the interpreter's exit would wait for), or this Python
    has no atexit runner to call, it is sys.exit(code)."""
    run_atexit = getattr(atexit, "_run_exitfuncs", None)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if run_atexit is None or others:
        sys.exit(code)
    run_atexit()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:                                  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # a closed pipe (`lnbench ... | head`): nothing more can be written
            pass
    os._exit(status)


class OneLineUsageErrors(click.Group):
    """The group: subcommands loaded lazily from COMMANDS (list_commands, get_command, format_commands: the module
    docstring), and click's own usage errors (a bad flag value, an unknown option) as one line and exit 2, like
    lnbench's: `lnbench: error: Invalid value for '-P' / '--processes': 'abc' is not a valid integer. (see ...)`"""

    def main(self, *args, **kwargs):
        if not COMMAND_LINE:
            return self._main(*args, **kwargs)
        try:
            code = self._main(*args, **kwargs)
        except SystemExit as exc:
            code = exc.code
        exit_now(code if code is None or isinstance(code, (int, str)) else str(code))

    def _main(self, *args, **kwargs):
        try:
            return super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as exc:   # plain `lnbench`: the help, as click prints it
            click.echo(exc.format_message())
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            argv = kwargs.get("args", args[0] if args else None)
            _fail_usage(f"{exc.format_message()} (see `{self._help_path(exc, argv)} --help`)")
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        finally:
            if COMMAND_LINE:   # the process exits next: its last collections skip every object it has (~0.4 s)
                gc.freeze()

    def _help_path(self, exc: click.UsageError, argv: list[str] | None) -> str:
        """The command whose --help to point at: the error's own, or (when click raised it while still parsing
        the group's arguments, e.g. an option missing its value) the subcommand named on the command line."""
        if exc.ctx is not None and exc.ctx.command is not self:
            return exc.ctx.command_path
        words = sys.argv[1:] if argv is None else list(argv)
        name = next((word for word in words if word in COMMANDS), None)
        return f"lnbench {name}" if name else "lnbench"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        command = getattr(importlib.import_module(module), attribute)
        if COMMAND_LINE and not gc.isenabled():
            gc.freeze()     # what the imports made lives until the exit: the collections from here on skip it
            gc.enable()
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from COMMANDS, without importing every command's module."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, _shorten(COMMANDS[name][2], limit)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=OneLineUsageErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lnbench")
def main() -> None:
    """Validate and benchmark LayerNorm kernels (FlyDSL on AMD Instinct GPUs, torch and Triton peers)."""


if __name__ == "__main__":  # pragma: no cover
    main()
