"""`--shard K/N`: run the K-th of N parts of a command's case list, so a CI matrix or a cluster scheduler runs
the parts on separate machines and `lnbench merge` joins their result files.

The split depends on nothing but the case list, which the config and options fix: every machine computes the
same parts. Cases are dealt out in list order, case i to part i mod N, so the parts differ in size by at most
one case and each part holds every backend, op and shape size in the same proportions as the whole (a list
ordered backend-major would otherwise give one part all of one backend).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

import click

from lnbench.errors import LnbenchUsageError

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.results import RunRecord

T = TypeVar("T")
_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Part `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, items: Sequence[T]) -> list[T]:
        """This part's items, in their order: item i belongs to part (i mod N) + 1 (lnbench.run.gpus.deal's split,
        sliced out directly: dealing to every part first costs memory and time in N, `--shard 1/10000000000`)."""
        return list(items[self.index - 1::self.count])

    def part(self, items: Sequence[T], what: str) -> list[T]:
        """select(), refusing a split that leaves this part nothing (N larger than the list): a part that ran
        nothing would write a result without rows, which `lnbench merge` cannot join."""
        chosen = self.select(items)
        if not chosen:
            raise LnbenchUsageError(f"--shard {self}: {len(items)} {what} make fewer than {self.count} parts")
        return chosen


WHOLE = Shard(1, 1)


def parse_shard(text: str | None) -> Shard:
    """`K/N` with 1 <= K <= N (None: the whole list). Anything else is a usage error."""
    if text is None:
        return WHOLE
    match = _FORM.match(text)
    if not match:
        raise LnbenchUsageError(f"--shard must be K/N (part K of N, e.g. 1/4), got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise LnbenchUsageError(f"--shard {text}: K must be between 1 and N (N >= 1), e.g. 1/{max(count, 2)}")
    return Shard(index, count)


def record_shard(run: RunRecord, shard: Shard, total: int) -> RunRecord:
    """Set what a result file says about its part: `shard` K/N and the size of the whole case list."""
    run.shard, run.shard_total_cases = str(shard), total
    return run


def shard_option(func: Callable[..., object]) -> Callable[..., object]:
    """--shard K/N (parsed by parse_shard inside the command, so a bad value is lnbench's one-line error)."""
    return click.option("--shard", "shard",
                        help="Run part K of N of the case list (e.g. 2/4): the same split on every machine; join "
                             "the parts' result files with `lnbench merge`.")(func)
