"""Shared test setup: `rocm` tests skip with their reason where no ROCm GPU exists."""
from __future__ import annotations

import pytest

from lnbench.rocm import NEEDS_ROCM, has_rocm_gpu


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_rocm_gpu():
        return
    skip = pytest.mark.skip(reason=NEEDS_ROCM)
    for item in items:
        if "rocm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    """Keep default outputs of CLI runs inside the test's temp folder."""
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"
