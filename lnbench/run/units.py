"""A queue of units dealt to worker processes of a Pool (lnbench.run.pool) as they come free: `verify --jobs`.

The parent gives a worker one unit at a time, its index as a line on the worker's stdin; the worker (`serve`)
answers with one JSON line on a pipe of its own: {"unit", "seconds", ...its answer}. A worker that has an
answer gets the next unit the queue deals it (`take(worker number)`: lnbench.verify.affinity keeps workers
to the kernels they have compiled); with no unit left its stdin is closed and it exits.

A worker that dies (a segfault, the OOM killer, SIGKILL) costs only the unit it was running: `on_lost` gets
that unit with the worker's exit status and the last line of its stderr, every answer it gave before stands,
and a fresh worker takes its place. Workers started for a slot (a GPU: --devices) that die `slot_deaths`
times in a row without answering a unit get no fresh worker: the other slots take the units; those that no
slot is left for are returned. Leaving `run_units` any other way (Ctrl-C, SIGTERM) stops every worker with the
pool: what was answered is kept by the caller, the units not reached were never run.
"""
from __future__ import annotations

import json
import os
import selectors
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from lnbench.run.pool import Pool, Worker

#: workers of one slot that die this many times in a row without finishing a unit: the slot takes no more units
SLOT_DEATHS = 2


class Queue(Protocol):
    """Pending units, dealt to workers by number (lnbench.verify.affinity.AffinityQueue; `InOrder`)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[int]: ...

    def take(self, worker: int) -> int: ...

    def release(self, worker: int) -> None: ...


class InOrder:
    """Units dealt in the order given, whatever worker asks."""

    def __init__(self, order: Sequence[int]) -> None:
        self._pending = list(order)

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._pending))

    def take(self, worker: int) -> int:
        return self._pending.pop(0)

    def release(self, worker: int) -> None:
        pass


@dataclass
class Lost:
    """A unit whose worker died while running it."""

    unit: int
    exit_code: int | None
    last_line: str
    seconds: float


@dataclass
class _Busy:
    """A worker of the queue: which slot it serves, the unit it runs and since when."""

    worker: Worker
    slot: int
    unit: int | None = None
    started: float = 0.0
    buffer: bytes = b""
    finished: int = 0

    def give(self, unit: int) -> None:
        self.unit, self.started = unit, time.monotonic()
        self.worker.send(str(unit))       # (one that died already: its EOF reports the unit)


def run_units(pool: Pool, start: Callable[[int, Any], Worker], queue: Queue, slots: Sequence[Any],
              on_answer: Callable[[int, dict[str, Any], Any], None], on_lost: Callable[[Lost, Any], None],
              slot_deaths: int = SLOT_DEATHS) -> list[int]:
    """Run every unit of `queue` in one worker per slot (module docstring); returns the units left over when the
    workers of every slot died.

    start(number, slot) starts worker `number` in `pool` with an answer pipe (slot: an item of `slots`, e.g. a
    GPU, or None); on_answer(unit, answer, slot) as each unit is answered (answer: the worker's JSON object,
    with "seconds"); on_lost(lost, slot) for a unit whose worker died. A slot None always gets a fresh worker."""
    busy: dict[int, _Busy] = {}
    selector = selectors.DefaultSelector()
    started = 0
    deaths: dict[int, int] = {}

    def launch(position: int) -> None:
        nonlocal started
        worker = start(started, slots[position])
        started += 1
        if worker.proc is None:
            raise OSError(worker.start_error)
        assert worker.fd is not None                   # a started worker has its answer pipe
        one = busy[worker.fd] = _Busy(worker, position)
        selector.register(worker.fd, selectors.EVENT_READ)
        one.give(queue.take(worker.number))

    try:
        for position in range(min(len(slots), len(queue))):
            launch(position)
        while busy:
            for key, _ in selector.select(timeout=0.5):
                one = busy[key.fd]
                data = os.read(key.fd, 1 << 16)
                if not data:                                   # the worker is gone
                    selector.unregister(key.fd)
                    del busy[key.fd]
                    assert one.worker.proc is not None         # launch() keeps started workers only
                    one.worker.proc.wait()
                    queue.release(one.worker.number)
                    slot = slots[one.slot]
                    if one.unit is not None:
                        on_lost(Lost(one.unit, one.worker.exit_code, one.worker.last_line(),
                                     time.monotonic() - one.started), slot)
                    pool.forget(one.worker)
                    deaths[one.slot] = 0 if one.finished else deaths.get(one.slot, 0) + 1
                    if queue and (slot is None or deaths[one.slot] < slot_deaths):
                        launch(one.slot)
                    continue
                one.buffer += data
                while b"\n" in one.buffer:
                    line, one.buffer = one.buffer.split(b"\n", 1)
                    answer = json.loads(line)
                    unit, one.unit = one.unit, None
                    if unit is None or unit != answer["unit"]:
                        raise RuntimeError(f"worker answered unit {answer['unit']}, was given {unit}")
                    one.finished += 1
                    on_answer(unit, answer, slots[one.slot])
                    if queue:
                        one.give(queue.take(one.worker.number))
                    else:
                        one.worker.close_stdin()               # no more work: it exits, EOF follows
        return list(queue)
    finally:
        selector.close()
        pool.stop_all()


def serve(answer: Callable[[int], dict[str, Any]], out_fd: int) -> None:
    """Worker side: answer each unit named on stdin, one JSON line each on the pipe `out_fd` (module docstring)."""
    out = os.fdopen(out_fd, "w")
    for line in sys.stdin:
        unit = int(line)
        start = time.monotonic()
        message = answer(unit)
        out.write(json.dumps({"unit": unit, **message, "seconds": time.monotonic() - start}) + "\n")
        out.flush()
