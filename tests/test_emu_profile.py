"""The executed profile: per-buffer footprint in the memory checker, `inspect --execute`, abi-compare's
executed-instruction columns."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cli_helpers import error_line, invoke
from lnbench.inspect import command as inspect_command
from lnbench.abi import static
from lnbench.emu.memory import BufferTraffic, Memory, MemoryFault

#: classes both ABIs execute equally often: they share the row body (only the views differ)
SHARED_CLASSES = ("vmem_load", "vmem_store", "lds", "cross_lane", "branch")


def _memory(size: int = 64) -> tuple[Memory, np.ndarray, int]:
    mem = Memory()
    data = np.zeros(size, np.uint8)
    mem.add(data.ctypes.data, size, "a", data)
    other = np.zeros(size, np.uint8)
    mem.add(other.ctypes.data, size, "untouched", other)
    mem._keep = other                      # noqa: SLF001 - keep the second buffer alive for the test
    return mem, data, data.ctypes.data


def test_footprint_counts_instruction_bytes_and_distinct_bytes_per_buffer():
    mem, _, base = _memory()
    mem.start_footprint()
    mem.load(np.array([base, base + 4], np.uint64), 4)
    mem.load(np.array([base + 2], np.uint64), 4)              # overlaps both: 4 more moved, nothing new touched
    mem.store(np.array([base + 8, base + 8], np.uint64), np.ones((2, 4), np.uint8))
    mem.atomic_add_f32(np.array([base + 16, base + 16, base + 20], np.uint64), np.ones(3, np.float32))
    traffic = mem.take_footprint()
    assert traffic == {"a": BufferTraffic("a", 64, loaded=12 + 12, stored=8 + 12, unique_loaded=8 + 8,
                                          unique_stored=4 + 8)}
    assert mem.take_footprint() == {}                          # recording stopped
    mem.load(np.array([base], np.uint64), 4)
    assert mem.footprint is None


def test_footprint_is_not_taken_for_a_faulting_access():
    mem, _, base = _memory()
    mem.start_footprint()
    with pytest.raises(MemoryFault):
        mem.load(np.array([base + 62], np.uint64), 4)           # 2 bytes past the end of 'a'
    assert mem.take_footprint() == {}


def _fake_facts(abi: str):
    return [SimpleNamespace(kernel_name=f"ln_fwd_bf16_n64_{abi}", kernarg_bytes=112 if abi == "tensor" else 52,
                            launcher_slots=14 if abi == "tensor" else 8, kernel_args=[(0, 8, "global_buffer")] * 3,
                            vgpr=40, sgpr=30, vgpr_spills=0, sgpr_spills=0, lds_bytes=0, scratch_bytes=0,
                            instruction_count=300)]


def test_static_rows_get_executed_columns_and_report_execution_errors():
    def facts_fn(op, dtype, n, abi, arch, eps, dgamma_strategy):
        return _fake_facts(abi)

    def execute_fn(op, dtype, m, n, abi, arch, eps, dgamma_strategy):
        if n == 128:
            raise RuntimeError("EmulatorFault: kernel ln_fwd, PC 0x40\nmore")
        classes = {"salu": 40 if abi == "tensor" else 30, "valu": 100}
        return [SimpleNamespace(m=m, total=sum(classes.values()), wave_instructions=classes)]

    rows = static.static_rows(["gfx942"], ["fwd"], ["bf16"], [64, 128], facts_fn=facts_fn, execute={64: 4, 128: 2},
                              execute_fn=execute_fn)
    ok, failed = rows
    assert ok.exec_status == "ok" and ok.exec_rows == 4
    assert (ok.exec_tensor, ok.exec_pointer) == (140, 130) and ok.exec_per_row_pointer == 130 / 4
    assert ok.exec_ratio == pytest.approx(130 / 140) and ok.value("exec_salu_tensor") == 40
    assert failed.status == "ok"
    assert failed.exec_status == "error: RuntimeError: EmulatorFault: kernel ln_fwd, PC 0x40"
    assert not static.static_rows(["gfx942"], ["fwd"], ["bf16"], [64], facts_fn=facts_fn)[0].has("exec_status")


@pytest.mark.rocm
@pytest.mark.parametrize("m, n", [(16, 256), (16, 1024)])
def test_both_abis_share_the_row_body_and_the_pointer_abi_executes_less(m, n):
    """One row body, two entry points: memory, LDS, cross-lane and branch counts are equal between the ABIs; the
    Pointer ABI reads fewer kernel arguments (SMEM) and executes fewer instructions in all."""
    from lnbench.flydsl.inspect import execute_variant
    for op, launches in (("fwd", 1), ("bwd", 2)):
        t = execute_variant(op, "bf16", m, n, "tensor", "gfx942", seed=1)
        p = execute_variant(op, "bf16", m, n, "pointer", "gfx942", seed=1)
        assert len(t) == len(p) == launches
        for tk, pk in zip(t, p):
            for cls in SHARED_CLASSES:
                assert tk.wave_instructions[cls] == pk.wave_instructions[cls], (op, cls)
            assert pk.wave_instructions["smem"] < tk.wave_instructions["smem"] and pk.total < tk.total, op


@pytest.mark.rocm
def test_inspect_execute_prints_and_writes_the_executed_profile(tmp_path):
    out = tmp_path / "x.csv"
    result = invoke("inspect", "--execute", "--arch", "gfx942", "--abi", "pointer",
                    "--op", "fwd,bwd", "--shapes", "8x256", "--csv", str(out))
    assert result.exit_code == 0, result.output
    assert "executed on the emulated device" in result.output and "3 launches executed" in result.output
    frame = pd.read_csv(out)
    executed = frame[frame["part"] == "executed"]
    assert len(frame[frame["part"] == "static"]) == 3 and len(executed) == 3 and set(executed["status"]) == {"ok"}
    classes = executed[[f"exec_{c}" for c in static.EXEC_CLASSES]].sum(axis=1)
    assert (classes == executed["exec_instructions"]).all() and (executed["exec_instructions"] > 0).all()
    assert (executed["exec_instructions_per_row"] == executed["exec_instructions"] / 8).all()
    fwd = executed[executed["op"] == "fwd"].iloc[0]
    assert fwd["unique_bytes_loaded"] == 8 * 256 * 2 + 2 * 256 * 2        # x, γ, β (kernarg not counted)
    assert fwd["unique_bytes_stored"] == 8 * 256 * 2 + 2 * 8 * 4          # y, mean, rstd


def test_inspect_execute_without_the_emulator_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(inspect_command, "emulator_status", lambda: (False, "needs tinygrad: pip install tinygrad"))
    error_line(invoke("inspect", "--execute", "--arch", "gfx942"),
               "--execute needs the emulated device")
