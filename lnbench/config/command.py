"""`lnbench config show`: the effective configuration, the packaged defaults with --config / $LNBENCH_CONFIG
merged over them, printed as TOML (a file that can be edited and given back with --config)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from lnbench import settings as cfg
from lnbench.cli_common import config_option, guarded

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def _value(value: Any) -> str:
    """One TOML value: strings JSON-quoted (valid TOML basic strings), booleans lower case, lists inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def to_toml(config: dict[str, Any], prefix: str = "") -> str:
    """The config as TOML: each table's plain keys under its [header], then its sub-tables."""
    lines: list[str] = []
    plain = {k: v for k, v in config.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in config.items() if isinstance(v, dict)}
    if prefix and (plain or not tables):
        lines.append(f"[{prefix}]")
    lines += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    if plain:
        lines.append("")
    for name, table in tables.items():
        lines.append(to_toml(table, f"{prefix}.{_key(name)}" if prefix else _key(name)))
    return "\n".join(lines)


@click.group("config")
def config_group() -> None:
    """Show the effective configuration (defaults merged with --config / $LNBENCH_CONFIG)."""


@config_group.command("show")
@config_option
@guarded
def show_command(config_path: Path | None) -> int:
    """Print the configuration every command would use, as TOML: the packaged defaults with --config (else
    $LNBENCH_CONFIG) merged over them; the first line names the file merged."""
    merged = cfg.load_config(config_path)
    source = cfg.config_file(config_path)
    click.echo(f"# lnbench configuration: packaged defaults{f' + {source}' if source else ''}")
    click.echo(to_toml(merged).rstrip() + "\n", nl=False)
    return 0
