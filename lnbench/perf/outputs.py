"""The outputs stage of `lnbench perf` (plan → workers → aggregate → outputs): the run record finished with what
the run measured around its cases (driver, clocks, load, peak, wall time), the tables, and the complete files
(ResultSink.finish: CSV/JSON, the Markdown summary to --md)."""
from __future__ import annotations

from typing import Any

from lnbench.measure import load
from lnbench.scaffold.sink import ResultSink
from lnbench.perf.messages import payload_of
from lnbench.perf.plan import PerfPlan
from lnbench.perf.spread import Group
from lnbench.perf.tables import PHASES, print_rows, summary_line
from lnbench.results import PerfRow
from lnbench.run.clocks import gpu_facts
from lnbench.run.device import Device


def device_facts(groups: list[Group], dev: Device) -> dict[str, dict[str, Any]]:
    """Driver and clocks of every device the run uses (lnbench.run.clocks), by the name its rows give it."""
    import torch

    return ({g.gpu: gpu_facts(torch.device(g.slot.process_device) if g.slot else dev.torch_device) for g in groups}
            or {str(dev.torch_device): gpu_facts(dev.torch_device)})


def write_outputs(plan: PerfPlan, sink: ResultSink, rows: list[PerfRow], peak_gbps: float | None,
                  before: dict[str, dict[str, Any]], seconds: float, load_facts: load.LoadFacts, quiet: bool) -> None:
    """Print the run's tables and notes and write its complete files."""
    groups, protocol, peak = plan.groups, plan.protocol, plan.peak
    after = device_facts(groups, plan.dev)
    first = next(iter(before))
    results = [r for g in groups for r in g.results]
    metadata = plan.run.with_(driver=before[first]["driver"], clocks_before=before[first]["clocks"],
                              clocks_after=after[first]["clocks"], peak_gbps=peak_gbps,
                              peak_timestamp=peak.get("timestamp") if peak else None, wall_s=round(seconds, 2),
                              kernel_timer=("on" if plan.kernel_pass else "off" if not protocol.kernel_timer
                                            else f"n/a ({plan.no_kernel_time})"),
                              **load_facts.cells())
    title = (f"lnbench perf on {metadata.device_label} — median of {protocol.processes} worker medians "
             f"(R={protocol.runs}, I∈[{protocol.min_iters},{protocol.max_iters}], fewer where a run would pass "
             f"{protocol.max_run_s:g} s); GB/s from {plan.headline} time; "
             f"gap = median − kernel")
    print_rows(rows, groups, results, title, plan.baseline, plan.backends, quiet)
    workers_json = [{"gpu": g.gpu, "index": r.index, "ok": r.ok, "exit_code": r.exit_code,
                     "timed_out": r.timed_out, "duration_s": round(r.duration_s, 3), "problem": r.problem(),
                     "stderr_tail": r.stderr_tail, "order": [c.id for c in g.orders[r.index]],
                     **{k: round(payload_of(r).phase_s(k), 3) for k in PHASES}}
                    for g in groups for r in g.results]
    sink.finish(rows, metadata, {"protocol": protocol.to_dict(), "peak": peak, "workers": workers_json,
                                 "clocks": {"before": before[first], "after": after[first]},
                                 "gpus": [{"gpu": gpu, "before": before[gpu], "after": after.get(gpu)}
                                          for gpu in before]},
                md_path=plan.outputs[2], summary=summary_line(rows, results, seconds, groups))
