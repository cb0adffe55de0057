"""Host memory as kernels see it: the buffers a launch may touch, and the memory checker.

Every global/flat/buffer/SMEM access goes through Memory. An access that falls outside all known
buffers is a fault naming the kernel, PC, lane, address and the nearest buffer — what
compute-sanitizer's memcheck reports on NVIDIA. Buffers come from the HIP stand-in's hipMalloc
table and from the tensors lnbench registers for a launch.

Footprint: between `start_footprint()` and `take_footprint()` (one launch, see machine.run_kernel) every
access is also recorded per buffer: the bytes the instructions moved (a re-read counts again) and the
distinct bytes touched, from one touched-byte map for loads and one for stores per buffer. The distinct
bytes are a kernel's compulsory traffic: what the byte model of `lnbench perf` counts.

Two more checkers live here, switched per launch by `start_checks` (see lnbench.emu.checks):

- initcheck: a buffer registered as starting uninitialized (an output or workspace the wrapper allocated
  with torch.empty) carries a written-byte map for its whole life; a load or atomic of a byte no launch has
  stored yet is a fault naming the buffer and the byte offset.
- race: within one launch, per buffer, the workgroup that last stored each byte, the one(s) that loaded it
  and the one(s) that added to it atomically; a plain load or store of a byte another workgroup stored (or a
  store of one another workgroup loaded, or any plain access mixed with another workgroup's atomics) is a
  fault naming both workgroups and the buffer.
"""
from __future__ import annotations

import bisect
import ctypes
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np

from lnbench.emu import native
from lnbench.emu.errors import EmulatorFault


@dataclass
class Region:
    base: int
    size: int
    name: str
    data: np.ndarray = field(repr=False)      # uint8 view of the host bytes
    #: initcheck: which bytes have been written, for a buffer that starts uninitialized (None: initialized)
    written: np.ndarray | None = field(default=None, repr=False)

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


class UninitializedRead(EmulatorFault):
    """A read of bytes of an output or workspace that nothing has written yet."""


class GlobalRace(EmulatorFault):
    """Global bytes touched by two workgroups of one launch, at least one of them storing, without atomics."""


NONE, SEVERAL = -1, -2


