"""The result model: every kind of lnbench result declares its row columns once, here, with a schema version.

    kind          written by                        rows
    verify        lnbench verify                    one per backend × case × tensor
    selftest      lnbench verify --self-test        one per planted bug × case × tensor
    perf          lnbench perf                      one per case × worker, + one aggregate row per case
    abi-compare   lnbench abi-compare               runtime rows (case × metric) and static rows (kernel)
    inspect       lnbench inspect                   static rows (kernel), executed rows (launch, --execute)
    compare       lnbench compare                   one per case of BASE and NEW

Writers (cli_common.emit_outputs, through report.rows_frame) take the kind from the metadata's `schema` entry
(`stamp` puts it there): the columns come out in declared order with their declared types, and a row with an
undeclared column or without a required one is a programming error (SchemaError), never silently written.
Every CSV carries `schema` as a column (like the other metadata columns), every JSON in its `metadata`, beside
pandas' Table Schema (`schema` at the top level of the JSON, with `data`): e.g. `verify/1.0`.

Readers (load_result: compare, plot, merge) refuse, as a usage error (one line, exit 2), a file of a kind they
do not take and a file whose schema has a MAJOR version newer than this lnbench declares. A file of an lnbench
from before schemas (no `schema`) reads as version 0 of the kind its columns show (the signatures below).

Versioning: a new optional column is a MINOR change (1.0 -> 1.1: older readers carry it unread); renaming or
removing a column, changing its type or meaning, or making it required is a MAJOR one (2.0).
"""
from __future__ import annotations

import csv
import io
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lnbench.constants import INSTRUCTION_CLASSES as CLASSES
from lnbench.errors import LnbenchUsageError

#: metadata key (and CSV column) naming a result's kind and schema version: "verify/1.0"
SCHEMA_KEY = "schema"

#: column types: what a value is in a row (None / NaN stands for a missing value of any type)
STR, INT, FLOAT, BOOL, LIST = "str", "int", "float", "bool", "list"
#: the pandas dtype a column of each type has in a frame (load_result, report.rows_frame)
PANDAS_DTYPES = {STR: "object", INT: "Int64", FLOAT: "float64", BOOL: "boolean", LIST: "object"}


class SchemaError(RuntimeError):
    """Rows that break their kind's declaration: a programming error in lnbench (a test catches it)."""


@dataclass(frozen=True)
class Col:
    """One declared column: its name, type (STR, INT, FLOAT, BOOL, LIST: a list of numbers, joined by `;` in a
    CSV cell), what it means, and whether every row has it."""

    name: str
    type: str
    meaning: str
    required: bool = False


