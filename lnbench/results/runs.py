"""The run records: what a result file says about the run that wrote it (its identity and settings), one
record a kind, declared in sections that kinds share.

    section       fields                                                       who writes it
    identity      command line, versions, device, commit, time, threads        every command (metadata.provenance)
    completion    complete, stopped                                            the result sink
    shard         shard, shard_total_cases                                     --shard
    devices       devices, device_models, device_cpus, alone_below_mib         --devices
    sources       kernel_sources                                               kernel-source backends
    load          load before/after, cores, other timing runs, load_flag       perf (timed runs)
    protocol      perf: P, R, I_min, ...; abi-compare: processes, runs, ...    perf, abi-compare
    history       store, filters, --last, change-point method, the gate         history

Every section is declared once. Those most kinds share at the same place are a chain of base classes
(`IdentifiedRun`: identity, the type of any kind's run record; `_Completed`: + completion; `CasesRun`: + shard,
devices, sources, merge); the others are column groups a record lists among its bases (`LoadColumns`,
`EstimateColumns`, `VerifySettings`): its columns are its bases' in the order listed, then its own
(lnbench.results.records.record).

A run record is written flat: its cells are the JSON's `metadata` and, in a CSV, columns repeated on every row
(a column a row also has, such as verify's per-case `seed`, keeps the row's value in the CSV). Readers use the
record's fields and properties (`run.device_label`, `run.protocol`), never key strings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self

from lnbench.results.records import Record, col, record

#: metadata key (and CSV column) naming a result's kind and schema version: "verify/1.0"
SCHEMA_KEY = "schema"


@dataclass(frozen=True)
class Protocol:
    """The timing-protocol settings that change what a measurement means, by name (compare matches on them)."""

    settings: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.settings)


class RunRecord(Record):
    """What every kind's run record answers, from its declared fields."""

    #: protocol field -> the name compare reports it by
    PROTOCOL_NAMES: ClassVar[dict[str, str]] = {}
    #: fields beside the protocol that a case's result depends on: the parts of a merge must agree on them
    AGREE: ClassVar[tuple[str, ...]] = ()
    #: fields each part of a split has its own of, which a merged file sets itself
    PER_PART: ClassVar[tuple[str, ...]] = ("shard", "complete", "stopped")

    @property
    def device_label(self) -> str:
        """The device the run names (its model where recorded)."""
        return str(self.value("device_name") or self.value("device") or "unknown device")

    @property
    def incomplete(self) -> str:
        """Why the run did not finish ("interrupted (SIGINT) after 2 of 40 cases"), or "" (complete, or written
        by an lnbench that did not record it). lnbench.scaffold.sink."""
        if self.value("complete") in (False, "False", "false"):
            return str(self.value("stopped") or "stopped before the end")
        return ""

    @property
    def protocol(self) -> Protocol:
        """The timing protocol as recorded in the metadata (compare's `protocol`)."""
        return Protocol(tuple((name, self.value(key)) for key, name in self.PROTOCOL_NAMES.items() if self.has(key)))

    @property
    def commit(self) -> str:
        return str(self.value("git_commit") or "")

    def agreement(self) -> dict[str, Any]:
        """The AGREE fields this run records, by name (merge compares them between parts)."""
        return {name: self.value(name) for name in self.AGREE if self.has(name)}

    def merged(self, parts: int, stopped: str) -> Self:
        """The run record of a merge of `parts` files of one split, this record holding what they agree on:
        complete unless `stopped` says why not."""
        return self.with_(complete=not stopped, stopped=stopped, merged_from=parts, shard="")


@record
class IdentifiedRun(RunRecord):
    """The identity section: what every run record starts with."""

    schema: str | None = col("the result's kind and schema version, e.g. verify/1.0")
    lnbench_command: str | None = col("the command that wrote the result")
    command_line: str | None = col("the command line, shell-quoted")
    lnbench_version: str | None = col("lnbench's version")
    torch_version: str | None = col("torch's version")
    flydsl_version: str | None = col("FlyDSL's version, or 'not installed'")
    gpu_runtime: str | None = col("hip X, cuda X or cpu-only")
    driver: str | None = col("the GPU driver's version")
    device: str | None = col("the device the run used (cpu, cuda:0, emu:gfx942, null:...)")
    device_name: str | None = col("its human name")
    device_arch: str | None = col("its architecture (gfx942, sm_90, ...)")
    git_commit: str | None = col("lnbench's checkout commit, -dirty when changed")
    timestamp: str | None = col("UTC start of the run, ISO 8601")
    torch_threads: int | None = col("torch's intra-op threads (CPU timings depend on it)")
    emu_checks: str | None = col("emulated device: the sanitizer checks on")


