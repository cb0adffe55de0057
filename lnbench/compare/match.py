"""Whether two results may be compared: same command, device, dtypes and protocol, and a case in common."""
from __future__ import annotations

from typing import Any

from lnbench.compare.cases import CaseKey, TimedCase, headline
from lnbench.results import PERF_KIND as PERF, ResultFile
from lnbench.errors import LnbenchUsageError
from lnbench.perf.protocol import PerfProtocol



def same_command(base: ResultFile, new: ResultFile) -> None:
    """Results of two different commands cannot be compared, --force or not."""
    if base.kind != new.kind:
        raise LnbenchUsageError(f"BASE {base.path} is from lnbench {base.kind} and NEW {new.path} from lnbench "
                                f"{new.kind}: compare needs two results of the same command")


def protocol(result: ResultFile) -> dict[str, Any]:
    """The timing-protocol settings of a result, by name: a perf JSON's `protocol` entry, else the run
    record's (results.runs: PerfRun, AbiRun)."""
    if result.kind == PERF:
        table = result.extra.get("protocol")
        if isinstance(table, dict):
            return {k: table.get(k) for k in PerfProtocol.MEASUREMENT if k in table}
    return result.run.protocol.as_dict()       # as the run record names it (perf CSV, abi-compare)


def device_name(result: ResultFile) -> str:
    """The device a result names (its model where recorded)."""
    return result.run.device_label


def _dtypes(cases: dict[CaseKey, TimedCase]) -> list[str]:
    return sorted({key[2] for key, case in cases.items() if case.timed})


def mismatches(base: ResultFile, new: ResultFile, base_cases: dict[CaseKey, TimedCase],
               new_cases: dict[CaseKey, TimedCase]) -> list[str]:
    """What differs between the two runs in device, dtypes or protocol (empty: comparable)."""
    out = []
    if device_name(base) != device_name(new):
        out.append(f"device differs ({device_name(base)!r} vs {device_name(new)!r})")
    if _dtypes(base_cases) != _dtypes(new_cases):
        out.append(f"dtypes differ ({','.join(_dtypes(base_cases)) or 'no timed case'} vs "
                   f"{','.join(_dtypes(new_cases)) or 'no timed case'})")
    if base.kind == PERF and headline(base) != headline(new):
        out.append(f"headline differs ({headline(base)} vs {headline(new)} time: perf --timer)")
    threads = [r.run.torch_threads or None for r in (base, new)]
    if None not in threads and threads[0] != threads[1] and str(base.run.device).startswith("cpu"):
        out.append(f"torch threads differ ({threads[0]} vs {threads[1]}: CPU timings depend on them)")
    a, b = protocol(base), protocol(new)
    # a setting only one file records (a perf CSV carries fewer than its JSON) is unknown, not different
    diffs = [f"{k} {a[k]} vs {b[k]}" for k in a if k in b and a[k] != b[k]]
    if diffs:
        out.append(f"protocol differs ({', '.join(diffs)})")
    return out


def require_overlap(base_cases: dict[CaseKey, TimedCase], new_cases: dict[CaseKey, TimedCase],
                    base: ResultFile, new: ResultFile) -> None:
    """Cases pair up by (backend, op, dtype, shape, mode); no case timed in both files is a usage error."""
    if not any(case.timed and key in new_cases and new_cases[key].timed for key, case in base_cases.items()):
        counts = (f"{sum(c.timed for c in base_cases.values())} timed cases in BASE, "
                  f"{sum(c.timed for c in new_cases.values())} in NEW")
        raise LnbenchUsageError(f"no overlap: no case (backend, op, dtype, shape, mode) is timed in both "
                                f"{base.path} and {new.path} ({counts})")
