"""`lnbench --help` (and every `lnbench CMD --help`, `--version`) without importing torch, pandas or numpy.

Importing torch alone takes seconds, and every subcommand module imports it (or pandas) at its top, while help
needs only the click declarations. So when the command line only asks for help, `install` puts a stand-in in
front of those heavy packages: importing one gives an inert module whose every attribute, call, item or
operation is another stand-in, enough for the module-level code of lnbench's modules (dtype tables, base
classes, decorators) to run. If the command line turns out to run a command after all (`--shapes --help`
makes `--help` a value), `cli_common.guarded` re-executes the process without the stand-ins
(LNBENCH_FAST_HELP=0 turns them off too). tests/test_fast_help.py checks every help text against the real one.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from pathlib import Path
from typing import Any, Literal, Sequence

HEAVY: tuple[str, ...] = ("torch", "pandas", "numpy", "flydsl", "triton", "liger_kernel", "tinygrad", "matplotlib",
                          "scipy", "msgpack")
HELP_WORDS = ("-h", "--help", "--version")
OFF = "LNBENCH_FAST_HELP"


class _Anything:
    """An inert value: attributes, calls, items, arithmetic and comparisons give stand-ins; it iterates as empty,
    is false, formats as its dotted name, and can be a base class (it then stands for `object`)."""

    _name: str                                 # set in __init__ (past the no-op __setattr__)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str) -> "_Anything":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self._name}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Anything):
            return args[0]                     # used as a plain decorator: keep the function
        return _Anything(f"{self._name}()")

    def __getitem__(self, key: Any) -> "_Anything":
        return _Anything(f"{self._name}[]")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return self._name

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return self._name

    def __hash__(self) -> int:
        return hash(self._name)

    def __eq__(self, other: Any) -> bool:
        return other is self

    def __contains__(self, item: Any) -> bool:
        return False

    def __enter__(self) -> "_Anything":
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        return False


def _operator(name: str):
    def op(self: _Anything, *args: Any) -> _Anything:
        return _Anything(f"{self._name}.{name}")
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift",
              "matmul", "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "rand", "ror", "rxor",
              "neg", "pos", "abs", "invert", "lt", "le", "gt", "ge"):
    setattr(_Anything, f"__{_name}__", _operator(_name))


class _StubModule(types.ModuleType):
    """A heavy package's stand-in: unknown attributes are _Anything (submodules are imported as stubs too)."""

    __version__: str

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self.__name__}.{name}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname.split(".")[0] in HEAVY:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []                  # a package: `import torch.nn.functional` finds stubs below it
        module.__version__ = "0"
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_FINDER = _StubFinder()


def wants_only_help(argv: Sequence[str]) -> bool:
    """The command line of the lnbench entry point asks only for help or the version (or is bare)."""
    if os.environ.get(OFF, "").strip() in ("0", "false", "no", "off") or not argv:
        return False
    entry = Path(argv[0])            # the console script, or `python -m lnbench.cli` (argv[0] is cli.py's path)
    if entry.name != "lnbench" and not (entry.name == "cli.py" and entry.parent.name == "lnbench"):
        return False
    return len(argv) == 1 or any(word in HELP_WORDS for word in argv[1:])


def install(argv: Sequence[str] | None = None) -> bool:
    """Put the stand-ins in front of the heavy packages when `argv` only asks for help and none of them is
    imported yet; True when they were installed."""
    argv = sys.argv if argv is None else argv
    if not wants_only_help(argv) or any(name in sys.modules for name in HEAVY):
        return False
    sys.meta_path.insert(0, _FINDER)
    return True


def active() -> bool:
    return _FINDER in sys.meta_path


def rerun_for_real() -> None:
    """The command line ran a command after all: start again, with the real packages."""
    sys.stdout.flush()
    sys.stderr.flush()
    env = {**os.environ, OFF: "0"}
    os.execve(sys.executable, [sys.executable, "-m", "lnbench.cli", *sys.argv[1:]], env)