class RaceShadow:
    """Per byte of one buffer, within one launch: the workgroup that modified it last and the one(s) that
    loaded it. A modifier g >= 0 stored plainly; -3 - g added atomically; SEVERAL: atomics of several.

    While every access to the buffer covers whole aligned dwords the four bytes of a dword always hold one state, so
    the shadow keeps one entry per dword (a quarter of the memory and of the native helper's work); the first access
    that covers part of a dword spreads it to one entry per byte. The arrays come from a pool kept between launches
    (`_SHADOWS`): a fresh np.full of a large buffer's shadow costs more in page faults than the launch's checks."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.granule = 4 if size % 4 == 0 else 1
        self.modified = False       # some byte has a modifier (skip the modifier test while none has)
        self.read = False           # some byte has a reader
        self._arrays: dict[str, np.ndarray] = {}

    # allocated on first use: most buffers are only loaded (no modifier) or only stored (no reader)
    def _array(self, name: str) -> np.ndarray:
        a = self._arrays.get(name)
        if a is None:
            a = self._arrays[name] = _SHADOWS.take(self.size // self.granule)
        return a

    @property
    def modifier(self) -> np.ndarray:
        return self._array("modifier")

    @property
    def reader(self) -> np.ndarray:
        return self._array("reader")

    def entry(self, byte: int, name: str) -> int:
        """The state of byte offset `byte` in array `name` (modifier or reader)."""
        return int(self._array(name)[byte // self.granule])

    def units(self, offs: np.ndarray, nbytes: int) -> tuple[np.ndarray, int]:
        """The accesses' (first entries, entries each) in this shadow's granule; spreads a dword shadow to bytes at the
        first access that is not whole aligned dwords."""
        if self.granule == 4:
            if nbytes % 4 == 0 and not (offs & 3).any():
                return offs >> 2, nbytes >> 2
            self.spread()
        return offs, nbytes

    def shift_for(self, nbytes: int, aligned: bool) -> int:
        """log2 of the granule for an access of `nbytes` bytes a lane (`aligned`: every offset a multiple of 4),
        spreading a dword shadow to bytes as units() does."""
        if self.granule == 4 and (nbytes % 4 or not aligned):
            self.spread()
        return 2 if self.granule == 4 else 0

    def spread(self) -> None:
        """One entry per byte from now on (each dword's state copied to its four bytes)."""
        for name, a in list(self._arrays.items()):
            self._arrays[name] = np.repeat(a, 4)
            _SHADOWS.give(a)
        self.granule = 1

    def release(self) -> None:
        """Give the arrays back to the pool (the launch is over)."""
        for a in self._arrays.values():
            _SHADOWS.give(a)
        self._arrays = {}


class ArrayPool:
    """Arrays no launch uses now, by length, at most `max_bytes` in all, handed out again filled with `fill`: a fresh
    array for a large buffer in every launch costs more in page faults than the launch's accesses to it."""

    def __init__(self, max_bytes: int, dtype: type, fill: int | bool) -> None:
        self.max_bytes, self.dtype, self.fill = max_bytes, dtype, fill
        self._free: dict[int, list[np.ndarray]] = {}

    def take(self, length: int) -> np.ndarray:
        free = self._free.get(length)
        if free:
            a = free.pop()
            a.fill(self.fill)
            return a
        return np.full(length, self.fill, self.dtype)

    def give(self, a: np.ndarray) -> None:
        held = sum(x.nbytes for arrays in self._free.values() for x in arrays)
        if held + a.nbytes <= self.max_bytes:
            self._free.setdefault(a.size, []).append(a)


#: the race shadows' arrays (int32 entries, NONE) and the footprint's touched-byte maps
_SHADOWS = ArrayPool(1 << 30, np.int32, NONE)
_MAPS = ArrayPool(1 << 29, np.bool_, False)


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

    def mark(self, region: Region, offs: np.ndarray, nbytes: int, load: bool) -> None:
        """Record the `nbytes` bytes from each byte offset `offs` (int64, C-contiguous) one access touched in
        `region`."""
        key = (id(region), load)
        touched = self._maps.get(key)
        if touched is None:
            self._regions[id(region)] = region
            touched = self._maps[key] = _MAPS.take(region.size)
        native.mark(touched, offs, nbytes)
        self._moved[key] = self._moved.get(key, 0) + offs.size * nbytes

    def touched(self, region: Region, load: bool) -> tuple[np.ndarray, bool]:
        """(the touched-byte map of `region` for loads or stores, whether it was created now) for the native helper to
        mark; count() adds the bytes moved once it has, forget() drops a map created for an access that did not run."""
        key = (id(region), load)
        touched = self._maps.get(key)
        if touched is not None:
            return touched, False
        self._regions[id(region)] = region
        touched = self._maps[key] = _MAPS.take(region.size)
        return touched, True

    def count(self, region: Region, load: bool, moved: int) -> None:
        key = (id(region), load)
        self._moved[key] = self._moved.get(key, 0) + moved

    def forget(self, region: Region, load: bool) -> None:
        _MAPS.give(self._maps.pop((id(region), load)))
        if (id(region), not load) not in self._maps:
            del self._regions[id(region)]

    def release(self) -> None:
        """Give the maps back to the pool (the record is taken)."""
        for touched in self._maps.values():
            _MAPS.give(touched)
        self._maps = {}

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


class _Batch(NamedTuple):
    """What a whole-batch buffer access (Memory.load_rows, store_rows) needs of the checkers: its buffer, its race
    shadow (None: the race checker is off) and the shadow's granule shift, the footprint's map of touched bytes
    (None: no footprint) and whether that map is new."""

    reg: Region
    shadow: RaceShadow | None
    shift: int
    touched: np.ndarray | None
    fresh: bool


class Memory:
    """Known buffers, sorted by base address; loads, stores and atomics with bounds checks."""

    def __init__(self) -> None:
        self._regions: list[Region] = []
        self._bases: list[int] = []
        self.freed: list[Region] = []          # buffers released while a launch could still use them
        self.bytes_loaded = 0
        self.bytes_stored = 0
        self.footprint: Footprint | None = None
        self.bounds = True                     # the memory checker (off: outside every buffer reads 0, drops stores)
        self.race = False
        self.initcheck = False
        self._grid: tuple[int, int, int] = (1, 1, 1)
        self._shadows: dict[int, RaceShadow] = {}

    # ------------------------------------------------------------ checkers of one launch
    def start_checks(self, grid: tuple[int, int, int], *, bounds: bool = True, race: bool = True,
                     initcheck: bool = True) -> None:
        """Check the next launch's accesses (fresh race shadows; written-byte maps persist per buffer)."""
        self.bounds, self.race, self.initcheck = bounds, race, initcheck
        self._grid = grid
        for shadow in self._shadows.values():
            shadow.release()
        self._shadows = {}

    def stop_checks(self) -> None:
        self.bounds, self.race, self.initcheck = True, False, False
        for shadow in self._shadows.values():
            shadow.release()
        self._shadows = {}

    def group_name(self, g: int) -> str:
        gx, gy = self._grid[0], self._grid[1]
        return f"({g % gx}, {g // gx % gy}, {g // (gx * gy)})"

    # ------------------------------------------------------------ footprint of one launch
    def start_footprint(self) -> None:
        """Record every access per buffer from now on (a fresh record)."""
        self.footprint = Footprint()

    def take_footprint(self) -> dict[str, BufferTraffic]:
        """What was recorded since start_footprint(), per buffer name; stops recording."""
        footprint, self.footprint = self.footprint, None
        if footprint is None:
            return {}
        traffic = footprint.result()
        footprint.release()
        return traffic

    # ------------------------------------------------------------ the allocation map
    def add(self, base: int, size: int, name: str, data: np.ndarray | None = None) -> Region:
        """Register [base, base+size); overlapping duplicates keep the first name (views of one tensor). `data`: the
        bytes (default: the process memory there), one C-contiguous uint8 row: the native helper indexes it."""
        if data is not None and (data.dtype != np.uint8 or data.ndim != 1 or not data.flags.c_contiguous):
            raise ValueError(f"buffer '{name}': its data must be one C-contiguous row of uint8")
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
        """The nearest live buffer to a bad address, for the fault message; first, when the address lies in a
        buffer freed before the launch, that one (both: where memory is reused, either may be the cause)."""
        best, dist = None, None
        for r in self._regions:
            d = addr - r.end if addr >= r.end else r.base - (addr + nbytes)
            if addr < r.end and addr + nbytes > r.end:
                d = 0
            if dist is None or abs(d) < abs(dist):
                best, dist = r, d
        if best is None:
            live = "no buffer is registered"
        else:
            where = (f"{addr + nbytes - best.end} byte(s) past its end" if addr + nbytes > best.end
                     else f"{best.base - addr} byte(s) before its start")
            live = f"nearest buffer '{best.name}' [0x{best.base:x}, +{best.size}), {where}"
        for r in reversed(self.freed):
            if r.base <= addr < r.end:
                return (f"inside buffer '{r.name}' [0x{r.base:x}, +{r.size}) which was freed before the launch ran "
                        f"({live})")
        return live

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
            if reg is None and not self.bounds:
                continue                                  # memory checker off: nothing there
            if reg is None:
                lane = int(lanes[i]) if lanes is not None else i
                raise MemoryFault(f"{what} of {nbytes} byte(s) at 0x{a:x} (lane {lane}) is outside every buffer: "
                                  f"{self.describe_miss(a, nbytes)}")
            groups.setdefault(id(reg), []).append(i)
            found[id(reg)] = reg
        return [(found[k], np.asarray(v)) for k, v in groups.items()]

    # ------------------------------------------------------------ access
    def _accesses(self, addrs: np.ndarray, nbytes: int, what: str, lanes: np.ndarray | None,
                  groups: np.ndarray | None) -> list[tuple[Region, np.ndarray, np.ndarray, np.ndarray | None]]:
        """Per buffer the accesses fall in: (region, their indices, their byte offsets into it (int64), their
        workgroups (int32; None without `groups`)), the arrays C-contiguous for the native helper."""
        out = []
        for reg, idx in self._resolve(addrs, nbytes, what, lanes):
            every = idx.size == addrs.size                 # one buffer: no copies through idx
            offs = np.ascontiguousarray((addrs if every else addrs[idx]).astype(np.int64) - reg.base)
            g = None if groups is None else np.ascontiguousarray(groups if every else groups[idx], np.int32)
            out.append((reg, idx, offs, g))
        return out

    def load(self, addrs: np.ndarray, nbytes: int, what: str = "global load",
             lanes: np.ndarray | None = None, groups: np.ndarray | None = None) -> np.ndarray:
        """Bytes at each address: (n, nbytes) uint8. `groups`: the workgroup of each access (race checker)."""
        out = None                                         # (zeros only where some access lies in no buffer)
        for reg, idx, offs, g in self._accesses(addrs, nbytes, what, lanes, groups):
            if self.initcheck and reg.written is not None:
                self._check_written(reg, offs, nbytes, what, lanes, idx)
            if self.race:
                self._race(reg, offs, nbytes, g, what, "load")
            if idx.size == addrs.size:
                out = native.gather(reg.data, offs, nbytes)
            else:
                if out is None:
                    out = np.zeros((addrs.size, nbytes), np.uint8)
                out[idx] = native.gather(reg.data, offs, nbytes)
            if self.footprint is not None:
                self.footprint.mark(reg, offs, nbytes, load=True)
        if out is None:
            out = np.zeros((addrs.size, nbytes), np.uint8)
        self.bytes_loaded += out.size
        return out

    def store(self, addrs: np.ndarray, data: np.ndarray, what: str = "global store",
              lanes: np.ndarray | None = None, groups: np.ndarray | None = None) -> None:
        """Write data[i] (nbytes uint8) at addrs[i], in lane order (a later lane wins)."""
        nbytes = data.shape[1]
        for reg, idx, offs, g in self._accesses(addrs, nbytes, what, lanes, groups):
            if self.race:
                self._race(reg, offs, nbytes, g, what, "store")
            native.scatter(reg.data, offs, np.ascontiguousarray(data if idx.size == len(data) else data[idx], np.uint8))
            if reg.written is not None:
                native.mark(reg.written, offs, nbytes)
            if self.footprint is not None:
                self.footprint.mark(reg, offs, nbytes, load=False)
        self.bytes_stored += data.size

    def atomic_add_f32(self, addrs: np.ndarray, values: np.ndarray, lanes: np.ndarray | None = None,
                       groups: np.ndarray | None = None) -> None:
        """fp32 atomic adds applied one lane after another, in fp32 (one fixed order; a GPU's order varies)."""
        if np.any(addrs & np.uint64(3)):
            raise MemoryFault("global atomic add at an address that is not 4-byte aligned")
        what = "global atomic add"
        for reg, idx, offs, g in self._accesses(addrs, 4, what, lanes, groups):
            if self.initcheck and reg.written is not None:
                self._check_written(reg, offs, 4, what, lanes, idx)
            if self.race:
                self._race(reg, offs, 4, g, what, "atomic")
            lo, hi = int(offs.min()), int(offs.max()) + 4
            cells = reg.data[lo:hi].view(np.float32)
            np.add.at(cells, (offs - lo) // 4, values[idx].astype(np.float32))
            if self.footprint is not None:
                self.footprint.mark(reg, offs, 4, load=True)
                self.footprint.mark(reg, offs, 4, load=False)
        self.bytes_loaded += 4 * addrs.size
        self.bytes_stored += 4 * addrs.size

    # ------------------------------------------------------------ whole-batch raw buffer accesses
    def load_rows(self, addr: np.ndarray, span: np.ndarray, rows: native.RegisterRows, wave_group: np.ndarray,
                  valid: np.ndarray | None = None) -> bool:
        """A raw buffer load of every lane of a batch into register rows (fastpath_buffer.py), as load() and the
        handler do it: addr, span from native.buf_addrs; wave_group: the workgroup of each wave. `valid`: lanes with
        every component in range or none (the others' registers 0), loaded as the handler's component loop does it, a
        load of `rows.size` bytes per component. False, having changed nothing, where the accesses are not in the one
        buffer load() would find for them or some check has a finding: the general path then runs (and reports it)."""
        size, count = rows.size, rows.components
        lanes = addr.size if valid is None else int(span[3])
        if not lanes:                                       # every lane out of range: zeros, no access
            native.buf_load_lanes(None, 0, addr, valid, None, None, None, 0, wave_group, None, rows)
            return True
        lo, hi = int(span[0]), int(span[1])
        unit = count * size if valid is None else size     # the bytes of one access
        reg = self._one_region(lo, hi, unit)
        if valid is not None and any(self._one_region(lo + j * size, hi + j * size, size) is not reg
                                     for j in range(1, count)):
            return False
        batch = self._batch(reg, unit, span, load=True)
        if batch is None:
            return False
        reg, shadow = batch.reg, batch.shadow
        checks = (reg.written if self.initcheck else None,
                  shadow.modifier if shadow is not None and shadow.modified else None,
                  shadow.reader if shadow is not None else None, batch.shift, wave_group, batch.touched, rows)
        found = native.buf_load(reg.data, reg.base, addr, *checks) if valid is None else \
            native.buf_load_lanes(reg.data, reg.base, addr, valid, *checks)
        if found:
            self._drop_fresh(batch, True)
            return False
        if shadow is not None:
            shadow.read = True
        self._count_moved(reg, True, lanes * count * size)
        return True

    def store_rows(self, addr: np.ndarray, span: np.ndarray, rows: native.RegisterRows, wave_group: np.ndarray
                   ) -> bool:
        """A raw buffer store of every lane of a batch from register rows: load_rows' counterpart for store()."""
        nbytes = rows.components * rows.size
        batch = self._batch(self._one_region(int(span[0]), int(span[1]), nbytes), nbytes, span, load=False)
        if batch is None:
            return False
        reg, shadow = batch.reg, batch.shadow
        modified = shadow is not None and shadow.modified
        code, first = native.buf_store(reg.data, reg.base, addr, reg.written,
                                       shadow.modifier if shadow is not None else None, modified,
                                       shadow.reader if shadow is not None and shadow.read else None, batch.shift,
                                       wave_group, batch.touched, rows)
        if code:
            self._drop_fresh(batch, False)
        if code == 1:
            return False
        if shadow is not None:
            shadow.modified = True
        if code == 2:                     # addr holds the byte offsets now
            assert shadow is not None
            self._store_clash(reg, shadow, addr, nbytes, np.repeat(wave_group, 64).astype(np.int32), first,
                              "buffer store")
        self._count_moved(reg, False, addr.size * nbytes)
        return True

    def _batch(self, reg: Region | None, nbytes: int, span: np.ndarray, load: bool) -> _Batch | None:
        """What a whole-batch access of `nbytes` per lane to `reg` needs of the checkers (load_rows, store_rows). None
        where the access cannot be taken whole: no one buffer holds it, the race checker cannot tell its granule, or
        it stores to a read-only buffer."""
        if reg is None:
            return None
        race = self._race_entries(reg, nbytes, span) if self.race else None
        if (self.race and race is None) or (not load and not reg.data.flags.writeable):
            return None
        shadow, shift = race if race is not None else (None, 0)
        touched, fresh = self.footprint.touched(reg, load) if self.footprint is not None else (None, False)
        return _Batch(reg, shadow, shift, touched, fresh)

    def _drop_fresh(self, batch: _Batch, load: bool) -> None:
        """A batch access given up (the general path runs it): the touched-byte map it made is forgotten."""
        if batch.fresh and self.footprint is not None:
            self.footprint.forget(batch.reg, load)

    def _one_region(self, lo: int, hi: int, nbytes: int) -> Region | None:
        """The buffer holding every access of `nbytes` from `lo` to `hi`, as _resolve finds it."""
        r = self._containing(lo, nbytes)
        return r if r is not None and hi + nbytes <= r.end else None

    def _race_entries(self, reg: Region, nbytes: int, span: np.ndarray) -> tuple[RaceShadow, int] | None:
        """(reg's race shadow, log2 of its granule for this access), None where the offsets' alignment is not
        known from the addresses' OR (a buffer whose base is not 4-byte aligned)."""
        if reg.base & 3:
            return None
        shadow = self._shadows.get(id(reg))
        if shadow is None:
            shadow = self._shadows[id(reg)] = RaceShadow(reg.size)
        return shadow, shadow.shift_for(nbytes, not int(span[2]) & 3)

    def _count_moved(self, reg: Region, load: bool, moved: int) -> None:
        if self.footprint is not None:
            self.footprint.count(reg, load, moved)
        if load:
            self.bytes_loaded += moved
        else:
            self.bytes_stored += moved

    # ------------------------------------------------------------ initcheck and race
    def _check_written(self, reg: Region, offs: np.ndarray, nbytes: int, what: str, lanes: np.ndarray | None,
                       idx: np.ndarray) -> None:
        assert reg.written is not None                  # the callers check it
        first = native.first_unset(reg.written, offs, nbytes)
        if first < 0:
            return
        i, j = divmod(first, nbytes)
        lane = f" (lane {int(lanes[idx[i]])})" if lanes is not None else ""
        raise UninitializedRead(f"uninitialized read: {what}{lane} reads byte offset {int(offs[i]) + j} of "
                                f"'{reg.name}' [0x{reg.base:x}, +{reg.size}), which starts uninitialized and nothing "
                                f"has written yet")

    def _race(self, reg: Region, offs: np.ndarray, nbytes: int, g: np.ndarray | None, what: str, mode: str) -> None:
        """The cross-workgroup race checker for one access to `reg` (mode: load, store or atomic): `nbytes` bytes from
        each byte offset `offs`, by workgroups `g`. A finding comes back from the native helper in the shadow's
        entries and is reported at its first byte (the bytes of a dword entry share its state)."""
        if g is None:
            raise EmulatorFault(f"{what}: the race checker needs the workgroup of each access (handler bug)")
        shadow = self._shadows.get(id(reg))
        if shadow is None:
            shadow = self._shadows[id(reg)] = RaceShadow(reg.size)
        units, per = shadow.units(offs, nbytes)

        def byte_of(found: int) -> int:
            i, j = divmod(found, per)
            return i * nbytes + j * shadow.granule
        if shadow.modified:                                # (a buffer no one modified yet has nothing to clash with)
            first = native.race_modified(shadow.modifier, units, per, g, atomic=mode == "atomic")
            if first >= 0:
                self._race_fault(byte_of(first), shadow, "modifier", offs, nbytes, g, reg, what)
        if mode != "load" and shadow.read:
            first = native.race_read(shadow.reader, units, per, g)
            if first >= 0:
                self._race_fault(byte_of(first), shadow, "reader", offs, nbytes, g, reg, what)
        if mode == "store":
            shadow.modified = True
            first = native.race_store(shadow.modifier, units, per, g)    # two workgroups storing one byte in
            if first >= 0:                                                # this very access
                self._store_clash(reg, shadow, offs, nbytes, g, first, what)
        elif mode == "atomic":
            shadow.modified = True
            native.race_note(shadow.modifier, units, per, g, atomic=True)
        else:
            shadow.read = True
            native.race_note(shadow.reader, units, per, g, atomic=False)

    def _store_clash(self, reg: Region, shadow: RaceShadow, offs: np.ndarray, nbytes: int, g: np.ndarray, first: int,
                     what: str) -> None:
        """Raise the clash of two workgroups storing one byte in one access: `first` is the shadow entry race_store
        found (lane * entries each + entry)."""
        i, j = divmod(first, nbytes // shadow.granule)
        byte = int(offs[i]) + j * shadow.granule
        raise GlobalRace(f"global race: workgroups {self.group_name(int(g[i]))} and "
                         f"{self.group_name(shadow.entry(byte, 'modifier'))} both {what} byte offset {byte} "
                         f"of '{reg.name}' in this launch (no atomics order them)")

    def _race_fault(self, first: int, shadow: RaceShadow, name: str, offs: np.ndarray, nbytes: int, g: np.ndarray,
                    reg: Region, what: str) -> None:
        """Raise the finding at byte index `first` (i * nbytes + j) against the shadow's `name` array."""
        i, j = divmod(first, nbytes)
        byte = int(offs[i]) + j
        prev = shadow.entry(byte, name)
        if prev == SEVERAL:
            by = "several other workgroups"
        else:
            by = f"workgroup {self.group_name(prev if prev >= 0 else -3 - prev)}"
        verb = ("stored" if prev >= 0 else "added to atomically") if name == "modifier" else "loaded"
        raise GlobalRace(f"global race: workgroup {self.group_name(int(g[i]))} {what}s byte offset "
                         f"{byte} of '{reg.name}', which {by} {verb} in this launch (no atomics order "
                         f"them)")
