"""Error types the CLI maps to exit codes (2 = usage/environment, 1 = failed checks)."""
from __future__ import annotations


class LnbenchUsageError(Exception):
    """Bad input or an unusable environment: one-line message, exit status 2."""


class ContractError(ValueError):
    """A wrapper contract was broken (wrong dtype, device, shape, layout); names the argument."""
