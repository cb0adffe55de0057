"""Planted faults the emulated device must catch (kernels: tests/planted_kernels.py).

One small FlyDSL kernel (a row sum: plain global loads under a row-tail guard, an xor butterfly per
wave, per-wave partials through LDS) is compiled correct and with one planted bug at a time:

- a missing s_barrier between the LDS partial writes and their reads  -> EmulatorFault: LDS race
- the row-tail guard `j <= N` instead of `j < N`                      -> EmulatorFault from the memory
  checker: the last row reads 4 bytes past the end of 'x'
- a butterfly with a skipped stage / a wrong last offset               -> wrong values vs an fp64 sum
- (use after free) a launch on the address of a tensor already freed  -> EmulatorFault: outside every buffer

The correct twin must run clean and match fp64 on the same inputs, so each catch is the bug's doing.
Everything runs in-process on the emulator (gfx942; gfx950 too for the correct run and the race).
"""

import pytest
import torch

from lnbench.emu import runtime
from lnbench.emu.errors import EmulatorFault

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
    with runtime.launch_scope(buffers) as launches:
        fn(x.data_ptr() if x_ptr is None else x_ptr, y.data_ptr(), M, N, plant, None)
    return launches


def _fault(pk, plant: str, **kwargs) -> EmulatorFault:
    storage, x, y = _inputs()
    with pytest.raises(EmulatorFault) as info:
        _run(pk, plant, x, y, **kwargs)
    return info.value


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
    err = _fault(pk, pk.NO_BARRIER)
    assert emu.arches == [arch]
    msg = str(err)
    assert "LDS race" in msg and "no s_barrier between them" in msg, msg
    assert err.kernel.startswith("row_sum") and err.opcode.startswith("ds_read"), (err.kernel, err.opcode)
    assert msg.startswith(f"kernel {err.kernel}, PC 0x{err.pc:x} ({err.opcode})"), msg


def test_row_tail_off_by_one_reads_past_the_end_of_x(emu):
    pk = emu("gfx942")
    storage, x, y = _inputs()
    with pytest.raises(EmulatorFault) as info:
        _run(pk, pk.TAIL_OFF_BY_ONE, x, y)
    err, msg = info.value, str(info.value)
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
    with pytest.raises(EmulatorFault) as info:
        _run(pk, pk.CORRECT, y.new_empty(0), y, x_ptr=stale, register_x=False)
    err, msg = info.value, str(info.value)
    assert err.opcode == "global_load_dword", msg
    assert "global load of 4 byte(s) at 0x" in msg and "is outside every buffer" in msg, msg
