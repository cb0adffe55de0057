"""lnbench's own kernels load without FlyDSL's trace once an earlier compile traced them (lnbench.flydsl.trace_reuse):
the same code object and the same results, and every change to what a trace reads traces again."""
from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("flydsl")

from flydsl.compiler import jit_function  # noqa: E402

from lnbench.flydsl import compile_log, launch, trace_reuse  # noqa: E402
from lnbench.flydsl.toolkit import compile_env  # noqa: E402

pytestmark = pytest.mark.rocm


@pytest.fixture
def own_index(tmp_path, monkeypatch):
    """An empty trace index of this test, and lnbench's in-process compile cache emptied before and after."""
    monkeypatch.setattr(trace_reuse, "index_dir", lambda: tmp_path / "traces")
    monkeypatch.setattr(launch, "_cache", {})
    return tmp_path / "traces"


@pytest.fixture
def traces(monkeypatch):
    """The launchers FlyDSL traced while the test ran (by function name)."""
    seen: list[str] = []
    real = jit_function.JitFunction._trace

    def counting(self, *args, **kwargs):
        seen.append(self.func.__name__)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jit_function.JitFunction, "_trace", counting)
    return seen


def _inputs(m: int, n: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=gen).to(dtype)
    w = (torch.rand(n, generator=gen) + 0.5).to(dtype)
    b = torch.randn(n, generator=gen).to(dtype)
    dy = torch.randn(m, n, generator=gen).to(dtype)
    return x, w, b, dy


def _run(kernel_device, abi: str, m: int = 6, n: int = 512, dtype: torch.dtype = torch.bfloat16):
    """Forward and backward of lnbench's kernels on kernel_device; (outputs, code objects launched)."""
    from lnbench.emu import runtime

    x, w, b, dy = (t.to(kernel_device.torch_device) for t in _inputs(m, n, dtype, seed=m * 7 + n))
    with runtime.recording() as launches:
        y, mean, rstd = launch.forward(x, w, b, 1e-5, abi=abi)
        grads = launch.backward(dy, x, w, mean, rstd, abi=abi, dgamma_strategy="deterministic")
    return (y, mean, rstd, *grads), [p.code_object_sha256 for p in launches]


@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_a_second_process_loads_the_traced_kernels_without_a_trace(kernel_device, own_index, traces, abi):
    first, codes = _run(kernel_device, abi)
    assert sorted(traces) == ["launch"] * 3                   # forward, backward, its reduce: traced once each
    assert len(list(own_index.glob("*.json"))) == 3

    launch._cache.clear()                                      # a new process: nothing compiled in memory
    traces.clear()
    noted = len(compile_log.COMPILES)
    again, codes_again = _run(kernel_device, abi)
    assert traces == []
    assert [cold for _, cold in compile_log.COMPILES[noted:]] == [False] * 3     # three warm compiles for estimates
    assert codes_again == codes and all(codes)                 # the very code objects the trace made
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_another_row_count_is_the_same_trace_in_the_tensor_abi(kernel_device, own_index, traces):
    _run(kernel_device, "tensor", m=6)
    launch._cache.clear()
    traces.clear()
    _run(kernel_device, "tensor", m=9)                          # dynamic layouts: M is not in the trace
    assert traces == []


def test_any_change_to_what_a_trace_reads_traces_again(kernel_device, own_index, traces, monkeypatch):
    _run(kernel_device, "pointer")
    launch._cache.clear()
    traces.clear()
    monkeypatch.setattr(trace_reuse, "sources_digest", lambda: "an edited lnbench")
    _run(kernel_device, "pointer")
    assert len(traces) == 3

    launch._cache.clear()
    traces.clear()
    monkeypatch.setenv("FLYDSL_COMPILE_OPT_LEVEL", "1")       # FlyDSL's own key changes with it
    _run(kernel_device, "pointer", n=256)                       # (another width: a cold compile stays small)
    assert len(traces) == 3


def test_an_entry_gone_from_flydsls_cache_traces_and_indexes_again(kernel_device, own_index, traces):
    first, _ = _run(kernel_device, "pointer")
    for entry in own_index.glob("*.json"):                     # FlyDSL's cache lost the kernels (a user cleaned it)
        entry.write_text(json.dumps({"disk_key": "0" * 64, "launcher": "launch"}))
    launch._cache.clear()
    traces.clear()
    again, _ = _run(kernel_device, "pointer")
    assert len(traces) == 3
    assert all(json.loads(e.read_text())["disk_key"] != "0" * 64 for e in own_index.glob("*.json"))
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_the_key_names_the_build_and_the_argument_types(monkeypatch, own_index):
    plan = launch.geometry.row_plan(512, torch.bfloat16, "fwd", 8)
    for name, value in compile_env("gfx942").items():
        monkeypatch.setenv(name, value)
    launcher = launch.build_fwd_launcher(plan, 1e-5, True, "tensor")

    def key(identity: tuple, m: int, dtype: torch.dtype = torch.bfloat16) -> str | None:
        x = torch.empty(m, 512, dtype=dtype)
        w = torch.empty(512, dtype=dtype)
        args = [x, w, w, x, torch.empty(m), torch.empty(m), 1, None]
        return trace_reuse.trace_key(launcher, identity, tuple(args))

    base = key(("fwd", 1e-5), 2)
    assert base is not None
    assert key(("fwd", 1e-5), 40) == base                      # rows: a runtime value of the dynamic layout
    assert key(("fwd", 1e-6), 2) != base                       # eps is baked into the kernel
    assert key(("fwd", 1e-5), 2, torch.float16) != base        # another element type
    monkeypatch.setenv("ARCH", "gfx950")
    assert key(("fwd", 1e-5), 2) != base                        # another target


def test_kernel_sources_always_trace(own_index, monkeypatch):
    """A user's kernel source compiles without an identity: trace_reuse is never asked."""
    asked: list[object] = []
    monkeypatch.setattr(trace_reuse, "lookup", lambda *a: asked.append(a))
    monkeypatch.setattr(launch, "_flyc", lambda: (type("F", (), {"compile": staticmethod(lambda *a: "traced")}), None))
    assert launch._do_compile(lambda: None, [], "gfx942") == "traced"
    assert asked == []
