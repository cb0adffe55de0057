"""The emulated device keeps the C heap's freed memory (lnbench/emu/heap.py): the thresholds are set once, on
glibc, and a process that activates the emulator in execute mode has them."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from lnbench.emu import heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_thresholds_are_set_once_and_stay_set():
    assert heap.keep_freed_memory() is True
    assert heap.keep_freed_memory() is True


def test_activating_the_emulator_sets_them_and_the_null_device_does_not(tmp_path):
    from lnbench.emu.runtime import availability
    if not availability()[0]:
        pytest.skip(f"the emulator is unavailable: {availability()[1]}")
    script = ("import sys; from lnbench.emu import heap, runtime; runtime.activate_null('gfx942'); "
              "before = heap._done; runtime.activate('gfx942'); print(before, heap._done)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    expected = "False True" if platform.libc_ver()[0] == "glibc" else "False False"
    assert out.stdout.split("\n")[-2].strip() == expected
