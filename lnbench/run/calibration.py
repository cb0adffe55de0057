"""Per-machine calibration of the run-time models (lnbench.run.eta): what finished runs measured, kept as JSON in the
results folder (results/calibration.json, beside peak.json), and the fit that turns it into a model's constants.

The constants of verify/estimate.py and perf/estimate.py are only the first guess on a machine that has never run:
each finished verify or perf run records here the seconds its parts took, and the next estimate fits its
constants from them (verify/calibrate.py, perf/calibrate.py say what each command records). The file:

    {"format": "lnbench-calibration", "version": 1,
     "machines": {MACHINE: {"updated": TIMESTAMP,
                            "series": {NAME: [OBSERVATION, ...]},        # the newest KEEP of each, oldest first
                            "compiled": {CACHE: {"files": N, "keys": [KEY, ...]}}}}}

MACHINE is machine_id() (architecture, CPU model, usable cores): a machine sharing the folder keeps its own
entry. NAME is one kind of observation on one device (`verify.emulated@emu:gfx942`, `perf.call@NVIDIA H200`).
An OBSERVATION is a dict of numbers: "s", seconds of one idle core (the wall seconds divided by the slowdown the
machine was at, eta.slowdown), and where the model needs them "x" (the size it grows with: elements, bytes) and
"m" (the first guess's seconds for the same thing). "compiled" holds the FlyDSL kernels (KEY) compiled into a disk
cache (CACHE: lnbench.flydsl.compile_log.cache_identity), trusted while that cache holds at least N files.

$LNBENCH_CALIBRATION names another file, or `off` (first guesses only, nothing written). A missing, unreadable or
corrupt file reads as an empty one (a corrupt one is replaced at the next record), and one that cannot be written
is left as it is: calibration never stops or fails a run.

A record reads, merges and writes the file under an exclusive lock (fcntl.flock on `.calibration.json.lock` beside
it, waited for up to LOCK_WAIT_S), and writes it whole under a temporary name renamed into place: two runs that end
at once both keep their observations, and a reader never sees half a file.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import math
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

FORMAT, VERSION = "lnbench-calibration", 1
FILE = "calibration.json"
ENV = "LNBENCH_CALIBRATION"
#: observations kept per series (the newest): old ones age out as the machine or lnbench changes. (64 kept one
#: `verify --dtype bf16` on the emulated device, 90 units in verify.emulated, only in part: its last backends'
#: units, flydsl-tensor's gone after one more run, and the backends' factors and the sizes' medians with them)
KEEP = 512
#: compiled kernels remembered per disk cache
KEEP_KEYS = 4096
#: a column of a linear fit must vary this many times over the observations for its coefficient to be fitted
SPREAD = 4.0
#: an observation this many times off the fit's typical ratio is left out of its level (a start-up in a unit: a
#: first verify unit on the H200 took 600× its kind; a cold perf case 8× what its sets say is a real cost)
OUTLIER = 20.0
#: how long a record waits for another run's record to finish before it gives up (nothing is written then)
LOCK_WAIT_S = 10.0


def default_path() -> Path | None:
    """$LNBENCH_CALIBRATION, else calibration.json in the results folder; None when calibration is `off`."""
    from lnbench.output.files import default_results_dir

    given = os.environ.get(ENV, "").strip()
    if given.lower() == "off":
        return None
    return Path(given) if given else default_results_dir() / FILE


def machine_id() -> str:
    """This machine's kind: `x86_64 AMD EPYC 7B13 / 2 cores` (architecture, CPU model, the cores lnbench may use)."""
    from lnbench.run.eta import cores

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.machine()} {model or platform.processor() or 'cpu'} / {cores()} cores"


