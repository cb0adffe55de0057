"""Generated command lines and config files (hypothesis) against the CLI contract (issue 14).

For `verify`, `perf`, `abi-compare`, `inspect` and `compare`, each case draws options (and often a config file,
given by --config or $LNBENCH_CONFIG, and output paths) from pools of good and bad values; the oracle knows which
draws make the line a usage error. Every case must:

* exit 2 when (and only when) the line holds bad input, with one `lnbench: error:` line (or click's own usage
  message for a value click itself cannot parse), never an internal error or a traceback;
* exit 0 on good input, or 1 where a good line may legitimately fail (a backend that cannot run here, a gate,
  the self-test), with well-formed result files: the CSV readable, the JSON strict (no NaN) and row for row
  the CSV, written where asked (through a symlink to its target);
* leave no result and no temporary file behind when it exits 2.

How long a line takes is no part of the contract (it is the machine's): what keeps a line small is the validation
of every count and time option (upper bounds: tests/test_hardening_issue14.py), and a real process gets a limit
that only ends a hung one.

Cheap by construction: tiny shapes, `--device cpu`, the torch backend and stand-in ABI pairs, one or two
worker processes of one or two runs of a few calls, abi-compare's workers in-process. Default (CI): a fixed
seed (derandomize) and about 260 command lines in all (DEFAULT_TOTAL = 330 shared out, perf's and inspect's
lines cut to a third: COSTLY_SHARE; 8 of them in a real process), plus 4 × 50 direct calls of the validation
layer (perf's worker processes are most of the time). LNBENCH_FUZZ_EXAMPLES=2000 runs about 2000 command lines (and 4 × 300 calls), randomly seeded
(a failure prints how to reproduce it): about 5 minutes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lnbench import settings as cfg
from lnbench import validate
from lnbench.errors import LnbenchUsageError
from cli_helpers import invoke

#: command lines in all in the default run; LNBENCH_FUZZ_EXAMPLES overrides (the long run)
DEFAULT_TOTAL = 330
LONG_TOTAL = int(os.environ.get("LNBENCH_FUZZ_EXAMPLES", "0") or 0)
#: a generated case in a real process still running after this is hung (the limit ends the test; it judges no speed)
HANG_LIMIT_S = 600.0
FLYDSL = importlib.util.find_spec("flydsl") is not None
#: the toolkit folder comes from the environment (no ROCm install): a file there is an environment error
TOOLKIT_FROM_ENV = FLYDSL and not (Path(os.environ.get("ROCM_PATH") or "/opt/rocm") / "llvm" / "bin" / "ld.lld").exists()

settings.register_profile("lnbench-fuzz", derandomize=not LONG_TOTAL, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


#: in the default run, a test whose lines start worker processes or compile kernels draws this share of its cases
#: (perf: ~3 s a line, most of it the workers' torch import; inspect: ~2 s, FlyDSL compiles of new shapes); the
#: long run (LNBENCH_FUZZ_EXAMPLES) draws them all
COSTLY_SHARE = 1 / 3


def fuzz(share: float, costly: bool = False) -> settings:
    """Settings of one generated test: its `share` of the cases (at least 2), on the lnbench-fuzz profile;
    `costly`: in the default run only COSTLY_SHARE of that."""
    share *= COSTLY_SHARE if costly and not LONG_TOTAL else 1.0
    return settings(settings.get_profile("lnbench-fuzz"), max_examples=max(2, round((LONG_TOTAL or DEFAULT_TOTAL) * share)))


# ---- what a generated case is --------------------------------------------------------------------------------

@dataclass
class Line:
    """A generated command line: its arguments, environment, config, outputs, and what the oracle expects."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    allow_bad: bool = True                              # False: every draw is a good value
    bad: list[str] = field(default_factory=list)        # why it is a usage error (empty: good input)
    may_fail: list[str] = field(default_factory=list)   # why good input may exit 1
    config: dict[str, dict[str, str]] | None = None     # table -> key -> TOML literal
    config_text: str | None = None                      # a whole (malformed) file instead
    config_via: str = "--config"
    outputs: dict[str, str] = field(default_factory=dict)   # option -> path kind (see OUTPUT_KINDS)
    toolkit_env: str | None = None                      # LNBENCH_TOOLKIT_DIR / XDG_CACHE_HOME at a file
    results_dir_file: bool = False                      # $LNBENCH_RESULTS_DIR is a file

    def flag(self, name: str) -> bool:
        return name in self.args

    def __repr__(self) -> str:
        return (f"lnbench {self.command} {' '.join(repr(a) if not a or ' ' in a else a for a in self.args)} "
                f"outputs={self.outputs} config={self.config or self.config_text!r} via={self.config_via} "
                f"toolkit_env={self.toolkit_env} results_dir_file={self.results_dir_file} bad={self.bad} "
                f"may_fail={self.may_fail}")


def chance(draw, odds: int) -> bool:
    """True with odds 1/odds; False where hypothesis shrinks to (the simplest case is all good, all present)."""
    return draw(st.integers(0, odds - 1)) == odds - 1


