"""Planted faults the emulated device must catch (kernels: tests/planted_kernels.py).

One small FlyDSL kernel (a row sum: plain global loads under a row-tail guard, an xor butterfly per
wave, per-wave partials through LDS) is compiled correct and with one planted bug at a time:

- a missing s_barrier between the LDS partial writes and their reads  -> EmulatorFault: LDS race
- the row-tail guard `j <= N` instead of `j < N`                      -> EmulatorFault from the memory
  checker: the last row reads 4 bytes past the end of 'x'
- a butterfly with a skipped stage / a wrong last offset               -> wrong values vs an fp64 sum
- (use after free) a launch on the address of a tensor already freed  -> EmulatorFault: outside every buffer
- thread 0 stores y[r] + sum: reads the workspace row before any write  -> UninitializedRead (initcheck)
- workgroup r stores into y[r // 2]: two workgroups, one partial row    -> GlobalRace (race)
- the last wave never stores its LDS partial, all waves read it         -> uninitialized LDS read (initcheck)
- the correct code object with one s_waitcnt replaced by an s_nop of the same size (the binary the
  emulator receives is patched): the kernarg SMEM wait, the first vmcnt wait, the lgkmcnt wait before
  s_barrier                                                             -> WaitcntFault naming both PCs,
                                                                           register, counter and the wait

The correct twin must run clean (all checks on; y is declared uninitialized, as the wrappers declare their
outputs) and match fp64 on the same inputs, so each catch is the bug's doing; with its checker switched off
each planted fault runs without complaint. Everything runs in-process on the emulator, gfx942 and gfx950.
"""

import re
from typing import TypeVar

import pytest
import torch

from lnbench.emu import checks as emu_checks, runtime
from lnbench.emu.codeobject import read_code_object
from lnbench.emu.decode import decode_at
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.hazards import WaitcntFault, waitcnt_fields
from lnbench.emu.memory import GlobalRace, UninitializedRead

pytestmark = pytest.mark.skipif(not runtime.availability()[0],
                                reason=f"needs the emulated device: {runtime.availability()[1]}")

M, N = 5, 1000          # N % 256 != 0: the last 256-thread chunk of a row has a tail (232 of 256 lanes)
PAD = 64                # fp32 elements of slack after x in its storage: nothing registered lies there


