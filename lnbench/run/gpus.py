"""`--devices LIST|all`: a command's cases spread over several GPUs of one host.

Each GPU gets its own worker processes, and each worker sees only its GPU: the visibility variable the runtime
reads (CUDA_VISIBLE_DEVICES, or HIP_VISIBLE_DEVICES under ROCm) is set to the one entry of the parent's list
that names it, so the worker's `cuda:0` is that GPU and no other device's stream can be reached.

How the cases run (run_spread): every GPU's group of workers at once, one thread each; on each GPU one group
of workers, as on one GPU (the protocol is unchanged). perf and abi-compare keep host-bound timed runs apart with
a host lock (lnbench.measure.host_lock; lnbench.perf.spread). A GPU whose run raises loses only its own cases:
the others' results are kept. An interrupt stops every GPU's workers (lnbench.run.workers: `stop`).
"""
from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, Sequence, TypeVar

from lnbench.errors import LnbenchUsageError, one_line
from lnbench.run.processes import CPU_AFFINITY_VAR, Stopped, parse_cpu_list

if TYPE_CHECKING:
    from lnbench.results import RunRecord

T = TypeVar("T")
R = TypeVar("R")
_ENTRY = re.compile(r"^(?:cuda:)?(\d+)$")


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of this host as this process's torch numbers it, and how a worker is shown only that GPU."""

    index: int                       # cuda:<index> in this process
    model: str                       # torch's device name, e.g. "NVIDIA H200"
    variable: str                    # CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES
    visible: str                     # this GPU's entry for that variable (an index or a UUID)
    unset: tuple[str, ...] = ()      # variables a worker must not inherit (the other alias under ROCm)
    device: str = ""                 # its device name in this process ("" = the label); tests: a stand-in
    worker_device: str = "cuda:0"    # its name in a worker, which sees only it
    cpus: str = ""                   # the CPUs of its NUMA node ("0-15,32-47"; "" = unknown: not pinned)

    @property
    def label(self) -> str:
        """How rows name the GPU: cuda:N in this process's numbering."""
        return f"cuda:{self.index}"

    @property
    def process_device(self) -> str:
        return self.device or self.label

    def env(self) -> dict[str, str | None]:
        """A worker's environment additions: only this GPU visible (None unsets a variable), and the CPUs near
        it to run on (lnbench.run.processes.pin_to_gpu_cpus): a launch to a GPU on another socket's PCIe root
        costs the host more, which would make the same case slower on one GPU than on another."""
        pin = {CPU_AFFINITY_VAR: self.cpus} if self.cpus else {}
        return {self.variable: self.visible, **{name: None for name in self.unset}, **pin}


def _visibility(environ: dict[str, str], hip: bool) -> tuple[str, list[str] | None, tuple[str, ...]]:
    """(variable to set, the parent's visible entries or None when unrestricted, variables to unset)."""
    unset: tuple[str, ...]
    if hip:      # HIP reads HIP_VISIBLE_DEVICES, else its alias CUDA_VISIBLE_DEVICES: set the first, drop the alias
        listed = environ.get("HIP_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES"))
        variable, unset = "HIP_VISIBLE_DEVICES", ("CUDA_VISIBLE_DEVICES",)
    else:
        listed, variable, unset = environ.get("CUDA_VISIBLE_DEVICES"), "CUDA_VISIBLE_DEVICES", ()
    entries = [e.strip() for e in listed.split(",") if e.strip()] if listed is not None else None
    return variable, entries, unset