def bad_chance(draw, line: Line, odds: int) -> bool:
    """A bad value here, with odds 1/odds, in a line that may hold bad values."""
    return line.allow_bad and chance(draw, odds)


def new_line(draw, command: str, args: list[str] | None = None) -> Line:
    """A line of `command`; a third of them hold only good values."""
    return Line(command, list(args or []), allow_bad=not chance(draw, 3))


def option(draw, line: Line, flag: str, good: list[str], bad: list[str] = (), *, present: int = 2,
           bad_odds: int = 6) -> str | None:
    """Maybe add `flag VALUE`: absent with odds 1/present (0: always there), else a bad value with odds
    1/bad_odds, else a good one. Returns the value (None when absent)."""
    if present and chance(draw, present):
        return None
    if bad and bad_chance(draw, line, bad_odds):
        value = draw(st.sampled_from(list(bad)))
        line.bad.append(f"{flag} {value!r}")
    else:
        value = draw(st.sampled_from(list(good)))
    line.args += [flag, value]
    return value


SHAPES_GOOD = ["2x8", "1x1", "3x5", "1x8,2x8", "2x8,2x8", "2X8", " 2x8", "2 x 8", "3x5,1x1"]
SHAPES_BAD = ["", " ", "2x8,", ",2x8", "2x8,,3x5", "2x", "x8", "0x8", "2x0", "-1x8", "٤x٨", "２x８", "2x8x1", "abc",
              "1x" + "9" * 20, "2*8", "1e1x8", "+2x8", "2.0x8", "0x0", "2x8\n"]
SHAPES_TOO_BIG = ["100000x100000", "1x99999999999"]     # memory: refused before anything is allocated
DTYPES_GOOD = ["f32", "bf16", "f16", "fp32", "half", "bfloat16", "F32", "f32,bf16", "f32,f32"]
DTYPES_BAD = ["", "f8", "int8", "f32,", "ｆ32", "float64", ",f32"]
SEEDS_GOOD = ["0", "7", str(2**62)]
SEEDS_BAD = ["-1", str(2**63), "1.5", "x", "٧"]
EPS_GOOD = ["1e-5", "0.01", "0.001"]
EPS_BAD = ["0", "-1e-5", "nan", "inf", "-inf", "1e308", "abc", "١"]
#: timing flags of perf and abi-compare: always given (a good value keeps every run to a few calls)
TIMING = [("-R", ["1", "2"], ["0", "-1", "1001", "100000000", "x", "٢"]),
          ("--warmup-s", ["0", "0.001"], ["-1", "nan", "inf", "61", "1e308"]),
          ("--min-warmup-calls", ["0", "1"], ["-1", "1000001", "2.5"]),
          ("--target-run-s", ["0", "0.0005"], ["-0.5", "nan", "11", "inf"]),
          ("--min-iters", ["1", "2"], ["0", "-3", "1000001"]),
          ("--max-iters", ["2", "4"], ["0", "1000001", "-1"]),
          ("--worker-timeout-s", ["120"], ["0", "-1", "nan", "1e9"])]
PROCESSES_BAD = ["0", "-1", "65", "100000000", "x"]

#: output path kinds: good ones get results (a symlink's target does), bad ones are refused before any work
OUTPUT_GOOD = ["fresh", "nested", "unicode", "long", "link", "dangling-link"]
OUTPUT_BAD = ["dir", "under-file", "fifo", "proc", "same"]


def outputs(draw, line: Line, options: tuple[str, ...] = ("--csv", "--json")) -> None:
    """Output options, each absent or a path kind; `same` names the file of the option before it."""
    for opt in options:
        if chance(draw, 3):
            continue
        kind = draw(st.sampled_from(OUTPUT_BAD)) if bad_chance(draw, line, 8) else draw(st.sampled_from(OUTPUT_GOOD))
        if kind == "same" and not line.outputs:
            kind = "fresh"
        if kind in OUTPUT_BAD:
            line.bad.append(f"{opt} {kind}")
        line.outputs[opt] = kind
    if "--csv" not in line.outputs and bad_chance(draw, line, 12):
        line.results_dir_file = True
        line.bad.append("$LNBENCH_RESULTS_DIR is a file")


# ---- config files --------------------------------------------------------------------------------------------

