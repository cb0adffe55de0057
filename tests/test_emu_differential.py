"""The emulator gives today's results bit for bit: every case of tests/data/emu_differential.json (written by
scripts/emu_differential.py before the emulator was made faster) is run again on the current emulator, all sanitizer
checks on, and must match: output hashes, each launch's profile (wave-instructions by class and opcode, steps, bytes
per buffer, LDS bytes and bank cycles, benign LDS writes), the fidelity ledger and the first fault's message.

lnbench's kernels always run (fwd, fwd-nostats, bwd deterministic and atomic, both ABIs): in the suite, each arch ×
dtype once, the shapes of tests/emu_differential.py LNBENCH_SHAPES taken in turn so each shape runs; every arch ×
dtype × shape with LNBENCH_FULL_MATRIX=1 (before an emulator change lands). FlyDSL's norm family sample (its LDS
races included) runs when $LNBENCH_KERNEL_SRC names a FlyDSL checkout."""
from __future__ import annotations

import json
import os

import pytest

import emu_differential as diff
from lnbench.emu import runtime

pytestmark = pytest.mark.skipif(not runtime.availability()[0],
                                reason=f"needs the emulated device: {runtime.availability()[1]}")

STORED = json.loads(diff.FIXTURE.read_text())["cases"]
FULL_MATRIX = os.environ.get("LNBENCH_FULL_MATRIX") == "1"


def suite_cases() -> list[str]:
    """Every case with LNBENCH_FULL_MATRIX=1, else one shape per arch × dtype, each shape in turn."""
    cases = diff.lnbench_cases()
    per_combo = len(diff.LNBENCH_SHAPES)
    if FULL_MATRIX:
        return cases
    return [cases[combo * per_combo + combo % per_combo] for combo in range(len(cases) // per_combo)]


def _first_difference(want: object, got: object, path: str = "") -> str:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                return _first_difference(want.get(key), got.get(key), f"{path}/{key}")
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return f"{path}: fixture {want!r}, now {got!r}"


def test_the_suite_runs_every_arch_dtype_and_shape():
    chosen = suite_cases()
    assert {c.split("/")[1] for c in chosen} == set(diff.ARCHES) and {c.split("/")[2] for c in chosen} == set(diff.DTYPES)
    assert {c.split("/")[3] for c in chosen} == {f"{m}x{n}" for m, n in diff.LNBENCH_SHAPES}


@pytest.mark.parametrize("case", suite_cases())
def test_lnbench_kernels_match_the_fixture(case):
    got = diff.run_case(case)
    assert got == STORED[case], _first_difference(STORED[case], got)


FAMILY = [c for c in STORED if c.startswith("flydsl/")]


@pytest.mark.skipif(not diff.kernel_src(), reason="FlyDSL's family needs a checkout in $LNBENCH_KERNEL_SRC")
@pytest.mark.parametrize("case", FAMILY)
def test_flydsl_norm_family_matches_the_fixture(case):
    got = diff.run_case(case, diff.kernel_src())
    assert got == STORED[case], _first_difference(STORED[case], got)


def test_the_fixture_covers_both_families_and_the_races():
    assert len([c for c in STORED if c.startswith("lnbench/")]) == len(diff.lnbench_cases())
    races = [c for c in FAMILY if "LDS race" in STORED[c]["fault"]]
    assert FAMILY and races and len(races) < len(FAMILY)