@record
class _Completed(IdentifiedRun):
    """Identity and completion."""

    complete: bool | None = col("the run finished (false: interrupted, crashed, or a checkpoint)")
    stopped: str | None = col("why an incomplete run stopped")


@record
class CasesRun(_Completed):
    """The sections every command that runs cases shares: identity, completion, shard, devices, sources, merge."""

    shard: str | None = col("--shard K/N: the part this file holds")
    shard_total_cases: int | None = col("--shard: cases of the whole list")
    devices: str | None = col("--devices: the GPUs the run was spread over")
    device_models: str | None = col("--devices: their models")
    device_cpus: str | None = col("--devices: each GPU's CPUs")
    alone_below_mib: float | None = col("--devices: cases this small are timed alone")
    alone_host_fraction: float | None = col("--devices: cases this host-bound are timed alone")
    kernel_sources: Any = col("kernel-source backends: module, file, commit of each")
    merged_from: int | None = col("lnbench merge: part files joined")


@record
class VerifySettings(Record):
    """verify's and its --self-test's run settings: the seed, the workers, what the emulator ran."""

    seed: int | None = col("the run's base input seed")
    jobs: int | None = col("worker processes")
    emu_fidelity: str | None = col("emulated: what the emulator executed and approximates")


@record
class EstimateColumns(Record):
    """The up-front estimate a run printed and what it took (lnbench.run.upfront)."""

    estimate_s: float | None = col("the up-front estimate printed, seconds (a range's geometric middle)")
    estimate_range: str | None = col("the up-front range printed where no earlier run of the kind was here ('' for a point)")
    actual_s: float | None = col("seconds from the estimate line to the end")


@record
class LoadColumns(Record):
    """The machine's load around a timed run (lnbench.measure.load)."""

    load_before: float | None = col("1-minute load average before the timing")
    load_after: float | None = col("the same after")
    cpus_available: int | None = col("cores this process may use")
    other_timing_runs: int | None = col("other lnbench timing runs seen")
    load_flag: str | None = col("why the machine counted as busy ('' when not)")


@record
class VerifyRun(CasesRun, VerifySettings, EstimateColumns):
    """A verify run: identity, seed, jobs."""

    AGREE = ("lnbench_version", "seed", "emu_checks", "device")


@record
class SelftestRun(CasesRun, VerifySettings):
    """A verify --self-test run."""


@record
class _PerfSettings(Record):
    """PerfRun's own columns between its shared groups."""

    P: int | None = col("worker processes")
    R: int | None = col("timed runs per worker")
    I_min: int | None = col("fewest calls per run")
    I_max: int | None = col("most calls per run")
    warmup_s_min: float | None = col("least warm-up seconds")
    min_warmup_calls: int | None = col("least warm-up calls")
    target_run_s: float | None = col("seconds a run aims at")
    cold_factor: float | None = col("cold mode: sets × LLC")
    modes: str | None = col("timing modes run")
    baseline: str | None = col("the backend speed-ups are against")
    headline: str | None = col("stream or kernel time")
    clocks_before: Any = col("GPU clocks before the run")
    clocks_after: Any = col("GPU clocks after")
    peak_gbps: float | None = col("the cached copy bandwidth % peak uses")
    peak_timestamp: str | None = col("when that peak was measured")
    wall_s: float | None = col("the run's seconds")
    kernel_timer: str | None = col("on, off or n/a (why)")
    planted_slowdown: str | None = col("a planted slowdown for proving the gate (lnbench.compare.planted)")


@record
class PerfRun(CasesRun, LoadColumns, _PerfSettings, EstimateColumns):
    """A perf run: identity, protocol, load, peak."""

    PROTOCOL_NAMES = {"P": "processes", "R": "runs", "warmup_s_min": "warmup_s", "min_warmup_calls": "min_warmup_calls",
                      "target_run_s": "target_run_s", "I_min": "min_iters", "I_max": "max_iters",
                      "cold_factor": "cold_factor"}
    AGREE = ("lnbench_version", "headline", "baseline", "modes", "kernel_timer")


