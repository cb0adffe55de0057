"""A stand-in for the emulated device, to test lnbench's wiring without the emulator.

FakeEmulator replaces lnbench.emu.runtime (availability, activate, current_arch, launch_scope) and the
FlyDSL compile in lnbench.flydsl.launch. Its "kernels" check that a launch runs inside launch_scope, on
stream None, and passes exactly the buffers the scope names (their data_ptr() ints for the Pointer ABI,
the tensors for the Tensor ABI), then compute LayerNorm with torch on those buffers. A planted fault
(`fault_if`) makes a scope raise EmulatorFault on exit, as the real runtime does after a faulting launch.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Mapping

import torch

from lnbench.emu.errors import EmulatorFault

Buffers = Mapping[str, torch.Tensor]


class FakeEmulator:
    def __init__(self) -> None:
        self.arch: str | None = None
        self.activations: list[str] = []
        self.compiled: list[tuple[str, str]] = []          # (kernel kind, arch)
        self.launches: list[tuple[str, tuple[str, ...]]] = []  # (kernel kind, buffer names)
        self.fault_if: Callable[[Buffers], bool] | None = None
        self._open: Buffers | None = None

    # ------------------------------------------------ lnbench.emu.runtime
    def availability(self) -> tuple[bool, str]:
        return True, ""

    def activate(self, arch: str) -> None:
        self.arch = arch
        self.activations.append(arch)

    def current_arch(self) -> str | None:
        return self.arch

    @contextlib.contextmanager
    def launch_scope(self, buffers: Buffers, uninitialized: tuple[str, ...] = ()) -> Iterator[None]:
        assert self._open is None, "launch scopes do not nest"
        assert set(uninitialized) <= set(buffers), (uninitialized, list(buffers))
        self._open = buffers
        try:
            yield
        finally:
            self._open = None
        if self.fault_if is not None and self.fault_if(buffers):
            raise EmulatorFault("planted fault: global_load_dword out of bounds", kernel="fake", pc=0x40)

    # ------------------------------------------------ lnbench.flydsl.launch compile seams
    def build_fwd_launcher(self, plan: Any, eps: float, store_stats: bool, abi: str) -> tuple:
        return ("fwd", eps, abi)

    def build_bwd_launchers(self, plan: Any, strategy: str, abi: str) -> tuple:
        return ("bwd", strategy, abi), (("reduce", strategy, abi) if strategy == "deterministic" else None)

    def do_compile(self, launcher: tuple, args: list, arch: str, identity: tuple | None = None) -> Callable[..., None]:
        self.compiled.append((launcher[0], arch))
        return lambda *call_args: self._run(launcher, call_args)

    # ------------------------------------------------ the "kernels"
    def _run(self, launcher: tuple, call_args: tuple) -> None:
        kind, param, abi = launcher
        buffers = self._open
        assert buffers is not None, f"{kind} launched outside launch_scope"
        *args, stream = call_args
        assert stream is None, f"{kind} launched on stream {stream!r}, expected None"
        tensors = list(buffers.values())
        passed = args[:len(tensors)]
        if abi == "pointer":
            assert passed == [t.data_ptr() for t in tensors], f"{kind}: pointers differ from the scope's buffers"
        else:
            assert all(a is t for a, t in zip(passed, tensors)), f"{kind}: tensors differ from the scope's buffers"
        self.launches.append((kind, tuple(buffers)))
        getattr(self, f"_{kind}")(buffers, param)

    @staticmethod
    def _fwd(b: Buffers, eps: float) -> None:
        x = b["x"].float()
        mean = x.mean(-1)
        rstd = torch.rsqrt((x - mean[:, None]).square().mean(-1) + eps)
        b["y"].copy_((x - mean[:, None]) * rstd[:, None] * b["weight"].float() + b["bias"].float())
        if "mean" in b:
            b["mean"].copy_(mean)
            b["rstd"].copy_(rstd)

    @staticmethod
    def _bwd(b: Buffers, strategy: str) -> None:
        xhat = (b["x"].float() - b["mean"][:, None]) * b["rstd"][:, None]
        dy = b["dy"].float()
        wdy = dy * b["weight"].float()
        c1, c2 = wdy.mean(-1, keepdim=True), (wdy * xhat).mean(-1, keepdim=True)
        b["dx"].copy_((wdy - c1 - xhat * c2) * b["rstd"][:, None])
        dgamma, dbeta = (dy * xhat).sum(0), dy.sum(0)
        for ws, value in ((b["wsg"], dgamma), (b["wsb"], dbeta)):
            ws.zero_()
            ws[0] = value
        b["acc_g"].add_(dgamma)
        b["acc_b"].add_(dbeta)

    @staticmethod
    def _reduce(b: Buffers, strategy: str) -> None:
        b["dweight"].copy_(b["wsg"].sum(0))
        b["dbias"].copy_(b["wsb"].sum(0))


def install(monkeypatch: Any) -> FakeEmulator:
    """Patch the runtime and the compile seams with a FakeEmulator, with a compile cache of its own (what it
    compiles never reaches the real one, which keeps its kernels: emptying it would destroy them, seconds of
    teardown, and later tests would load them again)."""
    from lnbench.emu import runtime
    from lnbench.flydsl import launch

    fake = FakeEmulator()
    for name in ("availability", "activate", "current_arch", "launch_scope"):
        monkeypatch.setattr(runtime, name, getattr(fake, name))
    monkeypatch.setattr(launch, "build_fwd_launcher", fake.build_fwd_launcher)
    monkeypatch.setattr(launch, "build_bwd_launchers", fake.build_bwd_launchers)
    monkeypatch.setattr(launch, "_do_compile", fake.do_compile)
    monkeypatch.setattr(launch, "_cache", {})
    return fake
