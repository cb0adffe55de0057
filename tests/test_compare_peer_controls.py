"""compare's peer controls: a session shift that moved every backend's case of one shape and mode between two
invocations (the H200's run 26 of docs/measurements.md: every short kernel 5% slower) widens the interval of each
of those cases, while a slowdown of one backend alone, its peers unmoved, is still SLOWER."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lnbench import settings as cfg
from lnbench.compare.cases import TimedCase
from lnbench.compare.verdict import Settings, compare_all, peer_shifts
from lnbench.results.verdicts import Verdict

BACKENDS = ("torch", "liger", "flydsl")
OPS = ("fwd", "bwd")


def _invocation(rng: np.random.Generator, shift: dict[str, float], shape: str = "64x256") -> dict:
    """One perf invocation of every backend × op at `shape`, cold: 3 workers of 5 runs each, 0.2% worker and run
    noise; `shift` multiplies one backend's times (a change) or, under the key '*', all of them (a session)."""
    cases = {}
    for backend in BACKENDS:
        for op in OPS:
            key = (backend, op, "bf16", shape, "cold")
            scale = shift.get("*", 1.0) * shift.get(backend, 1.0)
            runs = {w: [float(10.0 * scale * np.exp(rng.normal(0, 0.002) + e)) for e in rng.normal(0, 0.002, 5)]
                    for w in range(3)}
            headline = float(np.median([np.median(r) for r in runs.values()]))
            cases[key] = TimedCase(key, "ok", headline, runs)
    return cases


def _verdicts(base: dict, new: dict, settings: Settings) -> dict[tuple, str]:
    return {tuple(r.value(f) for f in ("backend", "op", "dtype", "shape", "mode")): r.verdict
            for r in compare_all(base, new, settings)}


@pytest.fixture
def settings() -> Settings:
    return Settings.from_config(cfg.load_config())


def test_the_packaged_config_turns_peer_controls_on(settings):
    assert settings.peer_controls is True


def test_a_session_shift_of_every_backend_is_not_a_change(settings):
    rng = np.random.default_rng(7)
    base, new = _invocation(rng, {}), _invocation(rng, {"*": 1.05})
    without = _verdicts(base, new, dataclasses.replace(settings, peer_controls=False))
    with_peers = _verdicts(base, new, settings)
    assert set(without.values()) == {Verdict.SLOWER}          # the 1% floor alone calls the session a slowdown
    assert set(with_peers.values()) == {Verdict.SAME}
    shifts = peer_shifts(base, new)
    assert all(3.0 < s < 7.0 for s in shifts.values()), shifts  # the peers' shift, about 5%
    rows = compare_all(base, new, settings)
    assert all("session shift" in r.detail and r.peer_shift_pct > 3 for r in rows)


def test_one_backend_slower_with_its_peers_unmoved_is_still_slower(settings):
    rng = np.random.default_rng(8)
    base, new = _invocation(rng, {}), _invocation(rng, {"flydsl": 1.05})
    verdicts = _verdicts(base, new, settings)
    assert {v for k, v in verdicts.items() if k[0] == "flydsl"} == {Verdict.SLOWER}
    assert {v for k, v in verdicts.items() if k[0] != "flydsl"} == {Verdict.SAME}


def test_a_run_of_one_backend_has_no_peers_and_keeps_the_config_floor(settings):
    rng = np.random.default_rng(9)
    base, new = _invocation(rng, {}), _invocation(rng, {"*": 1.05})
    only = {k: v for k, v in base.items() if k[0] == "torch"}, {k: v for k, v in new.items() if k[0] == "torch"}
    assert peer_shifts(*only) == {}
    rows = compare_all(*only, settings)
    assert all(math.isnan(r.peer_shift_pct) and r.verdict == Verdict.SLOWER for r in rows)


def test_peers_are_the_same_shape_and_mode_only(settings):
    rng = np.random.default_rng(10)
    base = {**_invocation(rng, {}), **_invocation(rng, {}, shape="4096x4096")}
    shifted = _invocation(rng, {"*": 1.05})                      # only the 64x256 cases moved
    new = {**shifted, **_invocation(rng, {}, shape="4096x4096")}
    shifts = peer_shifts(base, new)
    assert all(s < 1.0 for k, s in shifts.items() if k[3] == "4096x4096")
    assert all(s > 3.0 for k, s in shifts.items() if k[3] == "64x256")
