"""scripts/modelled_floors_table.py: the per-launch and op-level ratios of a case of several launches."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "modelled_floors_table.py"


def _script():
    spec = importlib.util.spec_from_file_location("modelled_floors_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(launch: str, memory: float, valu: float, lds: float) -> dict:
    bound = max(memory, valu, lds)
    by = {memory: "memory", valu: "issue_valu", lds: "lds"}[bound]
    return {"backend": "flydsl", "op": "bwd", "target": "MI350X", "N": 256, "launch": launch, "memory_us": memory,
            "issue_valu_us": valu, "lds_us": lds, "launch_us": float("nan"), "bound_us": bound, "bound_by": by}


def test_op_ratio_sums_each_floor_class_over_the_launches():
    """A big memory-bound main kernel and a tiny VALU-bound reduce: the worst launch's ratio is the reduce's
    (3.0), the op's is (4 + 0.3) / (10 + 0.1) for VALU, the largest other class."""
    script = _script()
    frame = pd.DataFrame([_launch("ln_bwd_det", 10.0, 4.0, 1.0), _launch("ln_bwd_reduce", 0.1, 0.3, 0.0)])
    (case,) = script.case_table(frame).itertuples()
    assert case.bound_us == 10.3 and case.bound_by == "memory" and case.launches == 2
    assert abs(case.ratio - 3.0) < 1e-12 and abs(case.op_ratio - 4.3 / 10.1) < 1e-12
    assert script.cell(case) == "10.3 memory (3.00; op 0.43)"


def test_single_launch_cell_has_no_op_ratio():
    script = _script()
    (case,) = script.case_table(pd.DataFrame([_launch("ln_fwd", 8.0, 4.0, 0.0)])).itertuples()
    assert script.cell(case) == "8 memory (0.50)"