#: (table, key, good TOML literals, bad ones): checked whenever a file is loaded, whichever command reads it
LOAD_CHECKED = [
    ("verify", "seed", ["1", "99"], ["-1", "1.5", '"7"']),
    ("verify", "eps", ["[1e-5, 1e-2]", "[1e-3]"], ["[0]", "[inf]", "[1e-5, nan]", '[1e-5, "x"]', "1e-5", "[]",
                                                  "[1e-3, 1e-3]"]),
    # names and shapes: checked as the file loads (config show refuses them too), whatever flag overrides them
    ("verify", "dtypes", ['["f32"]', '["bf16", "f32"]'], ["[]", '["f8"]', '[""]']),
    ("perf", "dtypes", ['["f32"]'], ["[]", '["f8"]']),
    ("perf", "modes", ['["hot"]'], ["[]", '["warm"]']),
    ("abi_compare", "dtypes", ['["f32"]'], ["[]", '["f8"]']),
    ("abi_compare", "metrics", ['["direct"]'], ["[]", '["bogus"]']),
    ("abi_compare", "dgamma_strategy", ['"atomic"', '"deterministic"'], ['"bogus"', '""']),
    ("perf.shape_sets", "spare", ['["2x8"]'], ['["0x8"]', "[]"]),
    ("verify.tolerance", "k", ["2.0", "1", "3.0"], ["nan", "inf", "-1", "1e300", '"2"']),
    ("verify.tolerance", "fp32_ulps", ["4.0", "8"], ["-inf", "-1", "1e9"]),
    ("verify.tolerance.atol.f32", "y", ["1e-5", "1e-4"], ["inf", "-1e-5", "11"]),
    ("verify.tolerance.atol.bf16", "dx", ["1.6e-2"], ["nan", "[1e-2]"]),
    ("perf", "processes", ["1", "3"], ["0", "65", "3.0", '"3"']),
    ("perf", "runs", ["5"], ["0", "1001", "100000000"]),
    ("perf", "warmup_s", ["0.2", "0"], ["-1", "inf", "61"]),
    ("perf", "min_iters", ["150", "2000"], ["0"]),             # 2000 > max_iters: the flags always override it
    ("perf", "max_iters", ["1000", "10"], ["0", "10000001"]),
    ("perf", "cold_factor", ["3.0"], ["0", "1e308", "nan"]),
    ("perf", "llc_mib", ["0.0", "16"], ["-1", "inf"]),
    ("perf", "cold_mem_fraction", ["0.4"], ["0", "0.95", "nan"]),
    ("perf", "eps", ["1e-5"], ["0", "inf", "[1e-5]"]),
    ("perf", "worker_timeout_s", ["600.0"], ["0", "1e9"]),
    ("abi_compare", "bootstrap", ["4000", "200"], ["0", "99", "1000001", "4000.5"]),
    ("abi_compare", "confidence", ["0.95", "0.9"], ["1.5", "nan", "0", "1"]),
    ("abi_compare", "stats_seed", ["0", "5"], ["-1"]),
    ("abi_compare", "planted_delay_us", ["20.0", "0"], ["-1", "inf", "1e7"]),
    ("abi_compare", "check_elements", ["65536"], ["0", "-5", "1e3"]),
    ("compare", "threshold_pct", ["3.0", "0"], ["-1", "nan"]),
    ("compare", "run_noise_pct", ["1.0", "0"], ["-1", "nan", "101"]),
    ("compare", "bootstrap", [], ["4000"]),                    # gone with the run bootstrap: an unknown key
    ("perf", "if_loaded", ['"warn"'], []),             # refuse would depend on this machine's load
    ("compare", "confidence", ["0.95"], ["1.5"]),
    ("verify", "seeed", [], ["1"]),                             # unknown keys and tables
    ("perff", "eps", [], ["1e-5"]),
]
#: (command, table, key, good, bad, flags that override it): checked when that command uses the value
USE_CHECKED = [
    ("perf", "perf", "backends", ['["torch"]'], ["[]", '["bogus"]'], ("--backend",)),
    ("perf", "perf", "baseline", ['"torch"'], ['"bogus"', '""'], ("--baseline",)),
    ("abi-compare", "abi_compare", "pair", ['"torch-entry"'], ['"bogus"'], ("--pair",)),
]
MALFORMED = ["[verify\nk = ", "[verify]\nseed = = 3\n", "\x00"]


def config(draw, line: Line) -> None:
    """Maybe a config file for the line (drawn after its arguments: a flag overrides the file's value)."""
    if not chance(draw, 3):
        return
    line.config_via = draw(st.sampled_from(["--config", "LNBENCH_CONFIG"]))
    if bad_chance(draw, line, 20):
        line.config_text = draw(st.sampled_from(MALFORMED))
        line.bad.append("malformed config")
        return
    tables: dict[str, dict[str, str]] = {}
    for _ in range(draw(st.integers(1, 3))):
        table, key, good, bad = draw(st.sampled_from(LOAD_CHECKED))
        if key in tables.get(table, {}) or not (good or line.allow_bad):
            continue
        if not good or (bad and bad_chance(draw, line, 4)):
            value = draw(st.sampled_from(bad))
            line.bad.append(f"config [{table}] {key} = {value}")
        else:
            value = draw(st.sampled_from(good))
        tables.setdefault(table, {})[key] = value
    uses = [u for u in USE_CHECKED if u[0] == line.command]
    if uses and draw(st.booleans()):
        _, table, key, good, bad, flags = draw(st.sampled_from(uses))
        if key in tables.get(table, {}) or not (good or line.allow_bad):
            line.config = tables
            return
        if not good or (bad and bad_chance(draw, line, 3)):
            value = draw(st.sampled_from(bad))
            if not any(line.flag(f) for f in flags):
                line.bad.append(f"config [{table}] {key} = {value} (used)")
        else:
            value = draw(st.sampled_from(good))
        tables.setdefault(table, {})[key] = value
    line.config = tables


