"""One set-up path for every run command: config → kernel source → preflight → shapes → outputs.

A command's plan starts with `begin` (the config loaded, the command's section read) and calls the steps that
apply to it, in its own order (which check wins when two inputs are bad is each command's, so the steps are
separate calls, not one):

    setup = begin("perf", options.config_path, "perf")
    setup.use_kernel_src(options.kernel_src)        # --kernel-src checked, the config's [backends.NAME] registered
    setup.check_kernels(backends, shapes, dtypes)   # FlyDSL's toolkit and lnbench's kernel widths, before any work
    setup.fit(shapes, bytes_per_element, dev, what) # the shapes fit the device's memory
    outputs = setup.reserve_outputs(csv, json, md)  # the result files made ready, no input overwritten

The backends, FlyDSL's preflight and torch's dtypes are imported by the steps that use them: a command that only loads the config
and reserves outputs (compare, merge) imports no torch.

The side doors, each kept for its reason (issue 56 item 6):
- `merge` makes a bare `Setup("merge")`, without `begin`: it has no --config and reads no setting; its outputs go
  through `Setup.reserve_outputs` like every command's, with the files it joins as inputs.
- `compare` of two modelled results (`compare.modelled`, `perf --device emu` files: an exact diff) makes a bare
  `Setup("compare")`: that path reads no setting (no statistics, so no [compare] run_noise_pct), so its --config is
  neither loaded nor checked and is no input of its outputs there; the timed path loads it (`begin`,
  `compare.plan.build_plan`). compare checks its flags (`compare.plan.check_flags`) once, in the command, before
  it chooses either path, so a bad flag is its one line before any file is read.
- `inspect` checks --kernel-src (`Setup.check_kernel_src`) before `begin` loads the config, then registers the
  config's sources (`register_sources`): its order from before this scaffold, kept so that where both are bad the
  same one of the two is reported (perf, verify and abi-compare load the config first: `use_kernel_src`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from lnbench import settings as cfg
from lnbench import validate
from lnbench.cli_common import Inputs, config_input, prepare_outputs

Outputs = tuple[Path | None, Path | None, Path | None]
"""Where a command's CSV (None with --no-csv), JSON and Markdown summary go (None: not asked for)."""


@dataclass
class Setup:
    """A run command's set-up: its name (the default CSV's stem), the config it loaded and its section, and the
    files it reads (no output may overwrite one)."""

    command: str
    config_path: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Path | None] = field(default_factory=dict)

    def use_kernel_src(self, kernel_src: Path | None) -> None:
        """--kernel-src checked and set (check_kernel_src), then the config's kernel sources registered."""
        self.check_kernel_src(kernel_src)
        self.register_sources()

    @staticmethod
    def check_kernel_src(kernel_src: Path | None) -> None:
        """--kernel-src: a folder that must exist (a usage error otherwise), passed on to worker processes."""
        from lnbench.backends import set_kernel_src

        set_kernel_src(kernel_src)

    def register_sources(self) -> None:
        """The config's [backends.NAME] kernel sources registered, for this process and its workers."""
        from lnbench.backends import configure_sources

        configure_sources(self.config)

    @staticmethod
    def check_toolkit(required: bool = False) -> None:
        """FlyDSL's linker toolkit can be set up (`required`: and is there; preflight.toolkit)."""
        from lnbench.flydsl import preflight

        preflight.toolkit(required=required)

    @staticmethod
    def check_widths(shapes: Iterable[tuple[int, int]], dtypes: Iterable[str]) -> None:
        """Every width N of `shapes` has a kernel plan of lnbench's own FlyDSL kernels (preflight.kernel_widths)."""
        from lnbench.flydsl import preflight

        preflight.kernel_widths([n for _, n in shapes], list(dtypes))

    def check_kernels(self, backends: Sequence[str], shapes: Iterable[tuple[int, int]],
                      dtypes: Iterable[str]) -> None:
        """Before any worker starts: the toolkit where a backend runs FlyDSL kernels (lnbench's or a kernel
        source's), then the widths where one is lnbench's own (verify's and perf's order)."""
        from lnbench.backends import OWN_FLYDSL, runs_flydsl

        if any(runs_flydsl(name) for name in backends):
            self.check_toolkit()
        if any(name in OWN_FLYDSL for name in backends):
            self.check_widths(shapes, dtypes)

    @staticmethod
    def fit(shapes: Iterable[tuple[int, int]], bytes_per_element: float, device: Any, what: str,
            fraction: float = 1.0) -> None:
        """Every shape fits `fraction` of the device's free memory at `bytes_per_element` (validate.shapes_fit)."""
        validate.shapes_fit(shapes, bytes_per_element, device, what, fraction)

    def reserve_outputs(self, csv_path: Path | None, json_path: Path | None, md_path: Path | None = None,
                        inputs: Inputs | None = None, config_last: bool = False) -> Outputs:
        """The command's result files made ready before any work (cli_common.prepare_outputs): none may be one
        of the files it reads, the config and then `inputs` (`config_last`: `inputs` first, compare's order)."""
        read = {**(inputs or {}), **self.inputs} if config_last else {**self.inputs, **(inputs or {})}
        return prepare_outputs(self.command, csv_path, json_path, read or None, md_path)


def begin(command: str, config_path: Path | None, section: str | None = None,
          config_is_input: bool = True) -> Setup:
    """Load the config (--config, else $LNBENCH_CONFIG, over the packaged defaults; a bad file is a usage error)
    and read its `section`. `config_is_input`: the config file is an input no output may overwrite."""
    config = cfg.load_config(config_path)
    table = cfg.section(config, section) if section else {}
    return Setup(command, config_path, config, table, config_input(config_path) if config_is_input else {})


def element_bytes(tensors: int, dtypes: Iterable[str]) -> int:
    """Bytes per element of a shape holding `tensors` tensors of M×N in the widest of `dtypes`."""
    from lnbench.constants import DTYPES

    return tensors * max(DTYPES[d].itemsize for d in dtypes)
