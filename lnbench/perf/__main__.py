"""`python -m lnbench.perf perf|peak ...`: the two commands without the main CLI (until cli.py wires them)."""
from __future__ import annotations

import click

from lnbench.perf.command import peak_command, perf_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """lnbench perf / peak."""


main.add_command(perf_command)
main.add_command(peak_command)

if __name__ == "__main__":  # pragma: no cover
    main()