@dataclass(frozen=True)
class Kind:
    """A result kind: its name, schema version ("MAJOR.MINOR") and row columns in file order."""

    name: str
    version: str
    columns: tuple[Col, ...]
    #: columns that identify a file of this kind written before schemas (version 0)
    signature: frozenset[str] = field(default_factory=frozenset)

    @property
    def schema(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Col | None:
        return next((c for c in self.columns if c.name == name), None)

    def check_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """SchemaError for the first row with an undeclared column or without a required one."""
        declared, required = set(self.names), {c.name for c in self.columns if c.required}
        for i, row in enumerate(rows):
            extra = [k for k in row if k not in declared]
            missing = [k for k in required if k not in row]
            if extra or missing:
                what = "; ".join(filter(None, [extra and f"undeclared column(s) {', '.join(extra)}",
                                                missing and f"required column(s) {', '.join(sorted(missing))} missing"]))
                raise SchemaError(f"{self.name} row {i}: {what} (lnbench.results)")

    def check_types(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """SchemaError for the first value that is not of its column's declared type (missing values pass)."""
        for i, row in enumerate(rows):
            for key, value in row.items():
                col = self.column(key)
                if col is not None and not value_fits(value, col.type):
                    raise SchemaError(f"{self.name} row {i}: {key} = {value!r} is not {col.type} (lnbench.results)")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def value_fits(value: Any, kind: str) -> bool:
    """Is `value` of column type `kind` (or missing)?"""
    if _missing(value):
        return True
    if kind == STR:
        return isinstance(value, str)
    if kind == BOOL:
        return isinstance(value, (bool, np.bool_))
    if kind == INT:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind == FLOAT:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind == LIST:
        return isinstance(value, (list, tuple, str))     # a CSV cell holds the list joined by `;`
    return False


def _cols(*specs: tuple, required: Sequence[str] = ()) -> tuple[Col, ...]:
    return tuple(Col(name, kind, meaning, name in required) for name, kind, meaning in specs)


#: the GPU a row ran on, with --devices (lnbench.gpus); `timed_alone`: perf/abi-compare cases timed with the
#: other GPUs idle
_GPU = (("gpu", STR, "--devices: the GPU the row ran on (cuda:N)"), ("gpu_model", STR, "--devices: its model"))
_ALONE = (("timed_alone", BOOL, "--devices: timed with every other GPU idle (host-bound case)"),)
#: perf: how much of a run the host's launches took, and why a --devices case ran alone
_HOST = (("host_fraction", FLOAT, "share of an untimed run the host spent issuing its calls (1: host-bound)"),
         ("alone_reason", STR, "--devices: size (bytes per call below alone_below_mib) or measured (host_fraction)"))
#: a kernel source's provenance, on the rows of a `module:PKG.MOD` / flydsl-src backend (flydsl.contract)
_SOURCE = (("source", STR, "kernel source backend name"), ("source_module", STR, "its Python module"),
           ("source_file", STR, "the module's file"), ("source_commit", STR, "git commit of the file's checkout"))
_CASE = (("case", STR, "case kind (random, offset rows, ...)"), ("dtype", STR, "f32, f16 or bf16"),
         ("shape", STR, "MxN"), ("M", INT, "rows"), ("N", INT, "row length"), ("eps", FLOAT, "LayerNorm eps"),
         ("seed", INT, "input seed of the case"))
_CHECK = (("tensor", STR, "y, mean, rstd, dx, dweight, dbias, or - for a case without values"),
          ("max_abs_err", FLOAT, "max |backend − fp64 reference|"),
          ("max_rel_err", FLOAT, "max element-wise relative error (huge near zero references)"),
          ("torch_err", FLOAT, "torch's own max abs error in the same dtype"),
          ("allowed", FLOAT, "the pass bar (docs/verify.md)"), ("margin", FLOAT, "allowed − max_abs_err"),
          ("determinism", STR, "dγ/dβ repeat check"), ("status", STR, "PASS, FAIL, error, not run, compiled ..."),
          ("detail", STR, "why a row failed or did not run"))

VERIFY = Kind("verify", "1.0", _cols(
    ("backend", STR, "backend checked"), *_CASE, *_CHECK,
    ("emu_opcodes", STR, "emulated: opcodes the case's launches executed"),
    ("emu_approx", STR, "emulated: those the emulator approximates"),
    ("emu_code", STR, "emulated: SHA-256 (12 hex digits) of each FlyDSL code object launched"),
    *_SOURCE, *_GPU, required=("backend", "case", "dtype", "shape", "tensor", "status")),
    frozenset({"tensor", "max_abs_err", "allowed", "case"}))

SELFTEST = Kind("selftest", "1.0", _cols(
    ("planted_bug", STR, "planted bug (or control) in a copy of the reference math"),
    ("backend", STR, "the planted copy's name"), *_CASE, *_CHECK,
    required=("planted_bug", "case", "dtype", "shape", "tensor", "status")),
    frozenset({"planted_bug", "tensor", "max_abs_err", "allowed"}))

#: kernel-timer columns (measure.kernel_stats.row_columns), with their prefix
def _kernel(prefix: str = "", who: str = "") -> tuple[tuple[str, str, str], ...]:
    return ((f"{prefix}kernel_status", STR, f"{who}kernel timer: ok, n/a (why), error (why), partial"),
            (f"{prefix}kernel_us", FLOAT, f"{who}median GPU kernel time per call, µs"),
            (f"{prefix}kernel_min_us", FLOAT, f"{who}fastest kernel time, µs"),
            (f"{prefix}kernel_max_us", FLOAT, f"{who}slowest kernel time, µs"),
            (f"{prefix}kernels_per_call", FLOAT, f"{who}kernel launches per call"),
            (f"{prefix}kernel_names", STR, f"{who}kernel names and counts (JSON)"),
            (f"{prefix}gap_us", FLOAT, f"{who}event time − kernel time, µs"))

PERF = Kind("perf", "1.0", _cols(
    ("backend", STR, "backend timed"), ("op", STR, "fwd or bwd"), ("dtype", STR, "f32, f16 or bf16"),
    ("shape", STR, "MxN"), ("M", INT, "rows"), ("N", INT, "row length"), ("mode", STR, "timing mode (hot, cold)"),
    ("row_kind", STR, "worker (one worker's runs) or aggregate (across workers)"),
    ("worker", INT, "worker index (worker rows)"), ("order", INT, "the case's place in its worker's order"),
    ("iters", INT, "calls per run (I)"), ("runs", INT, "timed runs (R)"),
    ("run_us", LIST, "µs per call of each run (aggregate: each worker's median)"),
    ("median_us", FLOAT, "median µs per call (aggregate: median of worker medians)"),
    ("min_us", FLOAT, "fastest, µs"), ("max_us", FLOAT, "slowest, µs"),
    ("spread_pct", FLOAT, "(max − min) / median, %"), ("gbps", FLOAT, "GB/s at the headline time"),
    ("pct_peak", FLOAT, "% of the measured copy bandwidth"), ("above_peak", BOOL, "gbps above the peak"),
    ("speedup", FLOAT, "baseline time / this time (aggregate rows)"), ("nbytes", INT, "bytes moved per call"),
    ("sets", INT, "input sets rotated (cold mode)"), ("working_set_mib", FLOAT, "bytes touched per call, MiB"),
    ("llc_mib", FLOAT, "last-level cache size used, MiB"), ("timer", STR, "what timed the runs"),
    ("warmup_calls", INT, "warm-up calls"), ("warmup_s", FLOAT, "warm-up seconds"), ("note", STR, "remarks"),
    *_kernel(), ("kernel_run_us", LIST, "kernel µs per call of each run"),
    ("kernel_window_us", FLOAT, "traced window per call, µs"),
    ("kernel_untraced_window_us", FLOAT, "the same window without tracing, µs"),
    ("kernel_note", STR, "kernel timer remarks"), ("headline", STR, "stream or kernel: the time rates use"),
    ("worker_flag", STR, "why a worker stands out"), ("status", STR, "ok, partial, error, not run"),
    ("detail", STR, "why a row is not ok"), ("iters_range", STR, "min-max calls per run across workers"),
    *_SOURCE, *_GPU, *_ALONE, *_HOST, required=("backend", "op", "dtype", "shape", "mode", "row_kind", "status")),
    frozenset({"row_kind", "run_us", "median_us", "backend", "mode"}))

_SIDES = ("tensor", "pointer")
_STATIC_FIELDS = (("kernarg", "kernarg bytes"), ("slots", "launcher slots"), ("vgpr", "VGPRs"), ("sgpr", "SGPRs"),
                  ("lds", "LDS bytes"), ("scratch", "scratch bytes"), ("instr", "ISA instructions"),
                  ("args", "kernel arguments"), ("spills", "VGPR + SGPR spills"))

ABI = Kind("abi-compare", "1.1", _cols(     # 1.1: verdicts in the words of compare (1.0: lowercase)
    ("part", STR, "runtime or static"), ("pair", STR, "the call-path pair compared"),
    ("op", STR, "fwd, fwd-nostats or bwd"), ("dtype", STR, "f32, f16 or bf16"), ("shape", STR, "MxN (runtime)"),
    ("M", INT, "rows"), ("N", INT, "row length"), ("metric", STR, "direct, wrapper or device (runtime)"),
    ("tensor_label", STR, "what the Tensor slot runs"), ("pointer_label", STR, "what the Pointer slot runs"),
    *((f"{s}_{what}", FLOAT, f"{s} side: {meaning}") for s in _SIDES
      for what, meaning in (("us", "median of worker medians, µs per call"), ("min_us", "fastest worker, µs"),
                            ("max_us", "slowest worker, µs"))),
    ("tensor_calls_per_s", FLOAT, "Tensor calls per second"), ("pointer_calls_per_s", FLOAT, "Pointer calls per second"),
    ("speedup", FLOAT, "tensor_us / pointer_us"), ("ci_low", FLOAT, "speed-up, paired bootstrap interval, low"),
    ("ci_high", FLOAT, "speed-up, paired bootstrap interval, high"),
    ("confidence", FLOAT, "the interval's confidence"),
    ("mw_p", FLOAT, "Mann-Whitney p"), ("verdict", STR, "FASTER, SAME, SLOWER, too few runs (lnbench.verdicts)"),
    ("slowdown_pct", FLOAT, "Pointer slower by, %"), ("iters", INT, "calls per run"), ("workers", INT, "workers"),
    ("runs", INT, "runs per worker"), ("spin_short", INT, "device runs whose spin ended early"),
    ("status", STR, "ok, error, not run ..."), ("worker_flag", STR, "why a worker stands out"),
    ("detail", STR, "remarks"), ("scope", STR, "what a runtime row measured (host only on the null device)"),
    *_kernel("tensor_", "Tensor side: "), *_kernel("pointer_", "Pointer side: "),
    ("kernel_speedup", FLOAT, "kernel-time speed-up Tensor / Pointer"),
    ("kernel_ci_low", FLOAT, "its paired bootstrap interval, low"),
    ("kernel_ci_high", FLOAT, "its interval, high"), ("kernel_verdict", STR, "its verdict (lnbench.verdicts)"),
    ("arch", STR, "static: target arch"), ("kernel", STR, "static: kernel role"),
    ("tensor_kernel", STR, "static: Tensor-side kernel name"), ("pointer_kernel", STR, "static: Pointer-side kernel name"),
    *((f"{what}_{s}", INT, f"static: {meaning}, {s} side") for what, meaning in _STATIC_FIELDS for s in _SIDES),
    *((f"{what}_ratio", FLOAT, f"static: {what} pointer / tensor") for what in ("kernarg", "args", "slots", "instr")),
    ("tensor_args_list", STR, "static: Tensor kernel arguments offset:size:kind"),
    ("pointer_args_list", STR, "static: Pointer kernel arguments offset:size:kind"),
    ("exec_rows", INT, "executed (emulated): rows M"),
    *((f"exec_{s}", INT, f"executed: wave-instructions, {s} side") for s in _SIDES),
    *((f"exec_per_row_{s}", FLOAT, f"executed: wave-instructions per row, {s} side") for s in _SIDES),
    ("exec_ratio", FLOAT, "executed: pointer / tensor wave-instructions"),
    *((f"exec_{c}_{s}", INT, f"executed: {c} wave-instructions, {s} side") for c in CLASSES for s in _SIDES),
    *((f"exec_code_{s}", STR, f"executed: SHA-256 (16 hex digits) of the {s} side's code object") for s in _SIDES),
    ("exec_status", STR, "executed: ok or error (why)"),
    ("tensor_source", STR, "backend pair: the Tensor slot's kernels (module@commit)"),
    ("pointer_source", STR, "backend pair: the Pointer slot's kernels (module@commit)"),
    *_GPU, *_ALONE, required=("part", "status")),
    frozenset({"part"}))

INSPECT = Kind("inspect", "1.0", _cols(
    ("part", STR, "static (compiled) or executed (emulated launch)"), ("backend", STR, "kernels inspected"),
    ("abi", STR, "pointer or tensor"), ("dgamma_strategy", STR, "deterministic or atomic (bwd)"),
    ("arch", STR, "gfx942 or gfx950"), ("op", STR, "fwd, fwd-nostats or bwd"), ("dtype", STR, "f32, f16 or bf16"),
    ("n", INT, "row length N"), ("kernel_name", STR, "kernel symbol"), ("kernarg_bytes", INT, "kernarg segment bytes"),
    ("kernel_args", STR, "arguments offset:size:kind"), ("launcher_slots", INT, "host dispatch slots"),
    ("vgpr", INT, "VGPRs"), ("sgpr", INT, "SGPRs"), ("agpr", INT, "AGPRs"), ("vgpr_spills", INT, "VGPR spills"),
    ("sgpr_spills", INT, "SGPR spills"), ("lds_bytes", INT, "static LDS bytes"), ("scratch_bytes", INT, "scratch bytes"),
    ("loads_128bit", BOOL, "ISA has 128-bit loads"), ("stores_128bit", BOOL, "ISA has 128-bit stores"),
    ("instruction_count", INT, "ISA instructions"), ("vectorized", BOOL, "the plan's vector path"),
    ("arg_count", INT, "kernel arguments"), ("spills", STR, "VGPR/SGPR spills"),
    ("status", STR, "ok, error, not run"), ("detail", STR, "why not ok"), ("isa_file", STR, "--isa: the file written"),
    ("M", INT, "executed: rows"), ("shape", STR, "executed: MxN"), ("grid", STR, "executed: grid"),
    ("block", STR, "executed: block"), ("waves", INT, "executed: waves launched"),
    ("exec_instructions", INT, "executed: wave-instructions"),
    ("exec_instructions_per_row", FLOAT, "executed: wave-instructions per row"),
    ("global_bytes_loaded", INT, "executed: global bytes loaded"), ("global_bytes_stored", INT, "executed: stored"),
    ("global_bytes_per_row", FLOAT, "executed: global bytes per row"), ("lds_bytes_executed", INT, "executed: LDS bytes"),
    ("code_object", STR, "executed: SHA-256 (16 hex digits) of the code object launched"),
    ("unique_bytes_loaded", INT, "executed: distinct bytes loaded"),
    ("unique_bytes_stored", INT, "executed: distinct bytes stored"),
    *((f"exec_{c}", INT, f"executed: {c} wave-instructions") for c in CLASSES),
    ("kernel", STR, "executed: kernel role"), ("launch", STR, "executed: grid × block"),
    ("unique_bytes", STR, "executed: distinct bytes loaded / stored"),
    *_SOURCE, required=("part", "backend", "arch", "op", "dtype", "status")),
    frozenset({"part", "kernel_name", "kernarg_bytes"}))

COMPARE = Kind("compare", "1.0", _cols(
    ("backend", STR, "backend (abi-compare: pair:side)"), ("op", STR, "op"), ("dtype", STR, "dtype"),
    ("shape", STR, "MxN"), ("mode", STR, "perf mode (abi-compare: metric)"), ("base_us", FLOAT, "BASE headline, µs"),
    ("new_us", FLOAT, "NEW headline, µs"), ("ratio", FLOAT, "new / base"), ("ci_low", FLOAT, "interval, low"),
    ("ci_high", FLOAT, "interval, high"), ("change_pct", FLOAT, "(ratio − 1) × 100"), ("p", FLOAT, "paired t p"),
    ("verdict", STR, "SLOWER, FASTER, SAME, too few runs, only in base/new, not compared (lnbench.verdicts)"),
    ("workers", INT, "paired workers"), ("detail", STR, "remarks"),
    required=("backend", "op", "dtype", "shape", "mode", "verdict")),
    frozenset({"verdict", "ratio", "ci_low", "ci_high"}))

KINDS: dict[str, Kind] = {k.name: k for k in (VERIFY, SELFTEST, PERF, ABI, INSPECT, COMPARE)}
#: the names readers pass to load_result
PERF_KIND, ABI_KIND, VERIFY_KIND, COMPARE_KIND, INSPECT_KIND, SELFTEST_KIND = (
    PERF.name, ABI.name, VERIFY.name, COMPARE.name, INSPECT.name, SELFTEST.name)


def stamp(metadata: dict[str, Any], kind: Kind) -> dict[str, Any]:
    """`metadata` with its kind's `schema` entry (in place, and returned)."""
    metadata[SCHEMA_KEY] = kind.schema
    return metadata


def kind_of_metadata(metadata: Mapping[str, Any]) -> Kind:
    """The declared kind a writer's metadata names (SchemaError when it names none: every result is stamped)."""
    name = str(metadata.get(SCHEMA_KEY, "")).rsplit("/", 1)[0]
    if name not in KINDS:
        raise SchemaError(f"result metadata names no declared kind (schema = {metadata.get(SCHEMA_KEY)!r})")
    return KINDS[name]


def ordered_columns(kind: Kind, present: Iterable[str]) -> list[str]:
    """The declared columns among `present`, in declared order."""
    have = set(present)
    return [name for name in kind.names if name in have]


def typed(frame: pd.DataFrame, kind: Kind) -> pd.DataFrame:
    """`frame` with each declared column cast to its declared pandas dtype where its values allow (a column that
    does not cast is left as it is: an older file's oddity is the reader's to refuse, not this cast's)."""
    for name in frame.columns:
        col = kind.column(name)
        if col is None or col.type in (STR, LIST):
            if col is not None:
                frame[name] = frame[name].astype("object")
            continue
        try:
            frame[name] = frame[name].astype(PANDAS_DTYPES[col.type])
        except (TypeError, ValueError):
            pass
    return frame


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class ResultFile:
    """One result file: its kind and schema version (0: written before schemas), run metadata and rows."""

    path: Path
    kind: str
    metadata: dict[str, Any]
    rows: pd.DataFrame
    #: the JSON payload's other top-level entries (perf: protocol, peak, workers; abi-compare: workers, ...)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the whole JSON payload as parsed, for tools that rewrite a result (compare.planted); None for a CSV
    payload: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    version: str = "0"

    @property
    def incomplete(self) -> str:
        """Why the run that wrote this file did not finish ("interrupted (SIGINT) after 2 of 40 cases"), or ""
        for a complete run (and for files of lnbench versions that did not record it). lnbench.result_sink."""
        if self.metadata.get("complete") in (False, "False", "false"):
            return str(self.metadata.get("stopped") or "stopped before the end")
        return ""


def _infer_kind(columns: set[str], metadata: dict[str, Any]) -> str | None:
    """The kind of a file written before schemas, from its columns (as lnbench read them then)."""
    if metadata.get("command") == COMPARE.name and COMPARE.signature <= columns:
        return COMPARE.name
    for kind in (PERF, ABI, VERIFY):
        if kind.signature <= columns and (kind is not ABI or "pair" in columns or "pair" in metadata):
            return kind.name
    return None


def _declared(path: Path, schema: Any) -> tuple[str, str]:
    """(kind, version) of a `schema` entry; a usage error for one this lnbench cannot read."""
    text = str(schema)
    name, _, version = text.rpartition("/")
    major = version.split(".")[0]
    if name not in KINDS or not major.isdigit():
        raise LnbenchUsageError(f"{path}: unknown result schema {text!r} (this lnbench reads "
                                f"{', '.join(k.schema for k in KINDS.values())})")
    if int(major) > KINDS[name].major:
        raise LnbenchUsageError(f"{path} has schema {text}, newer than this lnbench reads ({KINDS[name].schema}): "
                                f"upgrade lnbench")
    return name, version


def _read_text(path: Path) -> str:
    if not path.exists():
        raise LnbenchUsageError(f"{path}: no such file")
    if path.is_dir():
        raise LnbenchUsageError(f"{path} is a directory, not a result file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LnbenchUsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        raise LnbenchUsageError(f"{path} is empty")
    return text


def _classify(path: Path, frame: pd.DataFrame, metadata: dict[str, Any]) -> tuple[str, str]:
    if SCHEMA_KEY in metadata and not _missing(metadata[SCHEMA_KEY]):
        return _declared(path, metadata[SCHEMA_KEY])
    kind = _infer_kind(set(frame.columns), metadata)
    if kind is None:
        raise LnbenchUsageError(f"{path} is not a result of lnbench perf, abi-compare, verify or compare")
    return kind, "0"


def _from_json(path: Path, text: str) -> ResultFile:
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise LnbenchUsageError(f"{path} is not valid JSON (truncated?): {exc}") from None
    rows_key = "data" if isinstance(payload, dict) and "schema" in payload else "rows"   # new: Table Schema
    if not isinstance(payload, dict) or not isinstance(payload.get(rows_key), list) \
            or not isinstance(payload.get("metadata"), dict):
        raise LnbenchUsageError(f"{path} is not an lnbench result (no metadata and rows)")
    rows = payload[rows_key]
    if not rows:
        raise LnbenchUsageError(f"{path} holds no result rows")
    if not all(isinstance(r, dict) for r in rows):
        raise LnbenchUsageError(f"{path} is not an lnbench result (rows are not records)")
    metadata = payload["metadata"]
    if SCHEMA_KEY in metadata:                  # refuse a newer file before parsing its rows
        _declared(path, metadata[SCHEMA_KEY])
    frame = _table_frame(path, text) if rows_key == "data" else pd.DataFrame(rows)
    kind, version = _classify(path, frame, metadata)
    extra = {k: v for k, v in payload.items() if k not in ("rows", "data", "schema", "metadata")}
    return ResultFile(path, kind, metadata, frame, extra, payload, version)


def _table_frame(path: Path, text: str) -> pd.DataFrame:
    """The rows of a Table Schema result, each column of its declared type (worker indices stay integers)."""
    try:
        return pd.read_json(io.StringIO(text), orient="table")
    except (ValueError, KeyError, TypeError) as exc:
        raise LnbenchUsageError(f"{path}: malformed rows: {str(exc).splitlines()[0] if str(exc) else exc}") from None


def rows_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The row records of a parsed result JSON, new (Table Schema "data") or old ("rows")."""
    return payload["data"] if "schema" in payload else payload["rows"]


def _check_complete_csv(path: Path, text: str) -> None:
    """lnbench writes every record with all its fields and ends the file with a newline: a file cut anywhere
    but at a record boundary fails one of the two."""
    records = list(csv.reader(io.StringIO(text)))
    width = len(records[0])
    short = next((i for i, record in enumerate(records[1:], 2) if record and len(record) != width), None)
    if not text.endswith("\n") or short is not None:
        where = f"record {short} has {len(records[short - 1])} of {width} fields" if short else "no final newline"
        raise LnbenchUsageError(f"{path} looks truncated ({where})")


#: row columns that share their name with a run-metadata key but hold each row's own value (verify's per-case
#: input seed, not the run's base seed): a CSV column of that name is never read as the run's metadata
_ROW_VALUED = {VERIFY.name: ("seed",), SELFTEST.name: ("seed",)}


def _from_csv(path: Path, text: str) -> ResultFile:
    try:
        _check_complete_csv(path, text)
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, csv.Error, ValueError) as exc:
        raise LnbenchUsageError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise LnbenchUsageError(f"{path} holds no result rows")
    constant = {c: frame[c].iloc[0] for c in frame.columns if frame[c].nunique(dropna=False) == 1}
    metadata = {k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v) for k, v in constant.items()}
    kind, version = _classify(path, frame, metadata)
    for key in _ROW_VALUED.get(kind, ()):
        metadata.pop(key, None)
    return ResultFile(path, kind, metadata, frame, version=version)


def load_result(path: Path | str, kinds: Sequence[str] = tuple(KINDS), *, what: str = "") -> ResultFile:
    """Read one result file (JSON by content, CSV by suffix): its rows (declared columns of their declared
    dtypes), metadata, kind and schema version. A usage error (one line, exit 2) for a file that is not a
    result, a kind not in `kinds`, a newer MAJOR schema, or a versioned file lacking a required column."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        result = _from_csv(path, text)
    elif text.lstrip().startswith(("{", "[")):
        result = _from_json(path, text)
    else:
        raise LnbenchUsageError(f"{path} is not an lnbench result (expected the JSON or CSV of a run)")
    if result.kind not in kinds:
        use = what or " or ".join(kinds)
        raise LnbenchUsageError(f"{path} is from lnbench {result.kind}; this needs {use}")
    kind = KINDS[result.kind]
    if result.version != "0":
        missing = [c.name for c in kind.columns if c.required and c.name not in result.rows.columns]
        if missing:
            raise LnbenchUsageError(f"{path} lacks the required column(s) {', '.join(missing)} of {kind.schema}")
    typed(result.rows, kind)
    return result


def require_columns(result: ResultFile, columns: Sequence[str]) -> None:
    """Fail (usage error naming the file) when a column a reader needs is missing."""
    missing = [c for c in columns if c not in result.rows.columns]
    if missing:
        raise LnbenchUsageError(f"{result.path} lacks column(s) {', '.join(missing)} of an lnbench {result.kind} result")
