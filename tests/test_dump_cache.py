"""The disk cache of compile dumps (lnbench.flydsl.dump_cache): kept per variant and per kernel source, a broken
file compiled again, off when asked, never used for stand-in launchers."""
from __future__ import annotations

import pytest

from lnbench.flydsl import dump_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("LNBENCH_COMPILE_CACHE", raising=False)
    monkeypatch.setattr(dump_cache, "_sources_key", lambda: "sources-A")
    return tmp_path


def _counting(texts):
    calls = []

    def compile_variant():
        calls.append(1)
        return texts
    return compile_variant, calls


def test_a_variant_is_compiled_once_and_then_read_back(cache):
    compile_variant, calls = _counting([("k0", "isa text", 7)])
    assert dump_cache.cached_dump(("fwd", "bf16", 64), compile_variant) == [("k0", "isa text", 7)]
    assert dump_cache.cached_dump(("fwd", "bf16", 64), compile_variant) == [("k0", "isa text", 7)]
    assert len(calls) == 1
    dump_cache.cached_dump(("fwd", "bf16", 128), compile_variant)             # another variant: compiled
    assert len(calls) == 2


def test_changed_kernel_sources_compile_again(cache, monkeypatch):
    compile_variant, calls = _counting([("k0", "isa", 1)])
    dump_cache.cached_dump(("bwd", "f32", 7), compile_variant)
    monkeypatch.setattr(dump_cache, "_sources_key", lambda: "sources-B")
    dump_cache.cached_dump(("bwd", "f32", 7), compile_variant)
    assert len(calls) == 2


def test_a_broken_file_is_compiled_again_and_rewritten(cache):
    compile_variant, calls = _counting([("k0", "isa", 1)])
    path = dump_cache.cache_path(("fwd", "f16", 7))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert dump_cache.cached_dump(("fwd", "f16", 7), compile_variant) == [("k0", "isa", 1)]
    assert len(calls) == 1 and dump_cache.cached_dump(("fwd", "f16", 7), compile_variant) == [("k0", "isa", 1)]
    assert len(calls) == 1


def test_the_cache_can_be_turned_off(cache, monkeypatch):
    monkeypatch.setenv("LNBENCH_COMPILE_CACHE", "0")
    compile_variant, calls = _counting([("k0", "isa", 1)])
    dump_cache.cached_dump(("fwd", "f32", 1), compile_variant)
    dump_cache.cached_dump(("fwd", "f32", 1), compile_variant)
    assert len(calls) == 2 and not (cache / "lnbench").exists()


def test_stand_in_launch_builders_bypass_the_cache(cache, monkeypatch):
    from lnbench.flydsl import inspect, launch

    monkeypatch.setattr(launch, "build_fwd_launcher", lambda *a, **k: None)
    monkeypatch.setattr(inspect, "_dump", lambda *a: [("k", "text", 1)])
    monkeypatch.setattr(inspect, "parse_isa", lambda text: {"parsed": text})
    monkeypatch.setattr(dump_cache, "cached_dump", lambda *a: pytest.fail("the cache was used"))
    assert inspect._own_dump(("fwd",), None, [], "gfx942") == [("k", {"parsed": "text", "text": "text"}, 1)]
