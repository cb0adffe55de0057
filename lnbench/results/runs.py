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

A run record is written flat: its cells are the JSON's `metadata` and, in a CSV, columns repeated on every row
(a column a row also has, such as verify's per-case `seed`, keeps the row's value in the CSV). Readers use the
record's fields and properties (`run.device_label`, `run.protocol`), never key strings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, cast

from lnbench.results.records import BOOL, FLOAT, INT, JSON, STR, Record, cols, record_class

#: metadata key (and CSV column) naming a result's kind and schema version: "verify/1.0"
SCHEMA_KEY = "schema"

IDENTITY = (
    (SCHEMA_KEY, STR, "the result's kind and schema version, e.g. verify/1.0"),
    ("lnbench_command", STR, "the command that wrote the result"),
    ("command_line", STR, "the command line, shell-quoted"),
    ("lnbench_version", STR, "lnbench's version"), ("torch_version", STR, "torch's version"),
    ("flydsl_version", STR, "FlyDSL's version, or 'not installed'"),
    ("gpu_runtime", STR, "hip X, cuda X or cpu-only"), ("driver", STR, "the GPU driver's version"),
    ("device", STR, "the device the run used (cpu, cuda:0, emu:gfx942, null:...)"),
    ("device_name", STR, "its human name"), ("device_arch", STR, "its architecture (gfx942, sm_90, ...)"),
    ("git_commit", STR, "lnbench's checkout commit, -dirty when changed"),
    ("timestamp", STR, "UTC start of the run, ISO 8601"),
    ("torch_threads", INT, "torch's intra-op threads (CPU timings depend on it)"),
    ("emu_checks", STR, "emulated device: the sanitizer checks on"),
)
COMPLETION = (("complete", BOOL, "the run finished (false: interrupted, crashed, or a checkpoint)"),
              ("stopped", STR, "why an incomplete run stopped"))
SHARD = (("shard", STR, "--shard K/N: the part this file holds"),
         ("shard_total_cases", INT, "--shard: cases of the whole list"))
DEVICES = (("devices", STR, "--devices: the GPUs the run was spread over"),
           ("device_models", STR, "--devices: their models"), ("device_cpus", STR, "--devices: each GPU's CPUs"),
           ("alone_below_mib", FLOAT, "--devices: cases this small are timed alone"),
           ("alone_host_fraction", FLOAT, "--devices: cases this host-bound are timed alone"))
SOURCES = (("kernel_sources", JSON, "kernel-source backends: module, file, commit of each"),)
LOAD = (("load_before", FLOAT, "1-minute load average before the timing"),
        ("load_after", FLOAT, "the same after"), ("cpus_available", INT, "cores this process may use"),
        ("other_timing_runs", INT, "other lnbench timing runs seen"),
        ("load_flag", STR, "why the machine counted as busy ('' when not)"))
PERF_PROTOCOL = (("P", INT, "worker processes"), ("R", INT, "timed runs per worker"),
                 ("I_min", INT, "fewest calls per run"), ("I_max", INT, "most calls per run"),
                 ("warmup_s_min", FLOAT, "least warm-up seconds"), ("min_warmup_calls", INT, "least warm-up calls"),
                 ("target_run_s", FLOAT, "seconds a run aims at"), ("cold_factor", FLOAT, "cold mode: sets × LLC"),
                 ("modes", STR, "timing modes run"))
PERF_RUN = (("baseline", STR, "the backend speed-ups are against"), ("headline", STR, "stream or kernel time"),
            ("clocks_before", JSON, "GPU clocks before the run"), ("clocks_after", JSON, "GPU clocks after"),
            ("peak_gbps", FLOAT, "the cached copy bandwidth % peak uses"),
            ("peak_timestamp", STR, "when that peak was measured"), ("wall_s", FLOAT, "the run's seconds"),
            ("kernel_timer", STR, "on, off or n/a (why)"))
ABI_PROTOCOL = (("processes", INT, "worker processes"), ("runs", INT, "timed runs per worker"),
                ("warmup_s", FLOAT, "warm-up seconds"), ("target_run_s", FLOAT, "seconds a run aims at"),
                ("iters_clamp", STR, "calls per run, min-max"))
ABI_RUN = (("pair", STR, "the call-path pair compared"), ("eps", FLOAT, "LayerNorm eps"),
           ("dgamma_strategy", STR, "the FlyDSL kernels' dγ strategy"),
           ("planted_delay_us", FLOAT, "a planted delay in the Pointer path, µs"),
           ("static_executed_on", STR, "the emulated devices the static part executed on"),
           ("seed", INT, "input seed"), ("confidence", FLOAT, "the paired bootstrap interval's confidence"),
           ("bootstrap", INT, "bootstrap resamples"),
           ("modelled_targets", JSON, "--device emu: the targets whose floors the modelled rows use"))
VERIFY_RUN = (("seed", INT, "the run's base input seed"), ("jobs", INT, "worker processes"),
              ("emu_fidelity", STR, "emulated: what the emulator executed and approximates"))
INSPECT_RUN = (("toolkit", STR, "the linker toolkit"), ("executed_on", STR, "--execute: the emulated devices"))
COMPARE_RUN = (
    ("command", STR, "compare"), ("source_command", STR, "the command BASE and NEW came from"),
    ("base", STR, "BASE file"), ("new", STR, "NEW file"),
    *((f"{side}_{what}", STR, f"{side.upper()}'s {meaning}") for side in ("base", "new")
      for what, meaning in (("device", "device"), ("commit", "lnbench commit"), ("timestamp", "time"),
                            ("lnbench_version", "lnbench version"))),
    ("threshold_pct", FLOAT, "changes below this are SAME"), ("confidence", FLOAT, "the interval's confidence"),
    ("run_noise_pct", FLOAT, "the run-to-run noise floor the interval adds (τ, %)"),
    ("peer_controls", BOOL, "a case's floor is raised to the session shift its peers (other backends) show"),
    ("interval", STR, "how the interval is computed"), ("fail_if_slower_pct", FLOAT, "the gate's threshold"),
    ("forced", STR, "what --force compared past"))
