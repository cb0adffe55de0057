"""What crosses between `lnbench abi-compare` and its worker processes (lnbench.abi.worker_main): the spec a worker
is given and the payload it writes back (lnbench.abi.pair_timing), declared once. Only the files between them
(lnbench.run.workers) and the result JSON's `workers` hold JSON dicts: `to_wire` / `from_wire` convert at
that boundary, and both sides read typed attributes. `Share`, the parent's record of one device's workers and what
they returned, is here too: the workers stage fills it and the aggregate stage reads it (neither imports the other)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lnbench.constants import ABI_METRICS
from lnbench.measure.protocol import Protocol
from lnbench.run.workers import known_fields, set_fields
from lnbench.run.gpus import GpuSlot

Shape = tuple[int, int]


@dataclass
class AbiWorkerSpec:
    """A worker's spec: the pair, its cases (ops × dtypes × shapes; probe shapes only take part in the
    alternation check), what to time and how."""

    pair: str
    ops: list[str]
    dtypes: list[str]
    shapes: list[Shape]
    eps: float
    seed: int
    protocol: Protocol
    probe_shapes: list[Shape] = field(default_factory=list)
    device: str = "cpu"
    metrics: list[str] = field(default_factory=lambda: list(ABI_METRICS))
    pair_options: dict[str, Any] = field(default_factory=dict)
    #: an lnbench device name (e.g. null:gfx942), activated in the worker before FlyDSL loads its runtime
    lnbench_device: str = ""
    #: the null device: element budget of the executed checks (None: lnbench.abi.null_device.CHECK_ELEMENTS)
    check_elements: int | None = None
    #: None: $LNBENCH_WORKER_INDEX
    worker_index: int | None = None
    #: torch threads of a worker on the CPU (no thread oversubscription noise)
    cpu_threads: int = 1

    def to_wire(self) -> dict[str, Any]:
        out = set_fields(self)
        out.update(protocol=self.protocol.to_dict(), shapes=[list(s) for s in self.shapes],
                   probe_shapes=[list(s) for s in self.probe_shapes])
        return out

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> AbiWorkerSpec:
        values = known_fields(cls, wire)
        values.update(protocol=Protocol.from_dict(wire.get("protocol", {})),
                      shapes=[(int(m), int(n)) for m, n in wire["shapes"]],
                      probe_shapes=[(int(m), int(n)) for m, n in wire.get("probe_shapes", [])])
        return cls(**values)


@dataclass
class MetricRecord:
    """One measurement of one case in one worker: why it was skipped ('' = measured), I, each side's run values
    (µs per call, one a run), `device` runs whose spin ran out early, and the kernel timer's summary per side."""

    skipped: str = ""
    iters: int = 0
    tensor: list[float] = field(default_factory=list)
    pointer: list[float] = field(default_factory=list)
    spin_short: int = 0
    #: `device` only: side -> lnbench.measure.kernel_stats worker summary
    kernel: dict[str, dict[str, Any]] | None = None

    def runs(self, side: str) -> list[float]:
        """The run values of side "tensor" or "pointer"."""
        return self.tensor if side == "tensor" else self.pointer


@dataclass
class AbiCaseEntry:
    """One case of a worker's payload: its identity, whether a check failed (never timed), its measurements."""

    op: str
    dtype: str
    shape: list[int]
    failed_check: bool = False
    metrics: dict[str, MetricRecord] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        out = set_fields(self)
        out["metrics"] = {name: set_fields(record) for name, record in self.metrics.items()}
        return out

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> AbiCaseEntry:
        values = known_fields(cls, wire)
        values["metrics"] = {name: MetricRecord(**known_fields(MetricRecord, record))
                             for name, record in wire.get("metrics", {}).items()}
        return cls(**values)


@dataclass
class AbiWorkerPayload:
    """A worker's result: who it was, its checks (lnbench.abi.checks results as dicts), each case by key
    (op/dtype/MxN), the rounds done so far, and its duration once it finished."""

    worker: int | None = None
    pid: int = 0
    device: str = "cpu"
    checks: list[dict[str, Any]] = field(default_factory=list)
    cases: dict[str, AbiCaseEntry] = field(default_factory=dict)
    rounds_done: int = 0
    duration_s: float | None = None

    def to_wire(self) -> dict[str, Any]:
        out = set_fields(self)
        out["cases"] = {key: entry.to_wire() for key, entry in self.cases.items()}
        return out

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> AbiWorkerPayload:
        values = known_fields(cls, wire)
        values["cases"] = {key: AbiCaseEntry.from_wire(entry) for key, entry in wire.get("cases", {}).items()}
        return cls(**values)


@dataclass
class Share:
    """The shapes one device's workers time (all of them without --devices), and what the workers returned."""
    slot: GpuSlot | None
    shapes: list[Shape]
    payloads: list[AbiWorkerPayload] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ran: bool = False                       # a result came back for this share (its workers, or the GPU's error)
