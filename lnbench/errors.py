"""Error types the CLI maps to exit codes (2 = usage/environment, 1 = failed checks)."""
from __future__ import annotations


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """`Type: first line of the message`, at most `limit` characters: how a caught exception is reported."""
    text = (f"{type(exc).__name__}: {exc}".splitlines() or [""])[0].rstrip(": ")
    return text[:limit] if limit else text


class LnbenchUsageError(Exception):
    """Bad input or an unusable environment: one-line message, exit status 2."""


class ContractError(ValueError):
    """A wrapper contract was broken (wrong dtype, device, shape, layout); names the argument."""
