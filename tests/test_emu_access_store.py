"""Register-access records kept between processes (lnbench.emu.access_store): a later process's first execution of an
instruction takes the stored record (no recording run of the general handler), with every result unchanged."""
from __future__ import annotations

import hashlib

import pytest
import torch

pytest.importorskip("msgpack")

from lnbench.emu import access_store, machine  # noqa: E402

pytestmark = pytest.mark.rocm


@pytest.fixture
def own_store(tmp_path, monkeypatch):
    """Records kept in this test's folder, and no program of this process cached before or after."""
    monkeypatch.setattr(access_store, "path_for",
                        lambda code, base: tmp_path / f"{hashlib.sha256(code).hexdigest()[:16]}-{base}.msgpack")
    monkeypatch.setattr(machine, "_programs", {})
    return tmp_path


def _launch(kernel_device):
    """lnbench's forward and backward on seeded inputs; (outputs, the launches' profiles)."""
    from lnbench.emu import runtime
    from lnbench.flydsl import launch

    gen = torch.Generator().manual_seed(5)
    x = torch.randn(5, 768, generator=gen).to(torch.bfloat16)
    w = (torch.rand(768, generator=gen) + 0.5).to(torch.bfloat16)
    b = torch.randn(768, generator=gen).to(torch.bfloat16)
    dy = torch.randn(5, 768, generator=gen).to(torch.bfloat16)
    with runtime.recording() as launches:
        y, mean, rstd = launch.forward(x, w, b, 1e-5)
        grads = launch.backward(dy, x, w, mean, rstd, dgamma_strategy="deterministic")
    return (y, mean, rstd, *grads), launches


def _records(programs) -> dict:
    return {key: {pc: (a.reads.tolist(), a.writes.tolist(), a.kind, a.loads.tolist(), a.lds_store, a.always,
                       a.read_bits, a.write_bits, a.load_bits, a.use_bits) for pc, a in acc.items()}
            for key, (_, acc) in programs.items()}


def test_a_later_process_executes_with_the_stored_records(kernel_device, own_store, monkeypatch):
    first, profiles = _launch(kernel_device)
    recorded = _records(machine._programs)
    assert recorded and all(recorded.values())
    assert len(list(own_store.glob("*.msgpack"))) == len(recorded)

    monkeypatch.setattr(machine, "_programs", {})               # a new process: nothing decoded or recorded
    def no_recording(*_args):
        raise AssertionError("an instruction was recorded again")
    monkeypatch.setattr(machine, "RecordingStep", no_recording)
    again, profiles_again = _launch(kernel_device)
    assert _records(machine._programs) == recorded
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert [(p.wave_instructions, p.opcodes, p.steps, p.lds_bank_cycles) for p in profiles_again] == \
        [(p.wave_instructions, p.opcodes, p.steps, p.lds_bank_cycles) for p in profiles]


def test_a_broken_file_is_recorded_again(kernel_device, own_store, monkeypatch):
    _launch(kernel_device)
    recorded = _records(machine._programs)
    for path in own_store.glob("*.msgpack"):
        path.write_bytes(b"\x93\x01\x02")                        # msgpack, but not records
    monkeypatch.setattr(machine, "_programs", {})
    _launch(kernel_device)
    assert _records(machine._programs) == recorded


def test_another_emulator_reads_no_old_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(tmp_path))
    access_store._emulator_hash.cache_clear()
    before = access_store.path_for(b"\x00" * 8, None)
    monkeypatch.setattr(access_store, "_emulator_hash", lambda: "another-emulator")
    assert access_store.path_for(b"\x00" * 8, None) != before
    assert access_store.path_for(b"\x00" * 8, 64) != access_store.path_for(b"\x00" * 8, None)
