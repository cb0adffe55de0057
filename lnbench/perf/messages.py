"""What crosses between `lnbench perf` and its worker processes (lnbench.perf.worker_main): the spec a worker is
given and the payload it writes back, declared once. Only the files between them (lnbench.run.workers) hold
JSON dicts: `to_wire` / `from_wire` convert at that boundary, and both sides read typed attributes."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from lnbench.run.workers import WorkerResult, known_fields, set_fields
from lnbench.perf.cases import PerfCase
from lnbench.perf.protocol import PerfProtocol

#: where a worker's time went (its payload's seconds, each set as that part ends): start-up (side by side with
#: the others), then its turn
PHASES = ("startup_s", "stream_s", "kernel_s", "lock_wait_s")


@dataclass(frozen=True)
class CaseSpec(PerfCase):
    """One case a worker times: its PerfCase (lnbench.perf.cases), and whether it is timed alone."""

    #: several GPUs: host-bound by size, so its timed runs hold the host lock exclusive (lnbench.perf.spread)
    alone: bool = False

    @classmethod
    def of(cls, case: PerfCase, alone: bool = False) -> CaseSpec:
        return cls(**{f.name: getattr(case, f.name) for f in fields(case)}, alone=alone)


@dataclass
class PerfWorkerSpec:
    """A worker's spec: its device, the protocol, how many turns it waits for (1: stream pass only; 3: with the
    kernel pass, lnbench.perf.worker_main.KERNEL_PHASES) and its cases in the order it times them."""

    device: str
    protocol: PerfProtocol
    cases: list[CaseSpec]
    phases: int = 1
    #: several GPUs: the host share of an untimed run that makes a case host-bound (lnbench.measure.host_lock)
    alone_host_fraction: float | None = None

    def to_wire(self) -> dict[str, Any]:
        out = set_fields(self)
        out.update(protocol=self.protocol.to_dict(), cases=[set_fields(c) for c in self.cases])
        return out

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> PerfWorkerSpec:
        values = known_fields(cls, wire)
        values.update(protocol=PerfProtocol.from_dict(wire.get("protocol", {})),
                      cases=[CaseSpec(**known_fields(CaseSpec, c)) for c in wire.get("cases", [])])
        return cls(**values)


@dataclass
class CaseResult:
    """What a worker reports of one case. status: "ok", "error" or "not run" (an entry naming none: "error")."""

    id: int
    status: str = "error"
    detail: str = ""
    #: the stream-timed runs (lnbench.measure.timing.Measurement.to_dict()), when it ran
    measurement: dict[str, Any] | None = None
    nbytes: int | None = None
    sets: int | None = None
    working_set_bytes: int = 0
    llc_bytes: int = 0
    note: str = ""
    #: why its timed runs held the host lock exclusive: "size", "measured" or "" (lnbench.measure.host_lock)
    alone: str = ""
    lock_spans: list[Any] = field(default_factory=list)
    seconds: float | None = None
    #: the kernel timer's worker summary (lnbench.measure.kernel_stats), for cases that ran
    kernel: dict[str, Any] | None = None

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> CaseResult:
        values = known_fields(cls, wire)
        values["id"] = int(values["id"])
        return cls(**values)


@dataclass
class PerfWorkerPayload:
    """A worker's result: who it was, whether it finished, each case it reported, and the seconds of its phases
    (PHASES; None until that phase ends)."""

    worker: int = 0
    pid: int = 0
    device: str = "cpu"
    complete: bool = False
    cases: list[CaseResult] = field(default_factory=list)
    startup_s: float | None = None
    stream_s: float | None = None
    kernel_s: float | None = None
    lock_wait_s: float | None = None

    def phase_s(self, name: str) -> float:
        """Seconds of phase `name` (one of PHASES); NaN when the worker did not say."""
        value = getattr(self, name)
        return math.nan if value is None else float(value)

    def to_wire(self) -> dict[str, Any]:
        out = set_fields(self)
        out["cases"] = [set_fields(c) for c in self.cases]
        return out

    @classmethod
    def from_wire(cls, wire: dict[str, Any] | None) -> PerfWorkerPayload:
        """The payload of a result file (None or {}: an empty one); entries without an id are left out."""
        values = known_fields(cls, wire or {})
        values["cases"] = [CaseResult.from_wire(e) for e in values.get("cases", []) if isinstance(e, dict) and "id" in e]
        return cls(**values)


def payload_of(result: WorkerResult) -> PerfWorkerPayload:
    """A worker result's payload, typed (an empty one when the worker wrote none)."""
    return PerfWorkerPayload.from_wire(result.payload)
