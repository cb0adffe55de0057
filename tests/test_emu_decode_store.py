"""Decoded kernels kept between processes (lnbench.emu.decode_store): what a later Program reads is what the
decoder gives, a broken file is decoded again, and nothing is written where nothing new was decoded."""
from __future__ import annotations

import pytest

pytest.importorskip("tinygrad")
pytest.importorskip("msgpack")

from tinygrad.renderer.amd.dsl import s, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu import decode, decode_store  # noqa: E402
from lnbench.emu.decode import Program, decode_at  # noqa: E402

CODE = b"".join(i.to_bytes() for i in (I.v_add_u32_e32(v[3], v[0], v[1]), I.v_mov_b32_e32(v[3], 0x12345678),
                                         I.v_fma_f32_e64(v[3], s[2], v[1], 0.5), I.s_endpgm()))


def _walk(program: Program) -> list[tuple]:
    out, pc = [], 0
    while pc < len(CODE):
        ins = program.at(pc)
        out.append((ins.pc, ins.size, ins.name, ins.fmt, ins.f, ins.widths, ins.literal, ins.ends_group))
        pc += ins.size
    return out


def _no_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args):
        raise AssertionError("the decoder ran")
    monkeypatch.setattr(decode, "_decode", refuse)
    decode._decoded.clear()


def test_a_later_program_reads_what_the_decoder_gave(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(tmp_path))
    first = Program(CODE, "k", lambda ins: None, stored=True)
    expected = _walk(first)
    assert expected == [(i.pc, i.size, i.name, i.fmt, i.f, i.widths, i.literal, i.ends_group)
                        for i in (decode_at(CODE, pc) for pc, *_ in expected)]
    assert not decode_store.path_for(CODE).exists()          # written by keep(), once
    first.keep()
    written = decode_store.path_for(CODE).stat().st_mtime_ns
    first.keep()                                             # nothing new: not written again
    assert decode_store.path_for(CODE).stat().st_mtime_ns == written
    _no_decoder(monkeypatch)
    assert _walk(Program(CODE, "k", lambda ins: None, stored=True)) == expected
    assert expected[1][6] == 0x12345678 and expected[-1][2] == "s_endpgm" and expected[-1][7]


def test_a_broken_or_foreign_file_is_decoded_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(tmp_path))
    path = decode_store.path_for(CODE)
    path.parent.mkdir(parents=True)
    for junk in (b"\xc1not msgpack", b"\x93\x01\x02\x03"):
        path.write_bytes(junk)
        assert decode_store.load(CODE) == {}
        program = Program(CODE, "k", lambda ins: None, stored=True)
        assert program.at(0).name == "v_add_u32"
    assert decode_store.path_for(CODE + b"\0\0\0\0") != path      # another code: another file


def test_an_unwritable_folder_only_costs_the_decoding(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LNBENCH_EMU_DIR", str(blocker))      # a folder cannot be made under a file
    program = Program(CODE, "k", lambda ins: None, stored=True)
    assert program.at(0).name == "v_add_u32"
    program.keep()
    assert decode_store.load(CODE) == {}
