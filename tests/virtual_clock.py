"""A clock a test moves itself, for timing tests that must not know the machine's speed.

    clock = VirtualClock.install(monkeypatch)   lnbench's timing core (lnbench.measure.timing: warm-up, timed runs)
                                                reads this clock instead of time.perf_counter_ns
    clock.spend(us)                             a timed call "takes" `us` microseconds: the clock moves by that
    clock.plant_abi_costs(monkeypatch, call_us) the stand-in ABI pairs (lnbench.abi.torch_pairs): every entry call
                                                costs `call_us`, and the planted-slow pair's spin costs its delay

Time passes only when a test spends it, so a measurement is the planted costs, exactly, on any machine.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from lnbench.abi import torch_pairs
from lnbench.measure import timing


class VirtualClock:
    def __init__(self) -> None:
        self.ns = 0

    def perf_counter_ns(self) -> int:
        return self.ns

    def spend(self, us: float) -> None:
        self.ns += round(us * 1000)

    @classmethod
    def install(cls, monkeypatch: Any) -> "VirtualClock":
        clock = cls()
        monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter_ns=clock.perf_counter_ns))
        return clock

    def plant_abi_costs(self, monkeypatch: Any, call_us: float) -> None:
        entries = torch_pairs._entries

        def costed(op: str, side: str) -> Callable[..., Any]:
            entry = entries(op, side)

            def call(*args: Any) -> Any:
                self.spend(call_us)
                return entry(*args)
            return call

        monkeypatch.setattr(torch_pairs, "_entries", costed)
        monkeypatch.setattr(torch_pairs, "_spin", self.spend)