def render_toml(tables: dict[str, dict[str, str]]) -> str:
    return "".join(f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) for table, keys in tables.items())


# ---- the commands --------------------------------------------------------------------------------------------

def timing(draw, line: Line, processes: list[str]) -> None:
    option(draw, line, "-P", processes, PROCESSES_BAD, present=0, bad_odds=10)
    for flag, good, bad in TIMING:
        option(draw, line, flag, good, bad, present=0, bad_odds=16)


@st.composite
def verify_lines(draw) -> Line:
    line = new_line(draw, "verify", ["--device", "cpu"])
    if bad_chance(draw, line, 16):
        line.args[-1] = draw(st.sampled_from(["bogus", "", "emu:gfx90a", "cpu,cpu"]))
        line.bad.append(f"--device {line.args[-1]!r}")
    backends = option(draw, line, "--backend", ["torch", "auto", "auto,torch", "torch,auto", "torch,torch", "liger"],
                      ["", "bogus", "torch,", "Torch", "auto,,torch"], present=4)
    if backends and "liger" in backends:
        line.may_fail.append("liger cannot run on the CPU")
    option(draw, line, "--dtype", DTYPES_GOOD, DTYPES_BAD)
    shapes = option(draw, line, "--shapes", SHAPES_GOOD, SHAPES_BAD + SHAPES_TOO_BIG, present=3)
    option(draw, line, "--seed", SEEDS_GOOD, SEEDS_BAD, present=3)
    if shapes in SHAPES_GOOD and chance(draw, 10):
        line.args.append("--self-test")
        line.may_fail.append("self-test on tiny shapes")
        if "--backend" in line.args:   # the self-test checks planted bugs, not a backend
            line.bad.append("--backend with --self-test")
    if draw(st.booleans()):
        line.args.append("-q")
    outputs(draw, line)
    config(draw, line)
    if shapes is None:      # a shape set of the config's (the packaged ones take seconds), or a missing one
        custom_shape_set(draw, line)
    return line


def custom_shape_set(draw, line: Line) -> None:
    """`[verify.shape_sets] mine = [...]`, chosen by --shape-set or the config's shape_set; or a set that is not
    there (`--shape-set nope`)."""
    if bad_chance(draw, line, 6):
        value = draw(st.sampled_from(["", "nope"]))
        line.args += ["--shape-set", value]
        line.bad.append(f"--shape-set {value!r}")
        return
    good, bad = ['["2x8"]', '["1x1", "3x5"]', '["2x8", "2X8"]'], ["[]", '["2x8,"]', '["٤x٨"]', '["0x8"]', '[""]']
    if bad_chance(draw, line, 5):
        shapes = draw(st.sampled_from(bad))
        line.bad.append(f"shape set mine = {shapes}")
    else:
        shapes = draw(st.sampled_from(good))
    if line.config is None and line.config_text is None:
        line.config = {}
        line.config_via = draw(st.sampled_from(["--config", "LNBENCH_CONFIG"]))
    if line.config is None:
        return                                          # a malformed file: already bad
    line.config.setdefault("verify.shape_sets", {})["mine"] = shapes
    if draw(st.booleans()):
        line.args += ["--shape-set", "mine"]
    else:
        line.config.setdefault("verify", {})["shape_set"] = '"mine"'



@st.composite
def perf_lines(draw) -> Line:
    line = new_line(draw, "perf", ["--device", "cpu", "--llc-mib", "0.01"])
    if bad_chance(draw, line, 16):
        line.args[1] = draw(st.sampled_from(["emu", "null", "bogus"]))
        line.bad.append(f"--device {line.args[1]}")
    if bad_chance(draw, line, 16):
        line.args[3] = draw(st.sampled_from(["-1", "inf", "1e12"]))
        line.bad.append(f"--llc-mib {line.args[3]}")
    backends = option(draw, line, "--backend", ["torch", "auto", "torch,auto", "liger"], ["", "bogus", "torch,"],
                      present=3)
    if backends == "liger":
        line.may_fail.append("liger cannot run on the CPU")
    option(draw, line, "--op", ["fwd", "bwd", "fwd-nostats", "fwd+bwd", "fwd,bwd"], ["", "back", "fwd,", "fwd+"],
           present=0, bad_odds=12)
    option(draw, line, "--mode", ["hot", "wall", "cold"], ["", "warm", "hot,"], present=0, bad_odds=12)
    option(draw, line, "--dtype", ["f32", "bf16"], DTYPES_BAD, present=0, bad_odds=12)
    option(draw, line, "--shapes", ["2x8", "1x1", "3x5"], SHAPES_BAD + SHAPES_TOO_BIG, present=0, bad_odds=10)
    timing(draw, line, ["1", "1", "1", "2"])
    option(draw, line, "--cold-factor", ["1", "3"], ["0", "1e308", "nan", "-1", "101"], present=3)
    option(draw, line, "--eps", EPS_GOOD, EPS_BAD, present=3)
    option(draw, line, "--seed", SEEDS_GOOD, SEEDS_BAD, present=3)
    option(draw, line, "--baseline", ["torch", "liger"], ["", "bogus"], present=3)
    option(draw, line, "--timer", ["stream"], ["kernel", "bogus"], present=3)
    if draw(st.booleans()):
        line.args.append(draw(st.sampled_from(["--kernel-timer", "--no-kernel-timer"])))
    line.args.append("-q")
    outputs(draw, line)
    config(draw, line)
    return line


