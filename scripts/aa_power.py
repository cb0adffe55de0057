"""How often compare catches a real slowdown in A/A runs: every case of every consecutive pair of FOLDER's
run-*.json made FACTOR× slower in NEW alone (its peers unmoved), judged with compare's own functions with and
without peer controls; prints the cases caught (SLOWER) per shape × mode.
    python scripts/aa_power.py FOLDER [FACTOR]        (default 1.05)"""
import dataclasses, sys
from collections import Counter
from pathlib import Path
from lnbench import settings as cfg
from lnbench.compare.cases import timed_cases
from lnbench.compare.verdict import Settings, compare_all
from lnbench.results import PERF_KIND, load_result
folder, factor = Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 1.05
files = sorted(folder.glob("run-*.json"))
cases = [timed_cases(load_result(f, (PERF_KIND,))) for f in files]
base_settings = Settings.from_config(cfg.load_config())
for peers in (False, True):
    s = dataclasses.replace(base_settings, peer_controls=peers)
    caught, total = Counter(), Counter()
    for b, n in zip(cases, cases[1:]):
        for key, case in n.items():
            if not case.timed or key not in b:
                continue
            planted = dict(n)
            planted[key] = dataclasses.replace(case, headline_us=case.headline_us * factor,
                                               runs={w: [v * factor for v in r] for w, r in case.runs.items()})
            row = next(r for r in compare_all(b, planted, s) if tuple(r[f] for f in ("backend", "op", "dtype", "shape", "mode")) == key)
            group = f"{key[3]} {key[4]}"
            total[group] += 1
            caught[group] += row["verdict"] == "SLOWER"
    print(f"peer_controls={peers}: " + ", ".join(f"{g} {caught[g]}/{total[g]}" for g in sorted(total)) + f"; all {sum(caught.values())}/{sum(total.values())}")
