"""Shared test setup.

`rocm` tests execute FlyDSL kernels: on a ROCm GPU when there is one, else on the emulated device; they
skip (with the reason) only where neither can run. `kernel_device` is the Device they run on;
`each_kernel_device` parametrizes a test over every arch available (the GPU's, or gfx942 and gfx950
emulated). `fake_emulator` stands in for the emulator to test the wiring anywhere (tests/emu_fakes.py).
"""
from __future__ import annotations

import os

# Tables are drawn at $COLUMNS (read once, when lnbench.cli_common is imported): tests read them at one fixed
# width, whatever terminal or CI runner started the run (COLUMNS=40 wraps every cell). Tests of the width
# handling itself pass their own COLUMNS to a subprocess.
os.environ["COLUMNS"] = "200"

import pytest  # noqa: E402

pytest.register_assert_rewrite("cli_helpers")     # its asserts report their values, like a test module's

from lnbench.constants import ARCHES  # noqa: E402
from lnbench.run.device import Device, emulator_status, resolve_device  # noqa: E402
from lnbench.machine.rocm import NEEDS_ROCM, has_rocm_gpu  # noqa: E402


def kernel_device_names() -> list[str]:
    """--device names the `rocm` tests run on: the ROCm GPU, else every emulated arch ([] if neither)."""
    if has_rocm_gpu():
        return ["cuda"]
    return [f"emu:{arch}" for arch in ARCHES] if emulator_status()[0] else []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if kernel_device_names():
        return
    skip = pytest.mark.skip(reason=f"{NEEDS_ROCM} or the emulator ({emulator_status()[1]})")
    for item in items:
        if "rocm" in item.keywords:
            item.add_marker(skip)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "each_kernel_device" in metafunc.fixturenames:
        metafunc.parametrize("each_kernel_device", kernel_device_names() or ["none"], indirect=True)


@pytest.fixture
def kernel_device() -> Device:
    """The device `rocm` tests execute on: the ROCm GPU, else emu:gfx942 (activated)."""
    return resolve_device(kernel_device_names()[0])


@pytest.fixture
def each_kernel_device(request: pytest.FixtureRequest) -> Device:
    return resolve_device(request.param)


@pytest.fixture
def fake_emulator(monkeypatch):
    """A FakeEmulator patched in for lnbench.emu.runtime and the FlyDSL compile (see tests/emu_fakes.py)."""
    from emu_fakes import install

    return install(monkeypatch)


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    """Keep default outputs of CLI runs inside the test's temp folder."""
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture(autouse=True, scope="session")
def _own_timing_lock_folder(tmp_path_factory):
    """Timing runs of the tests take their lnbench.measure.load lock in a folder of this test process: tests running
    side by side (xdist), or a real lnbench run on the machine, would otherwise flag each other as concurrent
    timing. (Session scope, so module fixtures that run perf get it too.)"""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LNBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_calibration_file():
    """The runs of the tests neither read nor write a calibration file (lnbench.run.calibration): their estimates start
    from the first guesses, and a test run never feeds its timings (a fake emulator's, a planted fault's) to the
    estimates of real runs in results/. Tests of the calibration point $LNBENCH_CALIBRATION at a file of their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LNBENCH_CALIBRATION", "off")
        yield