@st.composite
def abi_lines(draw) -> Line:
    line = new_line(draw, "abi-compare", ["--device", "cpu", "--in-process"])
    pair = option(draw, line, "--pair", ["torch-entry", "planted-slow", "flydsl"], ["bogus"], present=4)
    part = draw(st.sampled_from(["--runtime-only", "--runtime-only", "--runtime-only", "--static-only", "none"]))
    if bad_chance(draw, line, 12):
        part = "both"
    if part == "both":
        line.args += ["--runtime-only", "--static-only"]
        line.bad.append("--runtime-only with --static-only")
    elif part != "none":
        line.args.append(part)
    static = part in ("--static-only", "none")
    if static:
        line.args += ["--no-execute"]
        option(draw, line, "--arch", ["gfx942"], ["", "gfx90a"], present=0, bad_odds=10)
    if bad_chance(draw, line, 16):
        line.args[1] = draw(st.sampled_from(["bogus", "null"]))
        if line.args[1] == "bogus" or (pair or "flydsl") != "flydsl":
            line.bad.append(f"--device {line.args[1]}")
        else:
            line.args[1] = "cpu"
    option(draw, line, "--op", ["fwd", "bwd", "fwd-nostats", "fwd,bwd"], ["", "fwd+bwd", "x"], present=0,
           bad_odds=12)
    # the runtime part's options (--metric, the protocol, --seed) with --static-only are refused
    runtime_options = part != "--static-only" or bad_chance(draw, line, 12)
    if runtime_options and part == "--static-only":
        line.bad.append("runtime options with --static-only")
    metric = None
    if runtime_options:
        metric = option(draw, line, "--metric", ["direct", "wrapper", "device", "direct,wrapper"],
                        ["", "bogus", "direct,"], present=0, bad_odds=12)
    option(draw, line, "--dtype", ["f32", "bf16"] if static else DTYPES_GOOD, DTYPES_BAD, present=0, bad_odds=12)
    option(draw, line, "--shapes", ["2x8", "2x16", "2x8,2x16", "4x8,4x8"],
           SHAPES_BAD + ([] if static else SHAPES_TOO_BIG), present=0, bad_odds=10)
    if runtime_options:
        timing(draw, line, ["1", "2"])
    fail = option(draw, line, "--fail-if-slower", ["5", "1000"], ["nan", "-1", "inf", "1e7"], present=3)
    if fail:
        line.may_fail.append("--fail-if-slower on a noisy CPU")
    delay = option(draw, line, "--planted-delay-us", ["0", "5"], ["-1", "inf", "nan", "1e7"], present=3)
    option(draw, line, "--eps", EPS_GOOD, EPS_BAD, present=3)
    if runtime_options:
        option(draw, line, "--seed", SEEDS_GOOD, SEEDS_BAD, present=3)
    if draw(st.booleans()):
        line.args.append("-q")
    outputs(draw, line)
    config(draw, line)
    # options that would do nothing are refused (lnbench.abi.command.refuse_idle_options)
    effective_pair = pair or (line.config or {}).get("abi_compare", {}).get("pair", '"flydsl"').strip('"')
    if part == "--runtime-only" and (effective_pair == "flydsl" or metric == "device"):
        line.may_fail.append("nothing timed on the CPU (flydsl needs a ROCm GPU, device time a GPU): exit 1")
    if fail is not None and part == "--static-only":
        line.bad.append("--fail-if-slower with --static-only")
    if delay is not None and (part == "--static-only" or effective_pair != "planted-slow"):
        line.bad.append(f"--planted-delay-us with {part} / pair {effective_pair}")
    if static and TOOLKIT_FROM_ENV:
        if bad_chance(draw, line, 10):
            line.toolkit_env = draw(st.sampled_from(["LNBENCH_TOOLKIT_DIR", "XDG_CACHE_HOME"]))
            line.bad.append(f"${line.toolkit_env} is a file")
    return line


@st.composite
def inspect_lines(draw) -> Line:
    line = new_line(draw, "inspect")
    option(draw, line, "--arch", ["gfx942", "gfx942,gfx950"], ["", "gfx90a", "gfx942,"], present=3)
    option(draw, line, "--abi", ["pointer", "tensor"], ["", "ptr"], present=3)
    ops = option(draw, line, "--op", ["fwd", "fwd-nostats", "bwd", "fwd,bwd"], ["", "fwd+bwd"], present=3)
    option(draw, line, "--dtype", ["bf16", "f32"], DTYPES_BAD, present=3)
    option(draw, line, "--shapes", ["2x8", "1x16", "2x8,3x16", "2x8,2x8"], SHAPES_BAD + ["1x600000000"], present=0)
    if option(draw, line, "--dgamma", ["deterministic", "atomic"], ["bogus"], present=3) and ops is not None \
            and "bwd" not in ops.split(","):
        line.bad.append("--dgamma without bwd among --op")
    if draw(st.booleans()):
        line.args.append("-q")
    outputs(draw, line)
    if TOOLKIT_FROM_ENV:
        if bad_chance(draw, line, 10):
            line.toolkit_env = draw(st.sampled_from(["LNBENCH_TOOLKIT_DIR", "XDG_CACHE_HOME"]))
            line.bad.append(f"${line.toolkit_env} is a file")
    if not FLYDSL:
        line.bad.append("flydsl is not installed")
    return line


