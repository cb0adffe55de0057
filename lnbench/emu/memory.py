"""Host memory as kernels see it: the buffers a launch may touch, and the memory checker.

Every global/flat/buffer/SMEM access goes through Memory. An access that falls outside all known
buffers is a fault naming the kernel, PC, lane, address and the nearest buffer — what
compute-sanitizer's memcheck reports on NVIDIA. Buffers come from the HIP stand-in's hipMalloc
table and from the tensors lnbench registers for a launch.
"""
from __future__ import annotations

import bisect
import ctypes
from dataclasses import dataclass, field

import numpy as np

from lnbench.emu.errors import EmulatorFault


@dataclass
class Region:
    base: int
    size: int
    name: str
    data: np.ndarray = field(repr=False)      # uint8 view of the host bytes

    @property
    def end(self) -> int:
        return self.base + self.size


def host_view(base: int, size: int) -> np.ndarray:
    """A writable uint8 numpy view of `size` bytes of this process's memory at `base`."""
    if size == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(base))


class MemoryFault(EmulatorFault):
    """An access outside every buffer the launch owns."""


class Memory:
    """Known buffers, sorted by base address; loads, stores and atomics with bounds checks."""

    def __init__(self) -> None:
        self._regions: list[Region] = []
        self._bases: list[int] = []
        self.freed: list[Region] = []          # buffers released while a launch could still use them
        self.bytes_loaded = 0
        self.bytes_stored = 0

    # ------------------------------------------------------------ the allocation map
    def add(self, base: int, size: int, name: str, data: np.ndarray | None = None) -> Region:
        """Register [base, base+size); overlapping duplicates keep the first name (views of one tensor)."""
        region = Region(base, size, name, host_view(base, size) if data is None else data)
        i = bisect.bisect_left(self._bases, base)
        self._regions.insert(i, region)
        self._bases.insert(i, base)
        return region

    def remove(self, region: Region) -> None:
        i = self._regions.index(region)
        del self._regions[i]
        del self._bases[i]

    @property
    def regions(self) -> list[Region]:
        return list(self._regions)

    def _containing(self, addr: int, nbytes: int) -> Region | None:
        i = bisect.bisect_right(self._bases, addr) - 1
        # regions may nest (a view inside a tensor): walk back to the widest candidate that contains it
        while i >= 0:
            r = self._regions[i]
            if r.base <= addr and addr + nbytes <= r.end:
                return r
            i -= 1
        return None

    def describe_miss(self, addr: int, nbytes: int) -> str:
        """The nearest buffer to a bad address, for the fault message."""
        for r in reversed(self.freed):
            if r.base <= addr < r.end:
                return f"inside buffer '{r.name}' [0x{r.base:x}, +{r.size}) which was freed before the launch ran"
        best, dist = None, None
        for r in self._regions:
            d = addr - r.end if addr >= r.end else r.base - (addr + nbytes)
            if addr < r.end and addr + nbytes > r.end:
                d = 0
            if dist is None or abs(d) < abs(dist):
                best, dist = r, d
        if best is None:
            return "no buffer is registered"
        where = (f"{addr + nbytes - best.end} byte(s) past its end" if addr + nbytes > best.end
                 else f"{best.base - addr} byte(s) before its start")
        return f"nearest buffer '{best.name}' [0x{best.base:x}, +{best.size}), {where}"

    def _resolve(self, addrs: np.ndarray, nbytes: int, what: str, lanes: np.ndarray | None
                 ) -> list[tuple[Region, np.ndarray]]:
        """Group lanes by buffer; fault on the first lane that fits none."""
        addrs = addrs.astype(np.uint64, copy=False)
        if addrs.size == 0:
            return []
        lo, hi = int(addrs.min()), int(addrs.max())
        r = self._containing(lo, nbytes)
        if r is not None and hi + nbytes <= r.end:
            return [(r, np.arange(addrs.size))]          # the common case: one buffer
        groups: dict[int, list[int]] = {}
        found: dict[int, Region] = {}
        for i, a in enumerate(addrs.tolist()):
            reg = self._containing(a, nbytes)
            if reg is None:
                lane = int(lanes[i]) if lanes is not None else i
                raise MemoryFault(f"{what} of {nbytes} byte(s) at 0x{a:x} (lane {lane}) is outside every buffer: "
                                  f"{self.describe_miss(a, nbytes)}")
            groups.setdefault(id(reg), []).append(i)
            found[id(reg)] = reg
        return [(found[k], np.asarray(v)) for k, v in groups.items()]

    # ------------------------------------------------------------ access
    def load(self, addrs: np.ndarray, nbytes: int, what: str = "global load",
             lanes: np.ndarray | None = None) -> np.ndarray:
        """Bytes at each address: (n, nbytes) uint8."""
        out = np.empty((addrs.size, nbytes), np.uint8)
        step = np.arange(nbytes, dtype=np.int64)
        for reg, idx in self._resolve(addrs, nbytes, what, lanes):
            offs = addrs[idx].astype(np.int64) - reg.base
            out[idx] = reg.data[offs[:, None] + step]
        self.bytes_loaded += out.size
        return out

    def store(self, addrs: np.ndarray, data: np.ndarray, what: str = "global store",
              lanes: np.ndarray | None = None) -> None:
        """Write data[i] (nbytes uint8) at addrs[i], in lane order (a later lane wins)."""
        nbytes = data.shape[1]
        step = np.arange(nbytes, dtype=np.int64)
        for reg, idx in self._resolve(addrs, nbytes, what, lanes):
            offs = addrs[idx].astype(np.int64) - reg.base
            reg.data[offs[:, None] + step] = data[idx]
        self.bytes_stored += data.size

    def atomic_add_f32(self, addrs: np.ndarray, values: np.ndarray, lanes: np.ndarray | None = None) -> None:
        """fp32 atomic adds applied one lane after another, in fp32 (one fixed order; a GPU's order varies)."""
        if np.any(addrs & np.uint64(3)):
            raise MemoryFault("global atomic add at an address that is not 4-byte aligned")
        for reg, idx in self._resolve(addrs, 4, "global atomic add", lanes):
            offs = addrs[idx].astype(np.int64) - reg.base
            lo, hi = int(offs.min()), int(offs.max()) + 4
            cells = reg.data[lo:hi].view(np.float32)
            np.add.at(cells, (offs - lo) // 4, values[idx].astype(np.float32))
        self.bytes_loaded += 4 * addrs.size
        self.bytes_stored += 4 * addrs.size
