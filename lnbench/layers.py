"""lnbench's layering: each folder (package) or loose module in one numbered layer; a module may import its own
layer or lower ones, never a higher one (tests/test_layering.py checks every import, top level, inside functions
and under `if TYPE_CHECKING:`; and that no two modules, and no two folders, import each other in a circle).

    0  leaf utilities     version, errors, constants, validate, results (the result model and the verdict words),
                          machine (cache folder, install hints, ROCm, zig, which checkout and command line ran),
                          output (tables, result files, file claims, the kept-rows fallback, Markdown)
    1  configuration      settings: the packaged defaults, a user file, shapes and dtypes, backend tables; modelled:
                          the Instinct targets' published figures and the floors modelled from an emulated profile
    2  emulator           emu: the emulated CDNA device
    3  runs               run: the Device value commands ask questions of (device, metadata), process lifetime
                          (processes), the one worker mechanism (pool; workers: one spec per worker in timed
                          turns; units: a queue of units), progress and estimates, --devices (gpus), --shard (shard)
    4  kernels            flydsl: kernel math, launch geometry, launch/ABI, inspection, pre-flight checks
    5  backends           backends (the registry, every backend, the fp64 reference and the pass rule)
    6  measurement        measure: protocol, timing, kernel timer, statistics, machine load, host lock
    7  command plumbing   cli_common (the shared options, the guarded command, writing outputs), scaffold (a run
                          command's set-up and its result sink), store
    8  commands           one package per command (its click command in `command.py`): perf (and peak), verify,
                          abi (abi-compare), compare, plot, merge, inspect, config, env, history (store,
                          history): side by side, none
                          importing another's internals (COMMANDS, SHARED)
    9  entry point        cli
   10  package API        lnbench itself (its __init__: the public `lnbench.layernorm` over the FlyDSL backend, and
                          __version__ from lnbench.version, the leaf every other module reads it from)

A folder's modules all stand in the folder's layer: LAYERS names folders and loose modules only.
"""
from __future__ import annotations

#: folder or loose module -> layer (a module inside a folder has the folder's layer)
LAYERS: dict[str, int] = {
    "lnbench.version": 0, "lnbench.layers": 0, "lnbench.errors": 0, "lnbench.constants": 0, "lnbench.validate": 0,
    "lnbench.results": 0, "lnbench.machine": 0, "lnbench.output": 0,
    "lnbench.settings": 1, "lnbench.modelled": 1,
    "lnbench.emu": 2,
    "lnbench.run": 3,
    "lnbench.flydsl": 4,
    "lnbench.backends": 5,
    "lnbench.measure": 6,
    "lnbench.cli_common": 7, "lnbench.scaffold": 7, "lnbench.store": 7,
    "lnbench.perf": 8, "lnbench.verify": 8, "lnbench.abi": 8, "lnbench.compare": 8, "lnbench.plot": 8,
    "lnbench.merge": 8, "lnbench.inspect": 8, "lnbench.config": 8, "lnbench.env": 8, "lnbench.history": 8,
    "lnbench.cli": 9,
    "lnbench": 10,      # the package's public API (lnbench.layernorm, over the FlyDSL backend); its version: lnbench.version
}

#: the commands of layer 8: none imports another's modules (what they share lives in a lower layer)
COMMANDS: tuple[str, ...] = ("lnbench.perf", "lnbench.verify", "lnbench.abi", "lnbench.compare", "lnbench.plot",
                             "lnbench.merge", "lnbench.inspect", "lnbench.config", "lnbench.env",
                             "lnbench.history")

#: (importer prefix, imported module) -> why one command may use that module of another
SHARED: dict[tuple[str, str], str] = {
    ("lnbench.compare", "lnbench.perf.protocol"):
        "perf's protocol settings (PerfProtocol.MEASUREMENT): the ones two perf runs must agree in to be compared",
    ("lnbench.merge", "lnbench.compare.match"):
        "what makes two result files comparable (device_name, protocol), the rule compare matches runs by",
    ("lnbench.merge", "lnbench.perf.aggregate"):
        "perf's speed-up rule (add_speedups): a merged result's speed-ups pair a backend with the baseline's case "
        "in another part",
}

#: (module, imported module) -> why an upward import is allowed
EXEMPT: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int | None:
    """The layer of a dotted lnbench module name: its folder's, or its own as a loose module (None when neither is
    declared: the package's own entry, `lnbench`, is its __init__ alone)."""
    if module == "lnbench":
        return LAYERS[module]
    name = module
    while "." in name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def command_of(module: str) -> str | None:
    """The command package `module` belongs to, else None."""
    return next((c for c in COMMANDS if module == c or module.startswith(c + ".")), None)