RESULT_FILES_GOOD = [("perf-a", "perf-b"), ("perf-a", "perf-a"), ("abi-a", "abi-a")]
RESULT_FILES_BAD = [("perf-a", "abi-a"), ("empty", "perf-a"), ("perf-a", "truncated"), ("not-json", "perf-a"),
                    ("perf-a", "missing"), ("not-lnbench", "perf-b"), ("csv", "perf-a")]


@st.composite
def compare_lines(draw) -> Line:
    line = new_line(draw, "compare")
    if bad_chance(draw, line, 6):
        files = draw(st.sampled_from(RESULT_FILES_BAD))
        line.bad.append(f"result files {files}")
    else:
        files = draw(st.sampled_from(RESULT_FILES_GOOD))
    line.args += [f"@{name}" for name in files]
    option(draw, line, "--threshold", ["3", "0", "50"], ["nan", "-1", "inf", "1e7"], present=3)
    if option(draw, line, "--fail-if-slower", ["5", "100"], ["nan", "-1", "inf", "1e7"], present=3):
        line.may_fail.append("--fail-if-slower on two noisy runs")
    if draw(st.booleans()):
        line.args.append("--force")
    line.args.append("-q")
    outputs(draw, line, ("--csv", "--json", "--md"))
    config(draw, line)
    return line


# ---- running a case and checking the contract ----------------------------------------------------------------

def _make_output(kind: str, folder: Path, option_name: str, previous: Path | None) -> tuple[str, Path | None]:
    """(the argument, the file the result must end up in) for an output path kind; None where none must."""
    suffix = {"--csv": ".csv", "--json": ".json", "--md": ".md"}[option_name]
    stem = option_name.strip("-")
    if kind == "fresh":
        path = folder / f"out{suffix}"
        return str(path), path
    if kind == "nested":
        path = folder / "new" / "deeper" / f"out{suffix}"
        return str(path), path
    if kind == "unicode":
        path = folder / f"résultats ü 結果 {stem}{suffix}"
        return str(path), path
    if kind == "long":
        path = folder / ("l" * (250 - len(suffix) - len(stem)) + stem + suffix)
        return str(path), path
    if kind == "link":
        target = folder / "targets" / f"t-{stem}{suffix}"
        target.parent.mkdir(exist_ok=True)
        target.write_text("old\n")
        (folder / f"link-{stem}{suffix}").symlink_to(target)
        return str(folder / f"link-{stem}{suffix}"), target
    if kind == "dangling-link":
        (folder / f"dangling-{stem}{suffix}").symlink_to(folder / "not-yet" / f"d-{stem}{suffix}")
        return str(folder / f"dangling-{stem}{suffix}"), folder / "not-yet" / f"d-{stem}{suffix}"
    if kind == "dir":
        (folder / f"a-dir-{stem}").mkdir()
        return str(folder / f"a-dir-{stem}"), None
    if kind == "under-file":
        (folder / f"a-file-{stem}").write_text("")
        return str(folder / f"a-file-{stem}" / f"out{suffix}"), None
    if kind == "fifo":
        os.mkfifo(folder / f"fifo-{stem}")
        return str(folder / f"fifo-{stem}"), None
    if kind == "proc":
        return f"/proc/lnbench-fuzz-{os.getpid()}{suffix}", None
    if kind == "same":
        assert previous is not None
        return str(previous), None
    raise AssertionError(kind)


@dataclass
class Prepared:
    args: list[str]
    env: dict[str, str]
    expected: dict[str, Path]          # option -> file that must hold the result (exit 0/1)
    untouched: list[Path]              # files that must not exist after an exit 2
    results_dir: Path


def prepare(line: Line, folder: Path, results: dict[str, Path]) -> Prepared:
    """Make the case's files (outputs, config, result files to compare) under `folder`."""
    results_dir = folder / "results"
    env = {"LNBENCH_RESULTS_DIR": str(results_dir), "LNBENCH_CONFIG": "", "OMP_NUM_THREADS": "1"}
    if line.results_dir_file:
        results_dir.write_text("")
    args = [str(results[a[1:]]) if a.startswith("@") else a for a in line.args]
    expected: dict[str, Path] = {}
    untouched: list[Path] = []
    previous: Path | None = None
    for opt, kind in line.outputs.items():
        arg, final = _make_output(kind, folder, opt, previous)
        previous = Path(arg)
        args += [opt, arg]
        if final is not None and not line.bad:
            expected[opt] = final
        if final is not None and not final.exists():
            untouched.append(final)
    if line.config is not None or line.config_text is not None:
        path = folder / "config.toml"
        path.write_text(line.config_text if line.config_text is not None else render_toml(line.config))
        if line.config_via == "--config" and line.command != "inspect":
            args += ["--config", str(path)]
        else:
            env["LNBENCH_CONFIG"] = str(path)
    if line.toolkit_env:
        blocker = folder / "a-file-for-the-toolkit"
        blocker.write_text("")
        env.update({"LNBENCH_TOOLKIT_DIR": "", "XDG_CACHE_HOME": ""})
        env[line.toolkit_env] = str(blocker)
    return Prepared(args, env, expected, untouched, results_dir)


