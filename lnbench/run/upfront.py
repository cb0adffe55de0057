"""The up-front estimate a run prints before its work: from this machine's own earlier runs of the same kind of
work where there are some, else a range the truth falls inside, naming the compile caches that are cold.

A run's kind (`run_key`) is the command, its backends, its device and its size class (`size_class`: the class of
its largest case). The calibration file (lnbench.run.calibration) keeps, per machine, a series `run.KIND` of the
finished runs of that kind: their wall time from the estimate line to the end ("s"), what the model said ("m",
eta's modelled wall time, the busy machine counted) and whether compiles were pending ("c": 1 cold, 0 warm).

    runs of the same work here, in the same cache     ~the median of their actual seconds (the newest HISTORY), each
      state                                            × the load's slowdown now over its own then (eta.slowdown)
    runs of this kind here, in the same cache state   ~model × the median of their actual/model (the newest HISTORY)
    none                                              a range: model × RANGE_LOW .. model × RANGE_HIGH, plus each
                                                      pending compile's PENDING_S, plus FRESH_S where this machine
                                                      has never run the command on the device

The cold caches are looked at, not guessed (`pending_compiles`): Triton's cache for Liger's LayerNorm kernels,
TorchInductor's for torch.compile, lnbench's build of the emulator's HIP stand-in (zig), and FlyDSL's disk cache
(the caller says whether it has the run's kernels: lnbench.flydsl.compile_log). Each finished run records its
estimate and actual time (`record_run`) and its run record keeps them (`Upfront.fields`).

The same work (`work_signature`: the same units or cases in the same order, run the same way: the same command
line again) is priced by its own earlier times before the kind's ratio: the ratio is the model of now times the
actual/model of runs whose model was fitted before them, and the fit moves between runs (the same main job was
modelled at 23.5, 17.6, 15.9 and 26 s in one afternoon): a warm main job was priced 0.60× its time from a run of
the same work 0.83× its time before it (docs/running.md, issue 57).
"""
from __future__ import annotations

import hashlib
import math
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from lnbench.run import calibration

#: (at most this many elements in the largest case, class)
SIZE_CLASSES = ((1 << 16, "tiny"), (1 << 20, "small"), (1 << 24, "medium"))
#: the newest runs of a kind whose actual/model ratio the estimate takes the median of
HISTORY = 5
#: a run with no history of its kind: the range around the model. Its low end also holds a run whose load, counted
#: at the start, did not slow it (the model carries up to eta.LOAD_CAP of it): a `taskset -c 0` main job at load 9.8
#: took 24.1 s where 0.35× the model said 31 s
RANGE_LOW, RANGE_HIGH = 0.2, 2.5
#: seconds a cold compile cache can add beyond the model, by cache (upper bounds: Triton's JIT of Liger's kernels
#: and Inductor's of torch.compile's, for a few shapes; FlyDSL's kernels for the emulated device; the HIP
#: stand-in's and the native helper's zig build)
PENDING_S = {"Triton (Liger)": 60.0, "Inductor (torch.compile)": 120.0, "FlyDSL": 20.0, "emulator build (zig)": 30.0}
#: seconds a machine that has never run the command on the device can add (a GPU's context, first calls)
FRESH_S = 20.0


def size_class(elements: Iterable[int]) -> str:
    """The size class of a run: that of its largest case's elements (tiny, small, medium, large)."""
    largest = max(elements, default=0)
    return next((name for limit, name in SIZE_CLASSES if largest <= limit), "large")


def run_key(command: str, backends: Iterable[str], device: str, size: str) -> str:
    """What kind of run this is: `verify|flydsl,torch|emu:gfx942|small`."""
    return f"{command}|{','.join(sorted(set(backends)))}|{device}|{size}"


def _series(key: str) -> str:
    return f"run.{key}"


def _folder_has(folder: Path, fragment: str) -> bool:
    """Whether any file under `folder` has `fragment` in its name."""
    for _, _, files in os.walk(folder):
        if any(fragment in name for name in files):
            return True
    return False


