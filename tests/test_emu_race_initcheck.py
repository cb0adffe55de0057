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


def test_dword_shadow_reports_the_first_byte_and_spreads_at_a_partial_access():
    """Whole-dword accesses keep one shadow entry per dword; a finding still names the first byte the access shares,
    and the first access covering part of a dword spreads the shadow to bytes with every state kept."""
    mem, buf, base = _memory()
    mem.store(_addr(base, 16, 32), np.ones((2, 8), np.uint8), groups=np.array([2, 2]))     # dwords 4, 5, 8, 9
    with pytest.raises(GlobalRace, match=r"workgroup \(1, 0, 0\) global loads byte offset 16 of 'ws', which "
                                         r"workgroup \(2, 0, 0\) stored"):
        mem.load(_addr(base, 12), 16, groups=np.array([1]))           # bytes 12-27: the first clash is byte 16
    shadow = mem._shadows[id(mem.regions[0])]
    assert shadow.granule == 4 and shadow.modifier.size == 16
    mem.load(_addr(base, 41), 2, groups=np.array([1]))                # part of a dword: one entry per byte from now
    assert shadow.granule == 1 and shadow.modifier.size == 64
    assert list(shadow.modifier[14:18]) == [-1, -1, 2, 2] and shadow.reader[41] == 1 and shadow.reader[40] == -1
    with pytest.raises(GlobalRace, match=r"global loads byte offset 36 of 'ws', which workgroup \(2, 0, 0\) stored"):
        mem.load(_addr(base, 36), 4, groups=np.array([3]))
    with pytest.raises(GlobalRace, match=r"workgroups \(0, 0, 0\) and \(3, 0, 0\) both global store byte offset 4"):
        mem.store(_addr(base, 4, 4), np.ones((2, 4), np.uint8), groups=np.array([0, 3]))


def test_race_shadows_are_reused_clean_by_the_next_launch():
    mem, buf, base = _memory()
    mem.store(_addr(base, 0, 4), np.ones((2, 4), np.uint8), groups=np.array([1, 1]))
    first = mem._shadows[id(mem.regions[0])].modifier
    mem.start_checks((4, 1, 1), race=True, initcheck=True)                     # a new launch: the array is pooled
    mem.store(_addr(base, 8), np.ones((1, 4), np.uint8), groups=np.array([2]))
    again = mem._shadows[id(mem.regions[0])].modifier
    assert again is first and list(again) == [-1, -1, 2] + [-1] * 13          # every state of the last launch gone
    mem.load(_addr(base, 0), 8, groups=np.array([3]))