def process_age_s() -> float | None:
    """Seconds since this process started (its interpreter, imports and set-up so far: what a worker process of
    the same command goes through before its work), from /proc; None where there is no /proc."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as stat:
            started = int(stat.read().rpartition(")")[2].split()[19])        # field 22: start time, clock ticks
        with open("/proc/uptime", encoding="ascii") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    """`value` when it is a dict, else an empty one (the file may hold anything)."""
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _clean(observations: Any) -> list[dict[str, Any]]:
    """The well-formed observations of a series: dicts whose "s" is a number >= 0 and whose "x", "n", "m" and
    "l", where given, are numbers >= 0 (others are dropped)."""
    if not isinstance(observations, list):
        return []
    return [o for o in observations if isinstance(o, dict) and _number(o.get("s")) and o["s"] >= 0
            and all(_number(o[k]) and o[k] >= 0 for k in ("x", "n", "m", "l") if k in o)]


@dataclass
class Calibration:
    """One machine's recorded observations (empty on a machine that has never run), and the fits of them."""

    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    compiled: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, name: str) -> list[dict[str, Any]]:
        return _clean(self.series.get(name))

    def median(self, name: str, default: float, key: str = "s") -> float:
        """The median of the series' `key` (its seconds), `default` when it has none."""
        values = [o[key] for o in self.get(name) if _number(o.get(key))]
        return float(statistics.median(values)) if values else default

    def medians(self, prefix: str, device: str) -> dict[str, float]:
        """The median of each series named PREFIX + NAME + "@" + device that has observations, by NAME."""
        suffix = f"@{device}"
        return {name[len(prefix):-len(suffix)]: self.median(name, 0.0) for name in self.series
                if name.startswith(prefix) and name.endswith(suffix) and self.get(name)}

    def mean(self, name: str, default: float, key: str = "s") -> float:
        """The mean of the series' `key` (its seconds), `default` when it has none: what a total of many of them
        comes to (warm compiles took 0.001 s or 0.1-0.8 s, two groups whose median, 0.01 s, priced the total short)."""
        values = [o[key] for o in self.get(name) if _number(o.get(key))]
        return float(statistics.fmean(values)) if values else default

    def ratio(self, name: str, default: float = 1.0) -> float:
        """The median of observed over first-guess seconds ("s" / "m"): how far off the first guess is here."""
        values = [o["s"] / o["m"] for o in self.get(name) if _number(o.get("m")) and o["m"] > 0]
        return float(statistics.median(values)) if values else default

    def linear(self, name: str, prior: tuple[float, float]) -> tuple[float, float]:
        """(fixed, per x) seconds fitted to the series' ("x", "s") observations (`fit`), `prior` without any."""
        points = [o for o in self.get(name) if _number(o.get("x")) and o["x"] >= 0]
        if not points:
            return prior
        fixed, per = fit([[1.0, o["x"]] for o in points], [o["s"] for o in points], prior)
        return fixed, per

    def shape(self, names: Sequence[str], prior: tuple[float, float, float]) -> tuple[float, float, float]:
        """(fixed, per √x, per x) seconds fitted to the ("x", "s") observations of the series `names` together
        (`fit` with shape_features' columns, any of them held at 0 where that fits better), `prior` without any."""
        points = [o for name in names for o in self.get(name) if _number(o.get("x")) and o["x"] >= 0]
        if not points:
            return prior
        fixed, root, per = fit([shape_features(o["x"]) for o in points], [o["s"] for o in points], prior,
                               subsets=True)
        return fixed, root, per

    def warm(self, cache: str, files: int) -> set[str]:
        """The kernels recorded as compiled into the disk cache `cache`, while it holds at least as many files as
        when they were recorded (a cache emptied or replaced since has none of them)."""
        entry = self.compiled.get(cache)
        if not isinstance(entry, dict) or not _number(entry.get("files")) or files < entry["files"] or files <= 0:
            return set()
        return {key for key in entry.get("keys", []) if isinstance(key, str)}


