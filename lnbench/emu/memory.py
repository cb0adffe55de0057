"""Host memory as kernels see it: the buffers a launch may touch, and the memory checker.

Every global/flat/buffer/SMEM access goes through Memory. An access that falls outside all known
buffers is a fault naming the kernel, PC, lane, address and the nearest buffer — what
compute-sanitizer's memcheck reports on NVIDIA. Buffers come from the HIP stand-in's hipMalloc
table and from the tensors lnbench registers for a launch.

Footprint: between `start_footprint()` and `take_footprint()` (one launch, see machine.run_kernel) every
access is also recorded per buffer: the bytes the instructions moved (a re-read counts again) and the
distinct bytes touched, from one touched-byte map for loads and one for stores per buffer. The distinct
bytes are a kernel's compulsory traffic: what the byte model of `lnbench perf` counts.
"""
from __future__ import annotations

import bisect
import ctypes
from dataclasses import asdict, dataclass, field

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


@dataclass
class BufferTraffic:
    """Global memory one launch moved to and from one buffer (bytes)."""

    name: str
    size: int
    loaded: int = 0             # moved by load instructions (every re-read counts again)
    stored: int = 0             # moved by store instructions (atomics count as a load and a store)
    unique_loaded: int = 0      # distinct bytes loaded at least once: compulsory read traffic
    unique_stored: int = 0      # distinct bytes stored at least once: compulsory write traffic

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self)


class Footprint:
    """Touched-byte maps per buffer (allocated on the first access), and instruction byte counts."""

    def __init__(self) -> None:
        self._regions: dict[int, Region] = {}
        self._maps: dict[tuple[int, bool], np.ndarray] = {}
        self._moved: dict[tuple[int, bool], int] = {}

    def mark(self, region: Region, offsets: np.ndarray, load: bool) -> None:
        """Record the byte offsets (any shape) one access touched in `region`."""
        key = (id(region), load)
        touched = self._maps.get(key)
        if touched is None:
            self._regions[id(region)] = region
            touched = self._maps[key] = np.zeros(region.size, bool)
        touched[offsets.reshape(-1)] = True
        self._moved[key] = self._moved.get(key, 0) + offsets.size

    def result(self) -> dict[str, BufferTraffic]:
        """Per buffer name (buffers sharing a name are summed), in first-touch order."""
        out: dict[str, BufferTraffic] = {}
        for rid, region in self._regions.items():
            t = out.setdefault(region.name, BufferTraffic(region.name, 0))
            t.size += region.size
            for load in (True, False):
                touched = self._maps.get((rid, load))
                if touched is None:
                    continue
                moved, unique = self._moved[(rid, load)], int(np.count_nonzero(touched))
                if load:
                    t.loaded += moved
                    t.unique_loaded += unique
                else:
                    t.stored += moved
                    t.unique_stored += unique
        return out


class Memory:
    """Known buffers, sorted by base address; loads, stores and atomics with bounds checks."""

    def __init__(self) -> None:
        self._regions: list[Region] = []
        self._bases: list[int] = []
        self.freed: list[Region] = []          # buffers released while a launch could still use them
        self.bytes_loaded = 0
        self.bytes_stored = 0
        self.footprint: Footprint | None = None

    # ------------------------------------------------------------ footprint of one launch
    def start_footprint(self) -> None:
        """Record every access per buffer from now on (a fresh record)."""
        self.footprint = Footprint()

    def take_footprint(self) -> dict[str, BufferTraffic]:
        """What was recorded since start_footprint(), per buffer name; stops recording."""
        footprint, self.footprint = self.footprint, None
        return footprint.result() if footprint is not None else {}

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
            where = addrs[idx].astype(np.int64)[:, None] - reg.base + step
            out[idx] = reg.data[where]
            if self.footprint is not None:
                self.footprint.mark(reg, where, load=True)
        self.bytes_loaded += out.size
        return out

    def store(self, addrs: np.ndarray, data: np.ndarray, what: str = "global store",
              lanes: np.ndarray | None = None) -> None:
        """Write data[i] (nbytes uint8) at addrs[i], in lane order (a later lane wins)."""
        nbytes = data.shape[1]
        step = np.arange(nbytes, dtype=np.int64)
        for reg, idx in self._resolve(addrs, nbytes, what, lanes):
            where = addrs[idx].astype(np.int64)[:, None] - reg.base + step
            reg.data[where] = data[idx]
            if self.footprint is not None:
                self.footprint.mark(reg, where, load=False)
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
            if self.footprint is not None:
                where = offs[:, None] + np.arange(4, dtype=np.int64)
                self.footprint.mark(reg, where, load=True)
                self.footprint.mark(reg, where, load=False)
        self.bytes_loaded += 4 * addrs.size
        self.bytes_stored += 4 * addrs.size