PROFILE_RUN = (("modelled", BOOL, "the rows are modelled floors, not measurements"),
               ("targets", JSON, "the figures of each target the floors used ([targets.NAME])"),
               ("modes", STR, "memory modes modelled"), ("eps", FLOAT, "LayerNorm eps"), ("seed", INT, "input seed"),
               ("jobs", INT, "worker processes"), ("wall_s", FLOAT, "the run's seconds"),
               ("emu_fidelity", STR, "what the emulator executed and approximates"))
HISTORY_RUN = (("store_url", STR, "the results store read (password hidden)"),
               ("filters", JSON, "the filters given (--kind, --backend, ..., --since), by option"),
               ("last_runs", INT, "--last: the newest runs read"),
               ("exclude_loaded", BOOL, "--exclude-loaded: runs of a busy machine left out"),
               ("change_method", STR, "the change-point method and its settings (lnbench.history.cache.METHOD)"),
               ("fail_on_regression_pct", FLOAT, "--fail-on-regression: the gate's threshold, %"),
               ("regressions", INT, "--fail-on-regression: timed series whose newest change point is such a slowdown"),
               ("unjudged", INT, "--fail-on-regression: timed series with fewer than 6 values (e-divisive cannot "
                                 "split them; modelled floors: fewer than 2): passed unjudged"),
               ("judged_files", STR, "--with: the result files judged as the newest runs (not recorded)"))
MERGE = (("merged_from", INT, "lnbench merge: part files joined"),)
PLANTED = (("planted_slowdown", STR, "a planted slowdown for proving the gate (lnbench.compare.planted)"),)


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
        return str(self.get("device_name") or self.get("device") or "unknown device")

    @property
    def incomplete(self) -> str:
        """Why the run did not finish ("interrupted (SIGINT) after 2 of 40 cases"), or "" (complete, or written
        by an lnbench that did not record it). lnbench.output.sink."""
        if self.get("complete") in (False, "False", "false"):
            return str(self.get("stopped") or "stopped before the end")
        return ""

    @property
    def protocol(self) -> Protocol:
        """The timing protocol as recorded in the metadata (compare's `protocol`)."""
        return Protocol(tuple((name, self[key]) for key, name in self.PROTOCOL_NAMES.items() if key in self))

    @property
    def commit(self) -> str:
        return str(self.get("git_commit") or "")

    def agreement(self) -> dict[str, Any]:
        """The AGREE fields this run records, by name (merge compares them between parts)."""
        return {name: self[name] for name in self.AGREE if name in self}

    def merged(self, parts: int, stopped: str) -> "RunRecord":
        """The run record of a merge of `parts` files of one split, this record holding what they agree on:
        complete unless `stopped` says why not."""
        return self.with_(complete=not stopped, stopped=stopped, merged_from=parts, shard="")


def _run(name: str, doc: str, *sections: tuple, protocol: Mapping[str, str] | None = None,
         agree: tuple[str, ...] = ()) -> type[RunRecord]:
    record = cast(type[RunRecord], record_class(name, cols(*(spec for section in sections for spec in section)),
                                                __name__, doc, base=RunRecord))
    record.PROTOCOL_NAMES = dict(protocol or {})
    record.AGREE = agree
    return record


_COMMON = (IDENTITY, COMPLETION, SHARD, DEVICES, SOURCES, MERGE)
VerifyRun = _run("VerifyRun", "A verify run: identity, seed, jobs.", *_COMMON, VERIFY_RUN,
                 agree=("lnbench_version", "seed", "emu_checks", "device"))
SelftestRun = _run("SelftestRun", "A verify --self-test run.", *_COMMON, VERIFY_RUN)
PerfRun = _run("PerfRun", "A perf run: identity, protocol, load, peak.", *_COMMON, LOAD, PERF_PROTOCOL, PERF_RUN, PLANTED,
               protocol={"P": "processes", "R": "runs", "warmup_s_min": "warmup_s",
                         "min_warmup_calls": "min_warmup_calls", "target_run_s": "target_run_s",
                         "I_min": "min_iters", "I_max": "max_iters", "cold_factor": "cold_factor"},
               agree=("lnbench_version", "headline", "baseline", "modes", "kernel_timer"))
AbiRun = _run("AbiRun", "An abi-compare run: identity, pair, protocol.", *_COMMON, LOAD, ABI_PROTOCOL, ABI_RUN,
              protocol={k: k for k in ("pair", "processes", "runs", "warmup_s", "target_run_s", "iters_clamp",
                                       "dgamma_strategy", "planted_delay_us")},
              agree=("lnbench_version", "pair", "eps", "seed", "confidence", "bootstrap", "static_executed_on"))
InspectRun = _run("InspectRun", "An inspect run: identity, toolkit, executed devices.", *_COMMON, INSPECT_RUN)
CompareRun = _run("CompareRun", "A compare of BASE and NEW: both runs' identities, the statistics.",
                  IDENTITY, COMPLETION, COMPARE_RUN)
ProfileRun = _run("ProfileRun", "A perf --device emu run: identity, the targets' figures (modelled).", *_COMMON,
                  PROFILE_RUN, agree=("lnbench_version", "device", "modes", "eps", "seed", "targets"))
HistoryRun = _run("HistoryRun", "A history of the results store: identity, the store, filters, change-point method.",
                  IDENTITY, HISTORY_RUN)