def quietly(record_run: Callable[..., bool]) -> Callable[..., bool]:
    """A command's recording of its finished run, made harmless: nothing when calibration is `off`, False instead
    of any exception (a result it cannot read, a file it cannot write): calibration never fails a run."""
    @functools.wraps(record_run)
    def guarded(*args: Any, **kwargs: Any) -> bool:
        if default_path() is None:
            return False
        try:
            return record_run(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the run's results are written already; only the next estimate loses
            return False
    return guarded


def _read(path: Path) -> dict[str, Any]:
    """The whole file ({} when it is missing, unreadable, corrupt or not lnbench's)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("machines"), dict):
        return {}
    return data


def load(path: Path | None = None, machine: str | None = None) -> Calibration:
    """This machine's calibration from `path` (default_path()); an empty one when there is nothing usable."""
    path = path or default_path()
    if path is None:
        return Calibration()
    entry = _read(path).get("machines", {}).get(machine or machine_id())
    if not isinstance(entry, dict):
        return Calibration()
    series = _dict(entry.get("series"))
    compiled = _dict(entry.get("compiled"))
    return Calibration({str(k): _clean(v) for k, v in series.items()}, dict(compiled))


def record(series: dict[str, list[dict[str, Any]]], compiled: dict[str, dict[str, Any]] | None = None,
           path: Path | None = None, machine: str | None = None) -> bool:
    """Add a finished run's observations (series name -> new observations) and compiled kernels (cache -> {"files",
    "keys"}) to this machine's entry, keeping the newest KEEP of each series; written atomically. False when the
    file could not be written (nothing else happens: calibration never fails a run)."""
    path = path or default_path()
    if path is None or (path.exists() and not path.is_file()):         # a folder: nothing to lock beside it
        return False
    try:
        with locked(path):
            return _merge_and_write(path, series, compiled or {}, machine or machine_id())
    except OSError:                     # no lock to be had (a read-only folder): nothing is written
        return False


@contextlib.contextmanager
def locked(path: Path, wait_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """An exclusive flock on `.NAME.lock` beside `path` while the block runs: one read-merge-write at a time across
    processes. OSError when the lock cannot be made, or is still held by another after `wait_s` (LOCK_WAIT_S)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a+b") as lock:
        deadline = clock() + (LOCK_WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock() >= deadline:
                    raise
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _merge_and_write(path: Path, series: dict[str, list[dict[str, Any]]], compiled: dict[str, dict[str, Any]],
                     machine: str) -> bool:
    """The file re-read, `series` and `compiled` merged into `machine`'s entry, written whole (under the lock)."""
    from lnbench.machine.checkout import timestamp

    try:
        data = _read(path) or {"format": FORMAT, "version": VERSION, "machines": {}}
        entry = data["machines"].get(machine)
        entry = entry if isinstance(entry, dict) else {}
        old = _dict(entry.get("series"))
        merged = {name: _clean(values) for name, values in old.items()}
        for name, new in series.items():
            merged[name] = (merged.get(name, []) + _clean(new))[-KEEP:]
        caches = _dict(entry.get("compiled"))
        for cache, seen in compiled.items():
            before = _dict(caches.get(cache))
            files, known = before.get("files"), before.get("keys")
            emptied = not (isinstance(known, list) and _number(files) and seen["files"] >= files)
            kept = [] if emptied or not isinstance(known, list) else [key for key in known if isinstance(key, str)]
            caches[cache] = {"files": seen["files"], "keys": sorted(set(kept) | set(seen["keys"]))[-KEEP_KEYS:]}
        data["machines"][machine] = {"updated": timestamp(), "series": merged, "compiled": caches}
    except Exception:  # noqa: BLE001 - observations it cannot merge are dropped; the run goes on
        return False
    return _write(path, data)


def _write(path: Path, data: dict[str, Any]) -> bool:
    """`data` to `path` through a temporary sibling and a rename; False (and no temporary left) when it fails."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                         delete=False, encoding="utf-8") as out:
            tmp = out.name
            json.dump(data, out, indent=1, sort_keys=True)
        os.replace(tmp, path)
        return True
    except (OSError, TypeError, ValueError):
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        return False


def _nonnegative_lstsq(a: Any, b: Any) -> Any:
    """numpy.linalg.lstsq with no negative coefficient: a coefficient that comes out negative is held at 0 and the
    rest refitted (a cost is never negative; on a 16-core host a cold case's set-up was all per rotated set, 0.12 s
    each, and a free fit gave the fixed part and the per-GB part negative)."""
    import numpy as np

    active = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    while active:
        solution = np.linalg.lstsq(a[:, active], b, rcond=None)[0]
        if (solution >= 0).all():
            coef[active] = solution
            break
        active = [j for j, value in zip(active, solution) if value > 0]
    return coef


def shape_features(x: float) -> list[float]:
    """The columns of a unit's cost that grows with its size x (elements) more slowly than x: 1, √x, x. The
    emulated device's units took 0.1-0.17 s at 16 elements, 0.24-0.29 s at 16k and 0.5-1.0 s at 1M (2-core machine,
    load 2-5): a fixed part and a part per element priced a 128x8192 unit at 1.2 s and the 16k-74k ones at 0.14 s,
    so a run handed out longest first went 1.4 → 0.5 → 1.3-1.8 wall per modelled second."""
    return [1.0, math.sqrt(x), x]


def fit(features: Sequence[Sequence[float]], seconds: Sequence[float], prior: Sequence[float],
        subsets: bool = False) -> list[float]:
    """Coefficients c of seconds ≈ features · c, from observations, starting from the first guess `prior`.

    Two candidate shapes: the prior itself, and a least-squares fit of the relative error (numpy.linalg.lstsq of
    features/seconds against 1, so a 0.1 s unit weighs as much as a 100 s one), tried where every column that is
    not constant varies at least SPREAD times, refitted once without the observations off by more than 3× the
    median error (a coefficient that comes out negative is held at 0 and the others refitted). Each is then
    brought to the observations' level: scaled by their total over its total, leaving out those more than OUTLIER times off its median ratio (a first unit
    with a process's start-up in it), so that the seconds a run adds up come out right, not just the typical
    unit. The candidate with the smaller sum of squared relative misses wins (the prior's on a tie): one run
    of one size only scales the prior; runs of several sizes fit the fixed part and the slope. `subsets`: also
    each fit of some of the columns only, the others held at 0 (two sizes fit (1, √x) or (1, x) where three
    columns cannot be told apart)."""
    import numpy as np

    f = np.asarray(features, dtype=float).reshape(len(seconds), len(prior))
    y = np.asarray(seconds, dtype=float)
    p = np.asarray(prior, dtype=float)
    keep = (y > 0) & (f @ p > 0) & np.isfinite(f).all(axis=1)
    f, y = f[keep], y[keep]
    if not len(y):
        return [float(v) for v in p]

    def error(c: np.ndarray) -> float:
        """The sum of squared relative misses. (A median relative error let a first guess scaled to a majority of
        small units win while it missed the few large ones 11× over: a cold perf case's 3 s set-up priced at
        0.26 s on a 16-core host.)"""
        return float(((f @ c / y - 1.0) ** 2).sum())

    def level(c: np.ndarray) -> np.ndarray:
        ratio = y / (f @ c)
        typical = float(np.median(ratio))
        near = (ratio >= typical / OUTLIER) & (ratio <= typical * OUTLIER)
        return c * float(y[near].sum() / (f[near] @ c).sum())

    def candidate(columns: list[int]) -> np.ndarray | None:
        """The least-squares fit of `columns` (the others 0), levelled; None where they cannot be fitted."""
        g = f[:, columns]
        spread = all(g[:, j].max() >= SPREAD * g[:, j].min() for j in range(g.shape[1]) if np.ptp(g[:, j]) > 0)
        if not (len(y) > g.shape[1] and spread and np.linalg.matrix_rank(g) == g.shape[1]):
            return None
        rows = np.ones(len(y), dtype=bool)
        for _ in range(2):
            part = _nonnegative_lstsq(g[rows] / y[rows, None], np.ones(int(rows.sum())))
            off = np.abs(g @ part / y - 1.0)
            rows = off <= max(3 * float(np.median(off)), 0.05)
            if rows.sum() <= g.shape[1]:
                break
        coef = np.zeros(f.shape[1])
        coef[columns] = part
        return level(coef) if (coef >= 0).all() and (f @ coef > 0).all() else None

    best = level(p)
    choices = ([list(c) for k in range(f.shape[1], 0, -1) for c in itertools.combinations(range(f.shape[1]), k)]
               if subsets else [list(range(f.shape[1]))])
    for columns in choices:
        coef = candidate(columns)
        if coef is not None and error(coef) < error(best):
            best = coef
    return [float(v) for v in best]


def device_key(device: Any) -> str:
    """The device a series is of: the GPU's model, else the device's name (`cpu`, `emu:gfx942`)."""
    return device.label if device.is_gpu else device.name
