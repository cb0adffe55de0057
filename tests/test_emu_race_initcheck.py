"""The initcheck and cross-workgroup race checkers of lnbench.emu.memory, access by access.

Memory is driven directly (as the memory instructions drive it): each access names the workgroup of every
lane. A clean sequence must pass and the one access that breaks a rule must fault, naming the buffer, the
byte offset and the workgroups involved.
"""
from __future__ import annotations

import numpy as np
import pytest

from lnbench.emu.memory import GlobalRace, Memory, UninitializedRead


def _memory(uninitialized: bool = False) -> tuple[Memory, np.ndarray, int]:
    buf = np.zeros(64, np.uint8)
    mem = Memory()
    region = mem.add(buf.ctypes.data, buf.nbytes, "ws", buf)
    if uninitialized:
        region.written = np.zeros(buf.nbytes, bool)
    mem.start_checks((4, 1, 1), race=True, initcheck=True)
    return mem, buf, buf.ctypes.data


def _addr(base: int, *offsets: int) -> np.ndarray:
    return np.asarray([base + o for o in offsets], np.uint64)


def test_loads_and_stores_of_one_workgroup_and_shared_reads_are_clean():
    mem, buf, base = _memory()
    mem.store(_addr(base, 0, 4), np.ones((2, 4), np.uint8), groups=np.array([1, 1]))
    mem.load(_addr(base, 0, 4), 4, groups=np.array([1, 1]))                     # its own bytes
    mem.load(_addr(base, 16, 16, 16), 4, groups=np.array([0, 2, 3]))             # read by many, written by none
    mem.atomic_add_f32(_addr(base, 32, 32), np.ones(2, np.float32), groups=np.array([0, 3]))   # atomics commute


def test_load_of_bytes_another_workgroup_stored_is_a_race():
    mem, buf, base = _memory()
    mem.store(_addr(base, 8), np.ones((1, 2), np.uint8), groups=np.array([2]))
    with pytest.raises(GlobalRace, match=r"workgroup \(1, 0, 0\) global loads byte offset 9 of 'ws', which "
                                         r"workgroup \(2, 0, 0\) stored in this launch"):
        mem.load(_addr(base, 9), 1, groups=np.array([1]))


def test_store_over_bytes_others_loaded_or_added_to_is_a_race():
    mem, buf, base = _memory()
    mem.load(_addr(base, 0), 4, groups=np.array([0]))
    mem.load(_addr(base, 0), 4, groups=np.array([3]))
    with pytest.raises(GlobalRace, match=r"which several other workgroups loaded"):
        mem.store(_addr(base, 2), np.ones((1, 1), np.uint8), groups=np.array([0]))
    mem, buf, base = _memory()
    mem.atomic_add_f32(_addr(base, 12), np.ones(1, np.float32), groups=np.array([3]))
    with pytest.raises(GlobalRace, match=r"which workgroup \(3, 0, 0\) added to atomically"):
        mem.load(_addr(base, 12), 4, groups=np.array([1]))


def test_race_checker_forgets_at_the_next_launch():
    mem, buf, base = _memory()
    mem.store(_addr(base, 0), np.ones((1, 4), np.uint8), groups=np.array([0]))
    mem.start_checks((4, 1, 1), race=True, initcheck=True)                     # a new launch
    mem.load(_addr(base, 0), 4, groups=np.array([3]))


def test_uninitialized_bytes_fault_until_written_and_stay_written():
    mem, buf, base = _memory(uninitialized=True)
    mem.store(_addr(base, 0), np.ones((1, 4), np.uint8), groups=np.array([0]))
    mem.load(_addr(base, 0), 4, groups=np.array([0]))
    with pytest.raises(UninitializedRead, match=r"reads byte offset 4 of 'ws' \[0x[0-9a-f]+, \+64\), which starts "
                                                r"uninitialized and nothing has written yet"):
        mem.load(_addr(base, 2), 4, lanes=np.array([7]), groups=np.array([0]))
    mem.start_checks((4, 1, 1), race=True, initcheck=True)                     # written bytes persist
    mem.load(_addr(base, 0), 4, groups=np.array([1]))


def test_checks_off_and_memory_checker_off():
    mem, buf, base = _memory(uninitialized=True)
    mem.start_checks((4, 1, 1), bounds=False, race=False, initcheck=False)
    mem.load(_addr(base, 0), 4, groups=None)                                   # no initcheck, no race
    out = mem.load(_addr(base + 4096, 0), 4)                                   # outside every buffer: reads 0
    assert out.tolist() == [[0, 0, 0, 0]]
    mem.store(_addr(base + 4096, 0), np.ones((1, 4), np.uint8))                # and writes nothing
