"""Capture (or check) the emulator's differential fixture: tests/data/emu_differential.json.

    python scripts/emu_differential.py                         # rewrite the fixture (lnbench's kernels; FlyDSL's
                                                               # family sample when $LNBENCH_KERNEL_SRC names a checkout)
    python scripts/emu_differential.py --check                 # compare the current emulator with the fixture
    python scripts/emu_differential.py --check --full          # ... and FlyDSL's whole small-N family (not stored:
                                                               # --full --write FILE keeps it in FILE, compare later)

The digests are tests/emu_differential.py's: output hashes, every launch's profile, the ledger, faults. Regenerate
only when a change of results is intended, and say so in the commit.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import emu_differential as diff  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the fixture (or --write FILE) instead")
    ap.add_argument("--full", action="store_true", help="FlyDSL's whole small-N family, all dtypes")
    ap.add_argument("--write", default="", help="the JSON file to write or check (default: the fixture)")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    a = ap.parse_args(argv)
    path = Path(a.write) if a.write else diff.FIXTURE
    src = diff.kernel_src()
    cases = diff.lnbench_cases() + (diff.family_cases(a.full) if src else [])
    cases = [c for c in cases if a.only in c]
    if not src:
        print("no FlyDSL checkout in $LNBENCH_KERNEL_SRC: lnbench's kernels only")
    stored = json.loads(path.read_text()) if a.check else {"cases": {}}
    found: dict[str, object] = {}
    bad = 0
    for case in cases:
        t0 = time.perf_counter()
        found[case] = diff.run_case(case, src)
        verdict = ""
        if a.check:
            want = stored["cases"].get(case)
            verdict = "not in fixture" if want is None else ("same" if want == found[case] else "DIFFERS")
            bad += verdict == "DIFFERS"
        print(f"{case:60s} {time.perf_counter() - t0:6.1f}s {verdict}", flush=True)
    if a.check:
        print(f"{len(cases)} cases, {bad} differ")
        return 1 if bad else 0
    path.write_text(json.dumps({"about": "tests/emu_differential.py digests; scripts/emu_differential.py writes them",
                                "flydsl_checkout": bool(src), "cases": found}, indent=0, sort_keys=True) + "\n")
    print(f"{len(found)} cases written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