def default_result(command: str, args: list[str], results_dir: Path) -> Path:
    """The one default CSV a run wrote under $LNBENCH_RESULTS_DIR."""
    prefix = "selftest" if "--self-test" in args else command
    found = list(results_dir.glob(f"{prefix}-*.csv")) if results_dir.is_dir() else []
    assert len(found) == 1, f"expected one default {prefix} CSV, found {found}"
    return found[0]


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"JSON holds {name}")
    return json.loads(text, parse_constant=refuse)


def check_contract(line: Line, prep: Prepared, code: int, output: str, folder: Path) -> None:
    """Exit code as the oracle says, no traceback or internal error, files as promised."""
    assert "Traceback" not in output and "internal error" not in output, output
    temporaries = [p for p in folder.rglob(".*.tmp")]
    assert not temporaries, temporaries
    if line.bad:
        assert code == 2, f"bad input ({line.bad}) exited {code}:\n{output}"
        lines = [text for text in output.splitlines() if text.strip()]
        assert len(lines) == 1 and lines[0].startswith("lnbench: error:"), output   # click's parse errors too
        for path in prep.untouched:
            assert not path.exists(), f"{path} written by a run that exited 2"
        if prep.results_dir.is_dir():
            assert not list(prep.results_dir.iterdir()), list(prep.results_dir.iterdir())
        return
    assert code in ((0, 1) if line.may_fail else (0,)), f"good input exited {code}:\n{output}"
    csv_path = prep.expected.get("--csv") or default_result(line.command, line.args, prep.results_dir)
    frame = pd.read_csv(csv_path)
    assert len(frame) >= 1, csv_path
    if "--json" in prep.expected:
        payload = _strict(prep.expected["--json"].read_text())
        assert isinstance(payload["metadata"], dict) and len(payload["data"]) == len(frame)
    if "--md" in prep.expected:
        assert prep.expected["--md"].read_text().strip()


def run_in_process(line: Line, results: dict[str, Path] | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="lnbench-fuzz-") as tmp:
        folder = Path(tmp)
        prep = prepare(line, folder, results or {})
        if line.toolkit_env:
            from lnbench.flydsl.toolkit import toolkit_info
            toolkit_info.cache_clear()
        start = time.monotonic()
        try:
            result = invoke(line.command, *prep.args, env=prep.env)
        finally:
            if line.toolkit_env:
                toolkit_info.cache_clear()
        seconds = time.monotonic() - start
        if os.environ.get("LNBENCH_FUZZ_TRACE"):
            print(f"{seconds:7.2f} s exit {result.exit_code} {line!r}", file=sys.stderr)
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            f"{type(result.exception).__name__}: {result.exception}\n{result.output}"
        check_contract(line, prep, result.exit_code, result.output, folder)


