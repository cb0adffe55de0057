"""The `lnbench` command line: a thin click group; each subcommand lives with its feature."""
from __future__ import annotations

import sys
from pathlib import Path

from lnbench.processes import exit_quietly_on_signals

if __name__ == "__main__" or Path(sys.argv[0]).name == "lnbench":   # the command line, not a library import
    exit_quietly_on_signals()                                       # a signal during the imports below: one line

import click  # noqa: E402

import lnbench  # noqa: E402
from lnbench.cli_common import console, fail_usage, guarded  # noqa: E402
from lnbench.device import Device, activate, parse_device, resolve_kernel_device
from lnbench.env import backend_facts, device_facts, software_facts
from lnbench.report import Column, render_table
from lnbench.abi.command import abi_compare_command
from lnbench.compare.command import compare_command
from lnbench.inspect_command import inspect_command
from lnbench.perf.command import peak_command, perf_command
from lnbench.plot.command import plot_command
from lnbench.verify.command import verify_command


class OneLineUsageErrors(click.Group):
    """click's own usage errors (a bad flag value, an unknown option) as one line and exit 2, like lnbench's:
    `lnbench: error: Invalid value for '-P' / '--processes': 'abc' is not a valid integer. (see ...)`"""

    def main(self, *args, **kwargs):  # type: ignore[override]
        try:
            return super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as exc:   # plain `lnbench`: the help, as click prints it
            click.echo(exc.format_message())
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            argv = kwargs.get("args", args[0] if args else None)
            fail_usage(f"{exc.format_message()} (see `{self._help_path(exc, argv)} --help`)")
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)

    def _help_path(self, exc: click.UsageError, argv: list[str] | None) -> str:
        """The command whose --help to point at: the error's own, or (when click raised it while still parsing
        the group's arguments, e.g. an option missing its value) the subcommand named on the command line."""
        if exc.ctx is not None and exc.ctx.command is not self:
            return exc.ctx.command_path
        words = sys.argv[1:] if argv is None else list(argv)
        name = next((word for word in words if word in self.commands), None)
        return f"lnbench {name}" if name else "lnbench"


@click.group(cls=OneLineUsageErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(lnbench.__version__, prog_name="lnbench")
def main() -> None:
    """Validate and benchmark LayerNorm kernels (FlyDSL on AMD Instinct GPUs, torch and Triton peers)."""


@main.command("env")
@click.option("--device", help="Device to check backends on: cpu, cuda, cuda:N, emu[:gfx950] (default: the device "
                              "each bare command would use: verify's, and perf's where that differs).")
@guarded
def env_command(device: str | None) -> int:
    """Print devices, software versions, the emulator, every backend's availability and the FlyDSL toolkit."""
    software = [{"item": k, "value": v} for k, v in software_facts().items()]
    render_table(console, "software", [Column("item", "item", justify="left"), Column("value", "value", justify="left")],
                 software)
    render_table(console, "devices", [Column(k, k, justify="left") for k in ("device", "name", "arch")], device_facts())
    columns = [Column(k, k, justify="left") for k in ("backend", "status", "reason", "ops", "description")]
    if device is not None:
        dev = activate(parse_device(device))  # an unusable emulator ends here (exit 2, one line) after the facts above
        render_table(console, f"backends on {dev.name}", columns, backend_facts(dev))
        return 0
    for dev, who in default_devices():
        render_table(console, f"backends on {dev.label}: what `{who}` uses here", columns, backend_facts(dev))
    return 0


def default_devices() -> list[tuple[Device, str]]:
    """The devices bare commands use here, each with the commands that use it: verify (and inspect --execute)
    prefers a device that runs the FlyDSL kernels (the emulated one on a machine without a ROCm GPU), perf and
    abi-compare's runtime part time on the GPU torch sees, else the cpu."""
    kernel, timed = resolve_kernel_device(None), activate(parse_device(None))
    if kernel.name == timed.name:
        return [(kernel, "lnbench verify` and `lnbench perf")]
    return [(kernel, "lnbench verify"), (timed, "lnbench perf")]


main.add_command(verify_command)
main.add_command(inspect_command)
main.add_command(perf_command)
main.add_command(peak_command)
main.add_command(abi_compare_command)
main.add_command(compare_command)
main.add_command(plot_command)

if __name__ == "__main__":  # pragma: no cover
    main()