@record
class AbiRun(CasesRun, LoadColumns):
    """An abi-compare run: identity, pair, protocol."""

    PROTOCOL_NAMES = {k: k for k in ("pair", "processes", "runs", "warmup_s", "target_run_s", "iters_clamp",
                                     "dgamma_strategy", "planted_delay_us")}
    AGREE = ("lnbench_version", "pair", "eps", "seed", "confidence", "bootstrap", "static_executed_on")

    processes: int | None = col("worker processes")
    runs: int | None = col("timed runs per worker")
    warmup_s: float | None = col("warm-up seconds")
    target_run_s: float | None = col("seconds a run aims at")
    iters_clamp: str | None = col("calls per run, min-max")
    pair: str | None = col("the call-path pair compared")
    eps: float | None = col("LayerNorm eps")
    dgamma_strategy: str | None = col("the FlyDSL kernels' dγ strategy")
    planted_delay_us: float | None = col("a planted delay in the Pointer path, µs")
    static_executed_on: str | None = col("the emulated devices the static part executed on")
    seed: int | None = col("input seed")
    confidence: float | None = col("the paired bootstrap interval's confidence")
    bootstrap: int | None = col("bootstrap resamples")
    modelled_targets: Any = col("--device emu: the targets whose floors the modelled rows use")


@record
class InspectRun(CasesRun):
    """An inspect run: identity, toolkit, executed devices."""

    toolkit: str | None = col("the linker toolkit")
    executed_on: str | None = col("--execute: the emulated devices")


@record
class CompareRun(_Completed):
    """A compare of BASE and NEW: both runs' identities, the statistics."""

    command: str | None = col("compare")
    source_command: str | None = col("the command BASE and NEW came from")
    base: str | None = col("BASE file")
    new: str | None = col("NEW file")
    base_device: str | None = col("BASE's device")
    base_commit: str | None = col("BASE's lnbench commit")
    base_timestamp: str | None = col("BASE's time")
    base_lnbench_version: str | None = col("BASE's lnbench version")
    new_device: str | None = col("NEW's device")
    new_commit: str | None = col("NEW's lnbench commit")
    new_timestamp: str | None = col("NEW's time")
    new_lnbench_version: str | None = col("NEW's lnbench version")
    threshold_pct: float | None = col("changes below this are SAME")
    confidence: float | None = col("the interval's confidence")
    run_noise_pct: float | None = col("the run-to-run noise floor the interval adds (τ, %)")
    peer_controls: bool | None = col("a case's floor is raised to the session shift its peers (other backends) show")
    interval: str | None = col("how the interval is computed")
    fail_if_slower_pct: float | None = col("the gate's threshold")
    forced: str | None = col("what --force compared past")


@record
class _ProfileSettings(Record):
    """ProfileRun's own columns before its shared group."""

    modelled: bool | None = col("the rows are modelled floors, not measurements")
    targets: Any = col("the figures of each target the floors used ([targets.NAME])")
    modes: str | None = col("memory modes modelled")
    eps: float | None = col("LayerNorm eps")
    seed: int | None = col("input seed")
    jobs: int | None = col("worker processes")
    wall_s: float | None = col("the run's seconds")
    emu_fidelity: str | None = col("what the emulator executed and approximates")


@record
class ProfileRun(CasesRun, _ProfileSettings, EstimateColumns):
    """A perf --device emu run: identity, the targets' figures (modelled)."""

    AGREE = ("lnbench_version", "device", "modes", "eps", "seed", "targets")



@record
class HistoryRun(IdentifiedRun):
    """A history of the results store: identity, the store, filters, change-point method."""

    store_url: str | None = col("the results store read (password hidden)")
    filters: Any = col("the filters given (--kind, --backend, ..., --since), by option")
    last_runs: int | None = col("--last: the newest runs read")
    exclude_loaded: bool | None = col("--exclude-loaded: runs of a busy machine left out")
    change_method: str | None = col("the change-point method and its settings (lnbench.history.cache.METHOD)")
    fail_on_regression_pct: float | None = col("--fail-on-regression: the gate's threshold, %")
    regressions: int | None = col("--fail-on-regression: timed series whose newest change point is such a slowdown")
    unjudged: int | None = col("--fail-on-regression: series with nothing to judge yet (one commit, or fewer than 6 "
                               "values; modelled floors: fewer than 2)")
    judged_files: str | None = col("--with: the result files judged as the newest runs (not recorded)")
    change_test: str | None = col("how a change point is told from noise (lnbench.history.significance)")
    fdr_q: float | None = col("the false discovery rate the change points are held to over the series read "
                              "(Benjamini-Hochberg)")
    series_tested: int | None = col("measured series tested for change points (the false discovery rate's family)")
    gate_text: str | None = col("--fail-on-regression: the gate's verdict with its exit status")
    not_gated: int | None = col("--fail-on-regression: series of a unit without a slower direction (listed, not "
                                "judged)")
    too_noisy: int | None = col("--fail-on-regression: series whose noise hides a step of the threshold's size")