@pytest.fixture
def emu(monkeypatch):
    """setup(arch) -> the planted_kernels module, with the emulator and the compile env set for `arch`."""
    from lnbench.emu import codeobject
    from lnbench.flydsl.toolkit import compile_env

    arches: list[str] = []
    real_run = runtime.run_kernel

    def spy(code_object, *args, **kwargs):           # which arch the executed code object was built for
        arches.append(codeobject.read_code_object(bytes(code_object)).arch)
        return real_run(code_object, *args, **kwargs)

    monkeypatch.setattr(runtime, "run_kernel", spy)

    def setup(arch: str):
        runtime.activate(arch)                        # idempotent; before any non-COMPILE_ONLY compile
        env = compile_env(arch)
        env.pop("COMPILE_ONLY", None)
        monkeypatch.delenv("COMPILE_ONLY", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        import planted_kernels
        return planted_kernels

    setup.arches = arches
    return setup


@pytest.fixture
def only_checks(monkeypatch):
    """only_checks("memory,lds"): run the next launches with these checks (restored after the test)."""
    monkeypatch.setattr(runtime, "_checks", None)
    monkeypatch.delenv(emu_checks.ENV, raising=False)

    def choose(text: str) -> frozenset[str]:
        chosen = runtime.set_checks(text)
        monkeypatch.setenv(emu_checks.ENV, emu_checks.canonical(chosen))   # undone after the test
        return chosen
    return choose


@pytest.fixture
def patched(monkeypatch):
    """patched(pick) -> record: the emulator receives each code object with one s_waitcnt replaced by an
    s_nop of the same size; pick(waits) chooses which from [(pc, (vmcnt, expcnt, lgkmcnt), next opcode)]."""
    record: dict = {}
    real_run = runtime.run_kernel

    def setup(pick):
        def run(code_object, kernel_name, *args, **kwargs):
            co = bytearray(code_object)
            kernel = read_code_object(bytes(co)).kernels[kernel_name]
            waits, pc = [], 0
            while pc < len(kernel.code):
                ins = decode_at(kernel.code, pc)
                if ins.name == "s_waitcnt":
                    nxt = decode_at(kernel.code, pc + ins.size).name
                    waits.append((pc, waitcnt_fields(ins.f["simm16"]), nxt))
                if ins.name == "s_endpgm":
                    break
                pc += ins.size
            pc, fields, _ = pick(waits)
            start = bytes(co).index(kernel.code)              # the kernel's entry in the ELF image
            co[start + pc:start + pc + 4] = S_NOP.to_bytes(4, "little")
            record.update(pc=pc, fields=fields, code=bytes(co)[start:], kernel=kernel_name)
            return real_run(bytes(co), kernel_name, *args, **kwargs)
        monkeypatch.setattr(runtime, "run_kernel", run)
        return record
    return setup


S_NOP = 0xBF800000          # s_nop 0: SOPP, 4 bytes like s_waitcnt


def _inputs(seed: int = 0):
    """x (M, N) fp32 at the start of a larger storage (reads past x land in unregistered slack), y = NaN."""
    g = torch.Generator().manual_seed(seed)
    storage = torch.randn(M * N + PAD, generator=g)
    x = storage[:M * N].view(M, N)
    y = torch.full((M,), float("nan"))
    return storage, x, y


def _run(pk, plant: str, x: torch.Tensor, y: torch.Tensor, *, x_ptr: int | None = None, register_x: bool = True):
    fn = pk.compile_row_sum(N, plant)
    assert fn is not None, "compiled with COMPILE_ONLY set"
    buffers = {"x": x, "y": y} if register_x else {"y": y}
    with runtime.launch_scope(buffers, uninitialized=("y",)) as launches:   # y is the output: starts unwritten
        fn(x.data_ptr() if x_ptr is None else x_ptr, y.data_ptr(), M, N, plant, None)
    return launches


F = TypeVar("F", bound=EmulatorFault)


def _fault(pk, plant: str, kind: type[F] = EmulatorFault, inputs: tuple[torch.Tensor, torch.Tensor] | None = None,
           **kwargs) -> tuple[F, str]:
    """The fault of `kind` the planted kernel's launch raises, and its message; inputs: (x, y), else fresh ones."""
    x, y = inputs if inputs is not None else _inputs()[1:]
    with pytest.raises(kind) as info:
        _run(pk, plant, x, y, **kwargs)
    return info.value, str(info.value)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_correct_row_sum_matches_fp64(emu, arch):
    pk = emu(arch)
    storage, x, y = _inputs()
    launches = _run(pk, pk.CORRECT, x, y)
    assert emu.arches == [arch]
    assert len(launches) == 1 and launches[0].grid == (M, 1, 1) and launches[0].block == (pk.BLOCK, 1, 1)
    assert launches[0].global_bytes_loaded >= 4 * M * N and launches[0].global_bytes_stored == 4 * M
    ref = x.double().sum(1)
    assert torch.allclose(y.double(), ref, rtol=1e-5, atol=1e-4), (y, ref)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_missing_barrier_is_an_lds_race(emu, arch):
    pk = emu(arch)
    err, msg = _fault(pk, pk.NO_BARRIER)
    assert emu.arches == [arch]
    assert "LDS race" in msg and "no s_barrier between them" in msg, msg
    assert err.kernel.startswith("row_sum") and err.opcode.startswith("ds_read"), (err.kernel, err.opcode)
    assert msg.startswith(f"kernel {err.kernel}, PC 0x{err.pc:x} ({err.opcode})"), msg


def test_row_tail_off_by_one_reads_past_the_end_of_x(emu):
    pk = emu("gfx942")
    storage, x, y = _inputs()
    err, msg = _fault(pk, pk.TAIL_OFF_BY_ONE, inputs=(x, y))
    end = x.data_ptr() + x.numel() * x.element_size()
    assert err.opcode == "global_load_dword", msg
    assert f"global load of 4 byte(s) at 0x{end:x}" in msg, msg       # x[M-1, N]: the first byte past x
    assert "(lane 40)" in msg, msg                                     # j = 768 + tid = N -> tid 232, wave 3
    assert f"nearest buffer 'x' [0x{x.data_ptr():x}, +{4 * M * N}), 4 byte(s) past its end" in msg, msg


@pytest.mark.parametrize("plant,factor", [("xor_skip_stage", 1.0), ("xor_wrong_offset", 2.0)])
def test_wrong_butterfly_gives_wrong_values(emu, plant, factor):
    pk = emu("gfx942")
    storage, x, y = _inputs()
    _run(pk, plant, x, y)                                              # runs clean: only the values are wrong
    ref = x.double().sum(1)
    assert not torch.allclose(y.double(), ref, rtol=1e-3, atol=1e-2), (y, ref)
    # what the bug computes: lane 0 of each wave never adds its odd neighbours (lane parity = column parity)
    even = x.double()[:, 0::2].sum(1) * factor
    assert torch.allclose(y.double(), even, rtol=1e-5, atol=1e-4), (y, even)


def test_use_after_free_is_outside_every_buffer(emu):
    pk = emu("gfx942")
    y = torch.full((M,), float("nan"))                                 # allocated first: cannot reuse x's memory
    x = torch.randn(M, N)
    stale = x.data_ptr()
    del x                                                              # freed before the launch
    err, msg = _fault(pk, pk.CORRECT, inputs=(y.new_empty(0), y), x_ptr=stale, register_x=False)
    assert err.opcode == "global_load_dword", msg
    assert "global load of 4 byte(s) at 0x" in msg and "is outside every buffer" in msg, msg


# ---------------------------------------------------------------- initcheck, race, waitcnt


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_reading_the_workspace_row_before_any_write_is_an_uninitialized_read(emu, arch):
    pk = emu(arch)
    storage, x, y = _inputs()
    err, msg = _fault(pk, pk.ACCUMULATE_INTO_Y, UninitializedRead, (x, y))
    assert emu.arches == [arch]
    # the uniform address makes it a scalar load of y[0] (workgroup 0 runs first)
    assert f"uninitialized read: {'s_load' if err.opcode.startswith('s_load') else 'global load'}" in msg, msg
    assert f"reads byte offset 0 of 'y' [0x{y.data_ptr():x}, +{4 * M}), which starts uninitialized" in msg, msg
    assert msg.startswith(f"kernel {err.kernel}, PC 0x{err.pc:x} ({err.opcode})"), msg


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_two_workgroups_writing_one_partial_row_is_a_race(emu, arch):
    pk = emu(arch)
    err, msg = _fault(pk, pk.SHARED_PARTIAL, GlobalRace)
    assert err.opcode.startswith("global_store"), msg
    hit = re.search(r"global race: workgroups \((\d), 0, 0\) and \((\d), 0, 0\) both global store byte offset "
                    r"(\d+) of 'y' in this launch", msg)
    assert hit, msg
    a, b, offset = (int(v) for v in hit.groups())
    assert {a, b} == {0, 1} and offset == 0, msg          # rows 0 and 1 both store y[0]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_reading_lds_no_wave_wrote_is_an_uninitialized_read(emu, arch):
    pk = emu(arch)
    err, msg = _fault(pk, pk.LDS_UNWRITTEN)
    assert err.opcode.startswith("ds_read"), msg
    # partial i is fp32 at byte 4*i; the last wave's (i = 3) is never stored
    assert f"uninitialized read: LDS byte {4 * (pk.NWAVES - 1)} (lane 0) is read before any wave of its " \
           f"workgroup wrote it" in msg, msg


@pytest.mark.parametrize("plant,off", [("accumulate_into_y", "initcheck"), ("shared_partial", "race"),
                                       ("lds_unwritten", "initcheck"), ("no_barrier", "lds"),
                                       ("tail_off_by_one", "memory")])
def test_each_checker_can_be_switched_off(emu, only_checks, plant, off):
    pk = emu("gfx942")
    only_checks(",".join(c for c in emu_checks.CHECKS if c != off))
    storage, x, y = _inputs()
    launches = _run(pk, plant, x, y)                       # the planted bug runs without complaint
    assert launches[0].checks == tuple(c for c in emu_checks.CHECKS if c != off)


def _wait_fault(emu, patched, arch, pick) -> tuple[WaitcntFault, dict]:
    pk = emu(arch)
    record = patched(pick)
    return _fault(pk, pk.CORRECT, WaitcntFault)[0], record


_HAZARD = re.compile(r"wait-count hazard: (\w+) at PC 0x([0-9a-f]+) (reads|overwrites) ([sv]\d+) while (\w+) at PC "
                     r"0x([0-9a-f]+) may still be writing it \((vmcnt|lgkmcnt); wave \d+\); s_waitcnt "
                     r"(vmcnt|lgkmcnt)\((\d+)\) before PC 0x([0-9a-f]+) would cover it")


def _check_hazard(err: WaitcntFault, record: dict, producer: str, counter: str, removed_count: int) -> None:
    msg = str(err)
    hit = _HAZARD.search(msg)
    assert hit, msg
    consumer, cpc, _verb, reg, prod, ppc, ctr, ctr2, need, cpc2 = hit.groups()
    cpc, ppc, need = int(cpc, 16), int(ppc, 16), int(need)
    assert err.pc == cpc == int(cpc2, 16) and err.opcode == consumer, msg
    assert ctr == ctr2 == counter and prod.startswith(producer), msg
    assert ppc < record["pc"] < cpc, (msg, record["pc"])   # producer, removed wait, consumer: in that order
    code = record["code"]
    produced = decode_at(code, ppc)
    assert produced.name == prod, msg
    field = "sdata" if producer == "s_load" else "vdst"
    first, width = produced.f[field] % 256, produced.widths.get(field, 1)
    assert int(reg[1:]) in range(first, first + width), msg        # the register is one the producer loads
    assert need >= removed_count, msg                               # the removed wait did cover it


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_removed_kernarg_wait_is_a_wait_count_hazard(emu, patched, arch):
    err, record = _wait_fault(emu, patched, arch, lambda waits: next(w for w in waits if w[1][2] == 0))
    _check_hazard(err, record, "s_load", "lgkmcnt", 0)
    assert "s_waitcnt lgkmcnt(0)" in str(err)           # SMEM returns out of order: only a wait of 0 covers it


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_removed_vmcnt_wait_is_a_wait_count_hazard(emu, patched, arch):
    err, record = _wait_fault(emu, patched, arch, lambda waits: next(w for w in waits if w[1][0] < 63))
    _check_hazard(err, record, "global_load", "vmcnt", record["fields"][0])


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_removed_wait_before_the_barrier_leaves_an_lds_store_pending(emu, patched, arch):
    err, record = _wait_fault(emu, patched, arch, lambda waits: next(w for w in waits if w[2] == "s_barrier"))
    msg = str(err)
    hit = re.search(r"wait-count hazard: s_barrier at PC 0x([0-9a-f]+) with (ds_write\w*) at PC 0x([0-9a-f]+) not "
                    r"complete \(lgkmcnt; wave \d+\): .* s_waitcnt lgkmcnt\(0\) before PC 0x([0-9a-f]+) would cover it",
                    msg)
    assert hit, msg
    bpc, store, spc, bpc2 = int(hit[1], 16), hit[2], int(hit[3], 16), int(hit[4], 16)
    assert err.opcode == "s_barrier" and err.pc == bpc == bpc2 == record["pc"] + 4, msg
    assert decode_at(record["code"], spc).name == store and spc < record["pc"], msg


def test_the_same_patched_code_runs_clean_with_waitcnt_off(emu, patched, only_checks):
    pk = emu("gfx942")
    only_checks("memory,lds,initcheck,race")
    patched(lambda waits: next(w for w in waits if w[1][0] < 63))
    storage, x, y = _inputs()
    _run(pk, pk.CORRECT, x, y)                # completes at issue here: the values are even right
    assert torch.allclose(y.double(), x.double().sum(1), rtol=1e-5, atol=1e-4)
