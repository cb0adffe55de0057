"""verify's `diagnosis` column: each planted bug is named by the rule that fits it, a correct backend gets none."""
from __future__ import annotations

import importlib.metadata
import json

import pandas as pd
import pytest
import torch

from lnbench import backends
from lnbench.backends.torch_native import TorchBackend
from lnbench.run.device import resolve_kernel_device
from lnbench.results import SELFTEST, VERIFY
from lnbench.backends.tolerance import Tolerance
from lnbench.verify.cases import build_cases
from lnbench.verify.diagnosis import UNEXPLAINED, abi_twins, by_rule, diagnose, rule_of
from lnbench.verify.planted import BUGS, PlantedBackend
from cli_helpers import invoke
from verify_rows import verify_rows

CPU = resolve_kernel_device("cpu")
CASES = build_cases([(8, 64)], ["f32", "bf16"], [1e-5, 1e-2], seed=7)


@pytest.fixture(scope="module")
def rows():
    """Every planted bug's rows on 8x64 f32/bf16, diagnosed together (as one verify run of several backends)."""
    tol = Tolerance.packaged()
    out = [row for bug in BUGS for row in verify_rows(PlantedBackend(bug), CASES, CPU, tol)]
    return diagnose(out)


def failing(rows, bug):
    return [r for r in rows if r.backend == f"planted:{bug}" and r.status == "FAIL"]


def rules(row):
    return rule_of(row.diagnosis)


def test_correct_math_gets_no_diagnosis(rows):
    control = [r for r in rows if r.backend == "planted:none"]
    assert control and all(r.status == "PASS" and r.diagnosis == "" for r in control)


def test_one_pass_variance(rows):
    bad = failing(rows, "naive-variance")
    offset = [r for r in bad if r.case == "offset" and r.tensor == "rstd"]
    assert {r.dtype for r in offset} == {"f32", "bf16"}
    assert all(rules(r) == ["one-pass variance"] and "|mean|/σ ≈ 1000" in r.diagnosis for r in offset)
    constant = [r for r in bad if r.case == "constant" and r.tensor == "rstd"]
    assert constant and all(rules(r) == ["constant rows"] for r in constant)
    backward = [r for r in bad if r.tensor in ("dx", "dweight")]
    assert backward and all(rules(r) == ["backward follows stats"] for r in backward)
    assert {r.diagnosis.rsplit("(", 1)[1] for r in backward} == {"one-pass variance)", "constant rows)"}


def test_eps_not_honoured(rows):
    bad = failing(rows, "eps-decade")
    assert any(r.case == "eps2" for r in bad)
    assert all("eps not honoured" in r.diagnosis for r in bad)       # directly, or as the stats' diagnosis
    assert all(rules(r) == ["eps not honoured"] for r in bad if r.tensor in ("rstd", "y"))


@pytest.mark.parametrize("bug, said", [("bf16-mean", "mean is bfloat16, not float32"), ("f16-stats", "f16 rounding")])
def test_stats_in_the_wrong_dtype(rows, bug, said):
    bad = failing(rows, bug)
    stats = [r for r in bad if r.tensor in ("mean", "rstd")]
    assert stats and all(rules(r) == ["stats dtype"] and said in r.diagnosis for r in stats)
    assert all(rules(r) == ["backward follows stats"] and "(stats dtype)" in r.diagnosis
               for r in bad if r not in stats)


def test_backward_using_wrong_stats(rows):
    bad = failing(rows, "bwd-own-stats")
    assert bad and {r.tensor for r in bad} <= {"dx", "dweight", "dbias"}
    assert all(rules(r) == ["backward's own stats"] for r in bad)


def test_nothing_fits_leaves_it_empty(rows):
    bad = failing(rows, "drop-c2")                   # dx wrong on every kind: no pattern of these rules
    assert bad and all(r.diagnosis == "" for r in bad)
    assert [g["rule"] for g in by_rule(bad)] == [UNEXPLAINED]


class Crashing(TorchBackend):
    name = "t-tensor"

    def forward(self, x, weight, bias, eps, store_stats=True):
        raise RuntimeError("launch failed")


def test_abi_difference_for_fail_and_error_rows():
    tol = Tolerance.packaged()
    cases = [c for c in CASES if c.dtype == "f32"]
    pointer, tensor = PlantedBackend("none"), PlantedBackend("drop-c2")
    pointer.name, tensor.name = "k", "k-tensor"
    got = [*verify_rows(pointer, cases, CPU, tol), *verify_rows(tensor, cases, CPU, tol),
           *verify_rows(TorchBackend(), cases, CPU, tol), *verify_rows(Crashing(), cases, CPU, tol)]
    diagnose(got, {"k": "k-tensor", "k-tensor": "k", "torch": "t-tensor", "t-tensor": "torch"})
    bad = [r for r in got if r.status in ("FAIL", "error")]
    assert {r.backend for r in bad} == {"k-tensor", "t-tensor"}
    assert all(r.diagnosis == "ABI difference: k passes this check" for r in bad if r.backend == "k-tensor")
    assert all(r.diagnosis == "ABI difference: torch runs this case" for r in bad if r.backend == "t-tensor")
    assert diagnose(got)[0].diagnosis == "" and all(r.diagnosis == "" for r in got if r.backend == "k-tensor")


