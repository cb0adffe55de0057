"""README's code map places every module and package directly under lnbench/, and names nothing the tree lacks;
every command is a package `lnbench/<name>/` whose `command.py` holds its click command.

The rule: the first column of the table under `## Code map` names `x.py` for each top-level module and `x/` for
each folder (a package, or a data folder such as configs/). A package covers its modules, so a new module inside
one needs no line, but a new top-level module or package fails until the README places it."""
from __future__ import annotations

import re
from pathlib import Path

from lnbench import layers
from lnbench.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lnbench"


def tree_names() -> set[str]:
    """`x.py` for every module and `x/` for every folder directly under lnbench/ (caches left out)."""
    names = {p.name for p in PACKAGE.glob("*.py")}
    names |= {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return names


def code_map_names(readme: str) -> set[str]:
    """The backticked names in the first column of the table of README's `## Code map` section."""
    section = readme.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "README's `## Code map` section has no table rows"
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def check(tree: set[str], placed: set[str]) -> list[str]:
    """What is wrong with the code map, one line each ([] when it places exactly the tree)."""
    return ([f"lnbench/{name} is not placed in README's code map" for name in sorted(tree - placed)]
            + [f"README's code map names {name}, which lnbench/ does not have" for name in sorted(placed - tree)])


def test_the_code_map_places_every_module_and_package() -> None:
    assert check(tree_names(), code_map_names((ROOT / "README.md").read_text(encoding="utf-8"))) == []


def test_a_new_module_or_package_fails_the_rule() -> None:
    placed = code_map_names((ROOT / "README.md").read_text(encoding="utf-8"))
    assert check(tree_names() | {"newthing.py"}, placed) == ["lnbench/newthing.py is not placed in README's code map"]
    assert check((tree_names() - {"validate.py"}) | {"validate/"}, placed) == [     # a module turned into a package
        "lnbench/validate/ is not placed in README's code map",
        "README's code map names validate.py, which lnbench/ does not have"]


def test_every_command_is_a_package_holding_command_py() -> None:
    """cli.COMMANDS points each subcommand at `lnbench.<package>.command`, the package is one of layers.COMMANDS,
    and every package of layers.COMMANDS has a command.py that cli uses."""
    used = set()
    for name, (module, _, _) in COMMANDS.items():
        package, _, leaf = module.rpartition(".")
        assert leaf == "command" and package in layers.COMMANDS, f"{name}: {module} is not <command package>.command"
        used.add(package)
    for package in layers.COMMANDS:
        folder = PACKAGE / package.removeprefix("lnbench.")
        assert (folder / "__init__.py").is_file() and (folder / "command.py").is_file(), \
            f"{package} is not a package with a command.py"
    assert used == set(layers.COMMANDS)


def architecture_layers(text: str) -> dict[str, int]:
    """name (a module's or package's, without `.py` or `/`) -> layer, from the numbered list under
    docs/architecture.md's `## Layering`."""
    section = text.split("\n## Layering\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, int] = {}
    layer = None
    for line in section.splitlines():
        numbered = re.match(r"(\d+)\. ", line)
        if numbered:
            layer = int(numbered.group(1))
        elif not line.startswith("   "):
            layer = None                       # the list ended
        if layer is not None:
            for name in re.findall(r"`([\w./]+(?:\.py|/))`", line):
                found[name.removesuffix(".py").removesuffix("/").replace("/", ".")] = layer
    return found


def test_the_architecture_layering_is_layers_py() -> None:
    """docs/architecture.md's layer list names what lnbench/layers.py declares, each at its layer (a module that
    becomes a package, or back, keeps its line)."""
    declared = {name.removeprefix("lnbench."): layer for name, layer in layers.LAYERS.items()}
    declared["__init__"] = declared.pop("lnbench")
    assert architecture_layers((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")) == declared
