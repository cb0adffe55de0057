"""Progress of a long command on stderr: rich's live bar on a terminal, plain lines in a log.

A CI log (stderr not a terminal) gets one line per finished unit, "[7/24 29%] worker 2/3: torch fwd bf16
4096x4096 cold ok (12 s)", so it shows life; with many units (verify's hundreds of cases) at most one line
every LINE_INTERVAL_S seconds, and always the last one. Given a `remaining` callback (seconds left, from an
estimate such as lnbench.verify.estimate), both show it: "(12 s, ~3 min left)".

The time left is refreshed on its own, not only when a unit finishes (a long case may run for minutes): a
thread calls `tick` every TICK_S, which redraws the bar's "~left" on a terminal and, in a log, prints a line when
none was printed for LINE_INTERVAL_S (the same line, without a new unit).

The bar stays on screen when it ends, at its last count (N/N when every unit finished), on its own line; a
command prints its tables after leaving the `with` block. Nothing is redirected while the bar runs: a table
printed to stdout under a live bar on stderr landed on the bar's line and froze it short of N/N.
"""
from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from lnbench.output.tables import fmt_duration

#: above this many units, log lines are throttled to one per LINE_INTERVAL_S
MANY_UNITS = 100
LINE_INTERVAL_S = 2.0
#: how often the time left is refreshed between finished units
TICK_S = 1.0


class CommandProgress:
    """`with CommandProgress(console, "verifying", total) as p: ... p.advance(label)` or p.update(done, ...)."""

    def __init__(self, console: Console, description: str, total: int | None, quiet: bool = False,
                 remaining: Callable[[], float] | None = None, clock: Callable[[], float] = time.monotonic,
                 ticking: bool = True) -> None:
        self.console, self.description, self.total, self.quiet = console, description, total, quiet
        self.remaining, self.clock = remaining, clock
        self.done, self._last_line, self._start = 0, 0.0, clock()
        self._bar: Progress | None = None
        self._task: TaskID | None = None           # set with _bar
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = (threading.Thread(target=self._tick_until_stopped, name="lnbench-progress", daemon=True)
                        if ticking and remaining is not None and not quiet else None)

    def __enter__(self) -> "CommandProgress":
        self._start = self._last_line = self.clock()
        if self.console.is_terminal and not self.quiet:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[left]}"), console=self.console,
                                 transient=False, redirect_stdout=False, redirect_stderr=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, left=self._left())
        if self._ticker is not None:
            self._ticker.start()
        return self

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a refresh that fails (an estimate mid-update) waits for the next
                pass

    def tick(self) -> None:
        """Refresh the time left between finished units: the bar's "~left", or in a log a line when none was
        printed for LINE_INTERVAL_S."""
        with self._lock:
            if self._bar is not None and self._task is not None:
                self._bar.update(self._task, left=self._left())
            elif not self.quiet and self.clock() - self._last_line >= LINE_INTERVAL_S:
                self._log_line("", force=True)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker.is_alive():
            self._ticker.join()
        if self._bar is not None:           # its last state drawn, then a new line: what follows starts below it
            assert self._task is not None
            self._bar.update(self._task, completed=self.done, left="")
            self._bar.__exit__(kind, value, traceback)

    def advance(self, label: str = "", description: str | None = None) -> None:
        self.update(self.done + 1, label, description)

    def update(self, done: int, label: str = "", description: str | None = None) -> None:
        """`done` units finished so far; `label` names the last one; `description` replaces the title."""
        if done == self.done and description in (None, self.description):
            return
        with self._lock:
            self.done = done
            if description is not None:
                self.description = description
            if self._bar is not None:
                assert self._task is not None
                self._bar.update(self._task, completed=done, description=self.description, left=self._left())
            elif not self.quiet:
                self._log_line(label)

    def _log_line(self, label: str, force: bool = False) -> None:
        now = self.clock()
        last = self.total is not None and self.done >= self.total
        many = self.total is None or self.total > MANY_UNITS
        if many and not last and not force and now - self._last_line < LINE_INTERVAL_S:
            return
        self._last_line = now
        count = f"{self.done}/{self.total} {100 * self.done // self.total}%" if self.total else f"{self.done}"
        left = self._left()
        text = (f"[{count}] {self.description}" + (f": {label}" if label else "")
                + f" ({now - self._start:.0f} s{', ' + left if left and not last else ''})")
        self.console.print(escape(text), soft_wrap=True, highlight=False)

    def _left(self) -> str:
        """"~3 min left" from the `remaining` callback, "" without one."""
        if self.remaining is None:
            return ""
        return f"~{fmt_duration(self.remaining())} left"