def triton_cache_dir() -> Path:
    """Triton's kernel cache: $TRITON_CACHE_DIR, else ~/.triton/cache."""
    given = os.environ.get("TRITON_CACHE_DIR")
    return Path(given) if given else Path.home() / ".triton" / "cache"


def inductor_cache_dir() -> Path:
    """TorchInductor's cache: $TORCHINDUCTOR_CACHE_DIR, else torchinductor_USER under the temporary folder."""
    given = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    return Path(given) if given else Path(tempfile.gettempdir()) / f"torchinductor_{user}"


def emulator_build_dir() -> Path:
    """Where lnbench builds the emulator's HIP stand-in (lnbench.emu.hip.emu_dir)."""
    from lnbench.machine.cache_dirs import lnbench_cache_dir

    return lnbench_cache_dir() / "emu"


def pending_compiles(backends: Iterable[str], gpu: bool, emulated: bool, flydsl_cold: bool) -> tuple[str, ...]:
    """The compile caches this run will find cold, by looking at them: Triton's (Liger on a GPU: no file of its
    LayerNorm kernels), Inductor's (torch.compile: an empty folder), the emulator's build (no HIP stand-in built),
    FlyDSL's (`flydsl_cold`: the caller's look at FlyDSL's disk cache)."""
    names = set(backends)
    pending = []
    if gpu and "liger" in names and not _folder_has(triton_cache_dir(), "layer_norm"):
        pending.append("Triton (Liger)")
    if "compile" in names and not _folder_has(inductor_cache_dir(), ""):
        pending.append("Inductor (torch.compile)")
    if flydsl_cold:
        pending.append("FlyDSL")
    if emulated and not _folder_has(emulator_build_dir(), "libamdhip64"):
        pending.append("emulator build (zig)")
    return tuple(pending)


def fmt_seconds(seconds: float) -> str:
    """`45 s`, `3 min` (lnbench.output.tables.fmt_duration), whole seconds below 10 min."""
    from lnbench.output.tables import fmt_duration

    return f"{seconds:.0f} s" if seconds < 90 else fmt_duration(seconds)


@dataclass(frozen=True)
class Upfront:
    """A run's up-front estimate: a point (`point_s`, from `runs` earlier runs of its kind here) or a range
    (`low_s`..`high_s`, none of its kind yet), the model's own wall seconds, and the compiles pending."""

    key: str
    model_s: float
    low_s: float
    high_s: float
    point_s: float | None = None
    runs: int = 0
    pending: tuple[str, ...] = ()
    fresh: bool = False
    work: str = ""              # work_signature: "" where the caller gives none
    slowdown: float = 1.0       # eta.slowdown at the start: the load the model counted
    same_work: bool = False     # the point is from runs of the same work (else from runs of the kind)

    @property
    def ratio(self) -> float:
        """What the history says the model's seconds come to (1 without history): the live estimate's prior."""
        return self.point_s / self.model_s if self.point_s is not None and self.model_s > 0 else 1.0

    @property
    def seconds(self) -> float:
        """One number for the run record: the point, else the range's geometric middle."""
        return self.point_s if self.point_s is not None else math.sqrt(max(self.low_s, 1e-3) * self.high_s)

    @property
    def range_text(self) -> str:
        """`20 s – 2 min`, or "" for a point."""
        return "" if self.point_s is not None else f"{fmt_seconds(self.low_s)} – {fmt_seconds(self.high_s)}"

    def line(self, what: str, others: float, cores: int) -> str:
        """The line printed before the work: `estimated time: ~75 s (from 3 earlier runs here; 40 cases, ...)` or
        `estimated time: first run here: 20 s – 2 min (compiles pending: Triton (Liger), FlyDSL; ...)`."""
        load = f"{others:.0f} other busy threads on {cores} cores"
        if self.point_s is not None:
            earlier = (f"from {self.runs} earlier run{'s' if self.runs > 1 else ''}"
                       f"{' of the same work' if self.same_work else ''} here")
            return f"estimated time: ~{fmt_seconds(self.point_s)} ({earlier}; {what}; {load})"
        first = "first run here" if self.fresh else "first run of this kind here"
        pending = f"compiles pending: {', '.join(self.pending)}; " if self.pending else ""
        return f"estimated time: {first}: {self.range_text} ({pending}{what}; {load})"

    def keep(self, run: Any, actual_s: float | None = None) -> None:
        """Set what the run record (verify, perf, perf --device emu) keeps: estimate_s, estimate_range and, at the
        end, actual_s."""
        run.set(estimate_s=round(self.seconds, 2), estimate_range=self.range_text)
        if actual_s is not None:
            run.set(actual_s=round(actual_s, 2))