class WideOnly(TorchBackend):
    name = "wide-only"

    def forward(self, x, weight, bias, eps, store_stats=True):
        self.check(x)
        return super().forward(x, weight, bias, eps, store_stats)

    def layernorm(self, x, weight, bias, eps):
        self.check(x)
        return super().layernorm(x, weight, bias, eps)

    @staticmethod
    def check(x):
        if x.shape[-1] == 33 or x.dtype == torch.float16:
            raise RuntimeError("kernel crashed")


def test_errors_confined_to_a_width_or_a_dtype():
    tol = Tolerance.packaged()
    got = diagnose(verify_rows(WideOnly(), build_cases([(8, 64), (3, 33)], ["f32"], [1e-5], 1), CPU, tol))
    errors = [r for r in got if r.status == "error"]
    assert errors and {r.diagnosis for r in errors} == {"only at N: errors only at N = 33 (N = 64 ran)"}
    got = diagnose(verify_rows(WideOnly(), build_cases([(8, 64)], ["f32", "f16"], [1e-5], 1), CPU, tol))
    assert {r.diagnosis for r in got if r.status == "error"} == {
        "only in dtype: errors only at dtype = f16 (dtype = f32 ran)"}
    assert {r.diagnosis for r in got if r.status != "error"} == {""}


def test_abi_twins_pairs_the_same_kernel_in_two_abis():
    assert abi_twins(["flydsl", "flydsl-tensor", "flydsl-atomic", "torch", "nope"]) == {
        "flydsl": "flydsl-tensor", "flydsl-tensor": "flydsl"}
    assert abi_twins(["flydsl", "flydsl-atomic"]) == {}


class OnePass(PlantedBackend):
    """A backend with a one-pass variance, for the CLI."""

    def __init__(self) -> None:
        super().__init__("naive-variance")
        self.name = "onepass"


def test_verify_shows_and_writes_the_diagnosis(tmp_path, results_dir, monkeypatch):
    entry = importlib.metadata.EntryPoint("onepass", f"{__name__}:OnePass", backends.ENTRY_POINT_GROUP)
    monkeypatch.setattr(backends, "_entry_points", lambda: {"onepass": entry})
    out = tmp_path / "v"
    result = invoke("verify", "--backend", "onepass", "--device", "cpu", "--dtype", "f32",
                    "--shapes", "8x64", "--csv", f"{out}.csv", "--json", f"{out}.json",
                    "--md", f"{out}.md", env={"COLUMNS": "250"})
    assert result.exit_code == 1, result.output
    assert "Why:" in result.output and "E[x²]−E[x]² cancels" in result.output
    frame = pd.read_csv(f"{out}.csv", keep_default_na=False)
    assert set(frame["schema"]) == {VERIFY.schema} == {"verify/1.1"}
    diagnosed = frame[frame["status"] == "FAIL"]
    assert set(diagnosed["diagnosis"].map(lambda d: rule_of(d)[0])) == {
        "one-pass variance", "constant rows", "backward follows stats"}
    assert set(frame[frame["status"] == "PASS"]["diagnosis"]) == {""}
    data = json.loads((tmp_path / "v.json").read_text())["data"]
    assert any(r["diagnosis"].startswith("one-pass variance:") for r in data)
    md = (tmp_path / "v.md").read_text()
    assert "| diagnosis |" in md and "one-pass variance" in md and "constant rows" in md


def test_self_test_names_each_bugs_diagnosis(tmp_path, results_dir):
    result = invoke("verify", "--self-test", "--device", "cpu", "--dtype", "f32", "--shapes",
                    "8x64", "--csv", str(tmp_path / "s.csv"), "-q")
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "s.csv", keep_default_na=False)
    assert set(frame["schema"]) == {SELFTEST.schema} == {"selftest/1.1"}
    by_bug = frame[frame["status"] == "FAIL"].groupby("planted_bug")["diagnosis"].apply(
        lambda d: {rule for text in d for rule in rule_of(text)})
    assert "backward's own stats" in by_bug["bwd-own-stats"] and "stats dtype" in by_bug["f16-stats"]
    assert "one-pass variance" in by_bug["naive-variance"] and "eps not honoured" in by_bug["eps-decade"]
