"""Results as they come: a command's finished cases are in its result files while it runs, so an interrupt or a
crash never loses them.

    with ResultSink(csv_path, json_path, metadata, total=len(units), unit="cases") as sink:
        for ...:
            sink.add(index, rows)            # one finished unit (index orders the rows in the files)
        sink.finish(extra_json=..., more=...)   # the complete files, written all or nothing

While the command runs, the rows of every finished unit are rewritten into the result paths (CSV, JSON) at most
once per CHECKPOINT_S, each time atomically (report.atomic_write_all: a temporary file renamed over the path,
then a fresh temporary reserved for the next write), with `complete = false` and `stopped = "running (or
crashed) after K of N cases"` in the metadata (every CSV row carries them as columns). `finish` writes the
complete files (`complete = true`). If the command is stopped before that:

* by a signal (KeyboardInterrupt, Terminated) or a crash (any other exception): the files are rewritten with
  every finished unit and `stopped = "interrupted (SIGINT) after K of N cases"` (or "crashed: ..."), one line
  says so on stderr, and the exception goes on (exit 130/143/129);
* by a usage error (exit 2): the files written so far are removed: exit 2 leaves no result file;
* killed hard (SIGKILL, the machine going down): the last checkpoint stays, `complete = false`.

A checkpoint that cannot be written (the disk filled during the run) does not stop the run: the rows so far go to
the run's kept folder (lnbench.output.fallback), one warning line names it, and later checkpoints try the result
paths again. If the final write fails too, the complete rows are in that folder and the exit-2 error line names
it; if it succeeds, the kept folder is removed.

FIFOs, character devices and standard output/error get the final content once, never checkpoints.
`lnbench compare` refuses an incomplete file without --force and `lnbench plot` warns (lnbench.results).
"""
from __future__ import annotations

import signal
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Sequence

from lnbench.output import fallback as output_fallback
from lnbench.errors import ContractError, LnbenchUsageError, one_line
from lnbench.run.processes import Terminated
from lnbench.output.files import ResultsNotWritten, Writer, check_writable, renamable
from lnbench.results import Record, RunRecord

#: at most one checkpoint rewrite per this many seconds (the final and the incomplete write are never held back)
CHECKPOINT_S = 1.0