def history(recorded: calibration.Calibration, key: str, cold: bool) -> list[float]:
    """The actual/model ratios of the newest HISTORY runs of kind `key` in the same cache state (cold or warm)."""
    runs = [o for o in recorded.get(_series(key)) if o.get("m", 0) > 0 and bool(o.get("c")) == cold]
    return [o["s"] / o["m"] for o in runs[-HISTORY:]]


def work_signature(*parts: object) -> str:
    """What exactly a run does, as a short hash of `parts` (its units or cases in order, how many jobs or workers,
    its protocol): the same command line run again on the same machine has the same signature."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def same_work(recorded: calibration.Calibration, key: str, work: str, cold: bool, slowdown: float) -> list[float]:
    """The actual seconds of the newest HISTORY runs of the same work in the same cache state, each scaled by the
    slowdown the model counts now over the one it counted then (none for runs recorded without a signature)."""
    if not work:
        return []
    runs = [o for o in recorded.get(_series(key))
            if o.get("w") == work and bool(o.get("c")) == cold and o.get("s", 0) > 0]
    return [o["s"] * slowdown / o["l"] if o.get("l", 0) > 0 else o["s"] for o in runs[-HISTORY:]]


def estimate(key: str, model_s: float, pending: tuple[str, ...] = (),
             recorded: calibration.Calibration | None = None, work: str = "", slowdown: float = 1.0) -> Upfront:
    """The up-front estimate of a run of kind `key` the model puts at `model_s` wall seconds (module docstring);
    `work` its work_signature, `slowdown` the load's eta.slowdown the model counted."""
    recorded = calibration.load() if recorded is None else recorded
    model_s = max(model_s, 0.1)
    same = same_work(recorded, key, work, bool(pending), slowdown)
    if same:
        point = float(statistics.median(same))
        return Upfront(key, model_s, point, point, point, len(same), pending, False, work, slowdown, True)
    ratios = history(recorded, key, bool(pending))
    if ratios:
        point = model_s * float(statistics.median(ratios))
        return Upfront(key, model_s, point, point, point, len(ratios), pending, False, work, slowdown)
    fresh = not ran_here(recorded, key)
    high = model_s * RANGE_HIGH + sum(PENDING_S.get(name, 30.0) for name in pending) + (FRESH_S if fresh else 0.0)
    return Upfront(key, model_s, model_s * RANGE_LOW, high, None, 0, pending, fresh, work, slowdown)


def ran_here(recorded: calibration.Calibration, key: str) -> bool:
    """Whether this machine has recorded any run of the key's command on its device (a whole run of another
    kind, or the parts its model is fitted to: `verify.host@cpu`, `perf.emu.fwd@emu:gfx942`)."""
    command, device = key.split("|")[0], key.split("|")[2] if key.count("|") >= 3 else ""
    parts = command.replace("-", ".") + "."
    return any((name.startswith(f"run.{command}|") and name.count("|") >= 3 and name.split("|")[2] == device)
               or (name.startswith(parts) and name.endswith(f"@{device}")) for name in recorded.series)


@calibration.quietly
def record_run(upfront: Upfront, actual_s: float) -> bool:
    """Add a finished run (its actual seconds from the estimate line to the end) to its kind's series."""
    return calibration.record({_series(upfront.key): [{"s": max(0.0, actual_s), "m": upfront.model_s,
                                                        "c": 1 if upfront.pending else 0, "w": upfront.work,
                                                        "l": upfront.slowdown}]})