# ---- the generated tests -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def result_files(tmp_path_factory) -> dict[str, Path]:
    """Files for `compare`: two small perf runs and an abi-compare run, and files that are not results."""
    folder = tmp_path_factory.mktemp("compare-inputs")
    perf = ["perf", "--device", "cpu", "--backend", "torch", "--op", "fwd", "--mode", "hot", "--dtype", "f32",
            "--shapes", "2x8,3x5", "-P", "2", "-R", "3", "--warmup-s", "0", "--min-warmup-calls", "1",
            "--target-run-s", "0", "--min-iters", "2", "--max-iters", "4", "--llc-mib", "0.01", "-q"]
    files = {}
    for name in ("perf-a", "perf-b"):
        files[name] = folder / f"{name}.json"
        result = invoke(*perf, "--json", str(files[name]), "--csv", str(folder / f"{name}.csv"),
                        env={"OMP_NUM_THREADS": "1"})
        assert result.exit_code == 0, result.output
    files["abi-a"] = folder / "abi-a.json"
    result = invoke("abi-compare", "--pair", "torch-entry", "--runtime-only", "--device", "cpu",
                    "--in-process", "-P", "2", "-R", "3", "--warmup-s", "0", "--min-warmup-calls",
                    "1", "--target-run-s", "0", "--min-iters", "2", "--max-iters", "4", "--op",
                    "fwd", "--metric", "direct", "--shapes", "2x8,2x16", "-q", "--json",
                    str(files["abi-a"]), "--csv", str(folder / "abi-a.csv"))
    assert result.exit_code == 0, result.output
    text = files["perf-a"].read_text()
    for name, content in (("empty", ""), ("truncated", text[: len(text) // 2]), ("not-json", "not json\n"),
                          ("not-lnbench", '{"rows": []}\n')):
        files[name] = folder / f"{name}.json"
        files[name].write_text(content)
    files["missing"] = folder / "missing.json"
    files["csv"] = folder / "perf-a.csv"
    return files


def generated(name: str, lines: Callable[[], st.SearchStrategy[Line]], share: float, costly: bool = False
              ) -> Callable[[], None]:
    """The test `name`: the command lines `lines` generates, each run in this process against the oracle, on
    fuzz(share, costly)'s settings."""
    def test(line: Line) -> None:
        run_in_process(line)
    test.__name__ = test.__qualname__ = name           # (also hypothesis's key of the test's examples)
    return fuzz(share, costly)(given(lines())(test))


test_generated_verify_lines = generated("test_generated_verify_lines", verify_lines, 0.32)
test_generated_perf_lines = generated("test_generated_perf_lines", perf_lines, 0.17, costly=True)
test_generated_abi_compare_lines = generated("test_generated_abi_compare_lines", abi_lines, 0.23)
test_generated_inspect_lines = generated("test_generated_inspect_lines", inspect_lines, 0.12, costly=True)


@fuzz(0.12)
@given(compare_lines())
def test_generated_compare_lines(result_files, line: Line) -> None:
    run_in_process(line, result_files)


COLUMNS_VALUES = ["", "abc", "80.0", "0", "-3", "٨٠", "100", "99999999999"]


@fuzz(0.025)
@given(st.one_of(verify_lines(), abi_lines()), st.sampled_from(COLUMNS_VALUES))
def test_generated_lines_in_a_real_process(line: Line, columns: str) -> None:
    """The real entry point: exit status through sys.exit, stderr, any $COLUMNS."""
    with tempfile.TemporaryDirectory(prefix="lnbench-fuzz-") as tmp:
        folder = Path(tmp)
        prep = prepare(line, folder, {})
        env = {**os.environ, **prep.env, "COLUMNS": columns}
        out = subprocess.run([sys.executable, "-m", "lnbench.cli", line.command, *prep.args], capture_output=True,
                             text=True, env=env, timeout=HANG_LIMIT_S)
        check_contract(line, prep, out.returncode, out.stdout + out.stderr, folder)
        assert out.returncode != 2 or "lnbench: error:" in out.stderr, out.stderr


# ---- the validation layer on arbitrary input (cheap: many cases) ---------------------------------------------

ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                      st.lists(st.floats(allow_nan=True), max_size=2))


@fuzz(0.15)
@given(st.sampled_from(sorted(validate.LIMITS)), ANY_VALUE)
def test_number_accepts_only_finite_values_in_range(key: str, value: Any) -> None:
    try:
        got = validate.number(value, key)
    except LnbenchUsageError as exc:
        assert key in str(exc)
        return
    rng = validate.LIMITS[key]
    assert not isinstance(got, bool) and isinstance(got, int if rng.integer else (int, float)) and rng.contains(got)


SHAPE_TEXT = st.one_of(st.text(max_size=12), st.text(alphabet="0123456789xX ,\t٤２-+.e", max_size=12))


@fuzz(0.15)
@given(st.lists(SHAPE_TEXT, max_size=3))
def test_shape_lists_parse_or_are_usage_errors(values: list[str]) -> None:
    try:
        shapes = cfg.parse_shapes(values)
    except LnbenchUsageError:
        return
    assert shapes and len(set(shapes)) == len(shapes)
    for m, n in shapes:
        assert 1 <= m <= cfg.MAX_DIM and 1 <= n <= cfg.MAX_DIM
    assert all(text.isascii() for text in values)


@fuzz(0.15)
@given(st.one_of(st.none(), st.text(max_size=8)))
def test_terminal_width_is_sane_or_ignored(text: str | None) -> None:
    width = validate.terminal_width(text)
    assert width is None or (validate.TERMINAL_WIDTH.contains(width) and text.isascii() and text.isdigit())


TOML_VALUES = st.sampled_from(["1", "-1", "0", "1.5", "inf", "nan", "-inf", "1e308", '"x"', "[]", "[1e-5]", '["f32"]',
                               "true", "4000", "0.95", "[inf]", "99999999999999999999"])
TOML_KEYS = st.sampled_from([(t, k) for t, k, _, _ in LOAD_CHECKED] + [(t, k) for _, t, k, *_ in USE_CHECKED]
                            + [("verify", "shape_sets"), ("verify.shape_sets", "mine"), ("compare", "stats_seed")])


@fuzz(0.15)
@given(st.lists(st.tuples(TOML_KEYS, TOML_VALUES), max_size=4))
def test_any_config_loads_or_is_a_usage_error(entries) -> None:
    tables: dict[str, dict[str, str]] = {}
    for (table, key), value in entries:
        tables.setdefault(table, {})[key] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(render_toml(tables))
        try:
            config = cfg.load_config(path)
        except LnbenchUsageError:
            return
    validate.config_numbers(config)           # what loaded is within every range