def local_cpus(props: object, sysfs: Path = Path("/sys/bus/pci/devices")) -> str:
    """The CPU list of a GPU's NUMA node from its PCI address (torch's device properties carry it), read from
    sysfs; '' where either is unknown (older torch, a sandbox without sysfs) or the node spans every CPU."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return ""
    address = (f"{int(getattr(props, 'pci_domain_id', 0) or 0):04x}:{int(bus):02x}:"
               f"{int(getattr(props, 'pci_device_id', 0) or 0):02x}.0")
    try:
        text = (sysfs / address / "local_cpulist").read_text().strip()
    except OSError:
        return ""
    cpus = parse_cpu_list(text)
    every = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    return text if cpus and not every <= cpus else ""


def host_gpus(environ: dict[str, str] | None = None) -> list[GpuSlot]:
    """Every GPU torch sees in this process, in its numbering, with the CPUs near it."""
    import torch

    if not torch.cuda.is_available():
        return []
    variable, entries, unset = _visibility(dict(os.environ if environ is None else environ),
                                           torch.version.hip is not None)
    count = torch.cuda.device_count()
    return [GpuSlot(i, torch.cuda.get_device_name(i), variable,
                    entries[i] if entries is not None and i < len(entries) else str(i), unset,
                    cpus=local_cpus(torch.cuda.get_device_properties(i))) for i in range(count)]


def parse_devices(text: str | None, force: bool = False, gpus: Sequence[GpuSlot] | None = None) -> list[GpuSlot] | None:
    """--devices value -> the GPUs to use (None: the option was not given). `all` = every GPU torch sees; else a
    comma list of N or cuda:N. Unknown, repeated or mixed-model GPUs (without `force`) are usage errors."""
    if text is None:
        if force:
            raise LnbenchUsageError("--force does nothing without --devices: it allows GPUs of different models in "
                                    "one --devices run")
        return None
    seen = list(host_gpus() if gpus is None else gpus)
    if not seen:
        raise LnbenchUsageError(f"--devices {text}: torch sees no GPU here (--devices spreads cases over a host's "
                                f"GPUs; on this machine use --device)")
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        chosen = seen
    else:
        if not words:
            raise LnbenchUsageError("--devices needs a list (e.g. 0,1 or cuda:0,cuda:1) or all")
        chosen = []
        for word in words:
            match = _ENTRY.match(word)
            if not match:
                raise LnbenchUsageError(f"--devices: {word!r} is not a GPU; use N or cuda:N (or all)")
            index = int(match.group(1))
            if index >= len(seen):
                raise LnbenchUsageError(f"--devices: cuda:{index} does not exist; torch sees {len(seen)} GPU(s) "
                                        f"(cuda:0..cuda:{len(seen) - 1})")
            if any(slot.index == index for slot in chosen):
                raise LnbenchUsageError(f"--devices: cuda:{index} is listed twice")
            chosen.append(seen[index])
    models = sorted({slot.model for slot in chosen})
    if len(models) > 1 and not force:
        counts = ", ".join(f"{m} ×{sum(s.model == m for s in chosen)}" for m in models)
        raise LnbenchUsageError(f"--devices mixes GPU models ({counts}): one headline would mix their times; list "
                                f"GPUs of one model, or add --force")
    return chosen


def deal(items: Sequence[T], count: int, family: Callable[[T], object] | None = None) -> list[list[T]]:
    """Items dealt out in order over `count` lists (item i to list i mod count): balanced within one. With
    `family`, items of one family (consecutive or not) stay together and the families are dealt out: a
    shape's cold and hot cases then run on one GPU, and no GPU gets all of one mode."""
    if family is None:
        return [list(items[k::count]) for k in range(count)]
    groups: dict[object, list[T]] = {}
    for item in items:
        groups.setdefault(family(item), []).append(item)
    lists: list[list[T]] = [[] for _ in range(count)]
    for k, members in enumerate(groups.values()):
        lists[k % count].extend(members)
    return lists


@dataclass
class SlotRun(Generic[R]):
    """What one GPU's run gave back: its result, or the error that stopped it."""

    slot: GpuSlot
    result: R | None = None
    error: str = ""
    seconds: float = 0.0


def run_spread(slots: Sequence[GpuSlot], items: Sequence[Sequence[T]],
               run: Callable[[GpuSlot, list[T], threading.Event], R],
               on_finished: Callable[[SlotRun[R]], object] | None = None) -> list[SlotRun[R]]:
    """run(slot, its items, stop) for every slot with items, all at once (one thread each). An exception in one
    slot's run is recorded in its SlotRun (its cases are lost, no other's); an interrupt of this thread sets
    `stop` for every running slot, waits for them to stop, and goes on. `on_finished` is called in this thread
    as each slot's run ends. Who may time while another GPU times is the runs' business (the host lock)."""
    import time

    stop = threading.Event()
    finished: list[SlotRun[R]] = []

    def one(record: SlotRun[R], chosen: list[T]) -> None:
        start = time.monotonic()
        try:
            record.result = run(record.slot, chosen, stop)
        except (Exception, Stopped) as exc:  # noqa: BLE001 - a GPU that fails loses only its cases
            record.error = one_line(exc) or type(exc).__name__
        record.seconds = time.monotonic() - start

    def report(record: SlotRun[R]) -> None:
        finished.append(record)
        if on_finished is not None:
            on_finished(record)

    threads: list[tuple[threading.Thread, SlotRun[R]]] = []
    try:
        for slot, chosen in zip(slots, items):
            if chosen:
                record: SlotRun[R] = SlotRun(slot)
                thread = threading.Thread(target=one, args=(record, list(chosen)), name=f"lnbench-{slot.label}")
                thread.start()
                threads.append((thread, record))
        pending = list(threads)
        while pending:
            for thread, record in list(pending):
                thread.join(timeout=0.1)
                if not thread.is_alive():
                    pending.remove((thread, record))
                    report(record)
    except BaseException:
        stop.set()                                  # every slot stops its workers, keeping what they finished
        for thread, record in threads:
            thread.join()
            if record not in finished:
                report(record)
        raise
    return finished


def devices_options(func: Callable[..., object]) -> Callable[..., object]:
    """--devices LIST|all and --force (mixing GPU models)."""
    import click

    func = click.option("--force", is_flag=True,
                        help="With --devices: allow GPUs of different models in one run.")(func)
    return click.option("--devices", "devices",
                        help="Spread the cases over these GPUs of this host: all, or a list such as 0,1 or "
                             "cuda:0,cuda:2 (each GPU its own workers; rows name their GPU).")(func)


def record_devices(run: RunRecord, slots: Sequence[GpuSlot] | None,
                   alone_below_mib: float | None = None) -> RunRecord:
    """Set what a result file says about the GPUs a run was spread over (nothing for a plain run)."""
    if not slots:
        return run
    run.devices = ",".join(s.label for s in slots)
    run.device_models = ",".join(sorted({s.model for s in slots}))
    run.device_cpus = ";".join(f"{s.label}={s.cpus or 'not pinned'}" for s in slots)
    if alone_below_mib is not None:
        run.alone_below_mib = alone_below_mib
    return run
