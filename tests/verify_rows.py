"""The rows `lnbench verify` makes of one backend object over some cases, for the tests whose backends no registry
names (planted, exploding, compile-only ones): every case through lnbench.verify.runner.backend_case_rows, what the
command's in-process path and its workers both call, with the backend's availability and one compile cache, as
they do."""
from __future__ import annotations

from typing import Any, Iterable

from lnbench.verify.runner import backend_case_rows


def verify_rows(backend: Any, cases: Iterable[Any], device: Any, tol: Any) -> list[dict[str, Any]]:
    avail = backend.availability(device)
    compiled: dict[tuple[int, str, float], str] = {}
    return [row for case in cases for row in backend_case_rows(backend, case, device, tol, avail, compiled)]