def stopped_text(exc: BaseException) -> str:
    """How a run ended early, for the metadata: interrupted (SIGINT), terminated (SIGTERM), crashed: ..."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    if isinstance(exc, Terminated):
        return f"terminated ({signal.Signals(exc.signum).name})"
    return f"crashed: {one_line(exc)}"


class ResultSink:
    """Collects finished units' rows and keeps the result files up to date (module docstring)."""

    def __init__(self, csv_path: Path | None, json_path: Path | None, metadata: RunRecord,
                 total: int | None, unit: str = "cases") -> None:
        self.csv_path, self.json_path, self.metadata = csv_path, json_path, metadata
        self.total, self.unit = total, unit
        self._parts: dict[int, list[Record]] = {}
        self._whole: list[Record] | None = None      # set by replace()
        self._done = 0
        self._last = time.monotonic()
        self._placed: list[Path] = []
        self._finished = False
        self._fell_back = False                              # a checkpoint went to the kept folder
        # the result files checkpoints rewrite: the regular files (asked once: after a failed write a path may
        # have no temporary file ready, and is still one)
        self._renamable = [p for p in (csv_path, json_path) if p is not None and renamable(p)]

    def __enter__(self) -> "ResultSink":
        return self

    @property
    def rows(self) -> list[Record]:
        """Every finished unit's rows, in unit order (or what replace() gave)."""
        if self._whole is not None:
            return list(self._whole)
        return [row for index in sorted(self._parts) for row in self._parts[index]]

    @property
    def done(self) -> int:
        return self._done if self._whole is not None else len(self._parts)

    def progress_text(self) -> str:
        return f"{self.done} of {self.total} {self.unit}" if self.total is not None else f"{self.done} {self.unit}"

    def add(self, index: int, rows: Sequence[Record]) -> None:
        """One finished unit's rows; the files are rewritten when the last write is CHECKPOINT_S old."""
        self._parts[index] = list(rows)
        if time.monotonic() - self._last >= CHECKPOINT_S:
            self.checkpoint()

    def replace(self, rows: Sequence[Record], done: int) -> None:
        """All rows so far at once, `done` units finished: for a command whose rows are rebuilt from every
        finished unit (perf's aggregates over workers). Checkpointed like add()."""
        self._whole, self._done = list(rows), done
        if time.monotonic() - self._last >= CHECKPOINT_S:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Rewrite the renamable result files with the rows so far, marked as still running."""
        paths = self._renamable
        if not self.rows or not paths:
            return
        try:
            self._write(f"running (or crashed) after {self.progress_text()}", paths, last=False)
        except ResultsNotWritten as exc:
            if not self._fell_back:
                from lnbench.cli_common import err_console

                err_console.print(f"lnbench: warning: {exc}; the run goes on", soft_wrap=True, markup=False,
                                  highlight=False)
            self._fell_back = True
        self._last = time.monotonic()

    def finish(self, rows: Sequence[Record] | None = None, metadata: RunRecord | None = None,
               extra_json: dict[str, Any] | None = None, more: Sequence[tuple[str, Path, Writer]] = (),
               md_path: Path | None = None, summary: str = "") -> None:
        """The complete files (cli_common.emit_outputs: all or nothing, placement announced; the Markdown
        summary to `md_path` and $GITHUB_STEP_SUMMARY). `rows` and `metadata` default to the finished units'
        rows and the sink's metadata."""
        from lnbench.cli_common import emit_outputs

        meta = (self.metadata if metadata is None else metadata).with_(complete=True, stopped="")
        emit_outputs(self.rows if rows is None else rows, meta, self.csv_path, self.json_path, extra_json, more,
                     md_path=md_path, summary=summary)
        self._finished = True
        if self._fell_back:                      # the complete files are where asked: the kept copies are stale
            output_fallback.discard()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None or self._finished or value is None:
            return
        if isinstance(value, ResultsNotWritten) and not value.kept:
            return                               # the last checkpoint is all there is: keep it
        if isinstance(value, (LnbenchUsageError, ContractError)):
            for path in self._placed:            # exit 2 leaves no result file (where asked; a kept copy is named)
                path.unlink(missing_ok=True)
            if self._fell_back and not isinstance(value, ResultsNotWritten):
                output_fallback.discard()        # nor a kept copy the error line does not name
            return
        if not self.rows:
            return
        from lnbench.cli_common import err_console

        paths = [p for p in (self.csv_path, self.json_path) if p is not None]
        if not paths:                            # --no-csv and no --json: nothing to keep them in
            err_console.print(f"lnbench: stopped after {self.progress_text()}; no result file was asked for "
                              f"(--no-csv), so their rows are not kept", soft_wrap=True, markup=False,
                              highlight=False)
            return
        try:
            self._write(f"{stopped_text(value)} after {self.progress_text()}", paths, last=True)
        except (OSError, LnbenchUsageError) as exc:
            err_console.print(f"lnbench: the finished {self.unit} could not be written where asked: "
                              f"{exc if isinstance(exc, ResultsNotWritten) else one_line(exc)}",
                              soft_wrap=True, markup=False, highlight=False)
            return
        where = ", ".join(str(p) for p in paths)
        err_console.print(f"lnbench: stopped after {self.progress_text()}; the finished ones are in {where} "
                          f"(marked incomplete)", soft_wrap=True, markup=False, highlight=False)

    def _write(self, stopped: str, paths: list[Path], last: bool) -> None:
        """Write the rows so far to `paths`, marked incomplete; unless this is the `last` write, reserve a fresh
        temporary file for each path afterwards, for the next one."""
        from lnbench.cli_common import emit_outputs

        meta = self.metadata.with_(complete=False, stopped=stopped)
        csv_path = self.csv_path if self.csv_path in paths else None
        json_path = self.json_path if self.json_path in paths else None
        emit_outputs(self.rows, meta, csv_path, json_path, announce=False)
        for path in paths:
            if path not in self._placed:
                self._placed.append(path)
            if not last:
                try:
                    check_writable(path)         # the next write's temporary file, made now (outputs.py)
                except LnbenchUsageError:
                    pass                         # (the disk filled) the next write makes it, or keeps the rows
