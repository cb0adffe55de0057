"""One verdict vocabulary and one `--fail-if-slower` rule for `compare` and `abi-compare` (lnbench.results.verdicts)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_helpers import ABI_TIMING, ONE_THREAD as ENV, timing
from lnbench.results import verdicts
from lnbench.abi.command import abi_compare_command
from lnbench.compare.command import compare_command
from lnbench.compare.planted import plant_slowdown
from lnbench.perf.command import perf_command
from lnbench.results.verdicts import Verdict

ABI_FAST = ["--pair", "planted-slow", "--runtime-only", "--device", "cpu", "--in-process", "-P", "2",
            "--shapes", "4x32,4x64", "--op", "fwd", "--metric", "direct", "--planted-delay-us", "300",
            *ABI_TIMING, "-q"]


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("perf")
    result = CliRunner().invoke(perf_command, [
        "--device", "cpu", "--dtype", "bf16", "--backend", "torch", "--shapes", "8x64", "--op", "fwd",
        "--mode", "hot", "-P", "2", *timing(runs=5, warmup_s=0.01, target_run_s=0.002, max_iters=None), "-q",
        "--json", str(out / "p.json")],
        env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return out / "p.json"


@pytest.fixture
def rule_calls(monkeypatch) -> list[tuple]:
    """Every call of the shared gate rule, with the answer it gave."""
    calls: list[tuple] = []
    real = verdicts.fails_gate

    def spy(verdict, slowdown_pct, pct):
        calls.append((str(verdict), slowdown_pct, pct, real(verdict, slowdown_pct, pct)))
        return calls[-1][-1]
    monkeypatch.setattr(verdicts, "fails_gate", spy)
    return calls


def _compare(tmp_path: Path, perf_json: Path, factor: float, pct: float):
    planted, _ = plant_slowdown(json.loads(perf_json.read_text()), factor)
    new = tmp_path / f"new-{factor}.json"
    new.write_text(json.dumps(planted))
    return CliRunner().invoke(compare_command, [str(perf_json), str(new), "--fail-if-slower", f"{pct:g}",
                                                "--json", str(tmp_path / "c.json")])


def _abi(tmp_path: Path, pct: float):
    return CliRunner().invoke(abi_compare_command, [*ABI_FAST, "--fail-if-slower", f"{pct:g}",
                                                    "--json", str(tmp_path / "a.json")], env=ENV)


def test_the_gate_rule():
    assert verdicts.fails_gate(Verdict.SLOWER, 10.0, 9.0) and not verdicts.fails_gate(Verdict.SLOWER, 10.0, 11.0)
    assert verdicts.fails_gate("slower", 10.0, 9.0)                        # an abi-compare 1.0 row's word
    for word in (Verdict.SAME, Verdict.FASTER, Verdict.TOO_FEW, Verdict.NOT_COMPARED):
        assert not verdicts.fails_gate(word, 50.0, 0.0)


def test_a_modelled_floor_beside_a_measurement_is_judged_in_the_shared_words():
    assert verdicts.floor_verdict(2.0, 1.0) is Verdict.FLOOR_ABOVE == "FLOOR ABOVE MEASURED"
    assert verdicts.floor_verdict(1.0, 1.0) is verdicts.floor_verdict(0.5, 1.0) is Verdict.FLOOR_BELOW
    assert Verdict.FLOOR_BELOW == "floor ≤ measured" and verdicts.parse("floor ≤ measured") is Verdict.FLOOR_BELOW
    assert not Verdict.FLOOR_ABOVE.judged and not Verdict.FLOOR_ABOVE.changed and Verdict.FLOOR_ABOVE.style


def test_words_parse_legacy_lowercase_and_render():
    assert [verdicts.parse(w) for w in ("slower", "faster", "same")] == [Verdict.SLOWER, Verdict.FASTER, Verdict.SAME]
    assert verdicts.parse("too few runs") is Verdict.TOO_FEW and verdicts.parse("ok") == "ok"
    assert Verdict.SLOWER.markdown == "🔴 SLOWER" and Verdict.SLOWER.style == "bold red"
    assert all(v.meaning for v in Verdict)


def test_a_planted_slowdown_across_the_threshold_flips_both_commands_through_the_one_rule(
        tmp_path, perf_json, rule_calls, monkeypatch):
    # compare: every run of the case 1.10× slower, so each worker's ratio is 1.10 and the change exactly +10 %
    assert _compare(tmp_path, perf_json, 1.10, 9).exit_code == 1
    assert _compare(tmp_path, perf_json, 1.10, 11).exit_code == 0
    assert [c[1:] for c in rule_calls if c[0] == Verdict.SLOWER] == [(pytest.approx(10.0), 9.0, True),
                                                                     (pytest.approx(10.0), 11.0, False)]
    # abi-compare: 300 µs planted on the Pointer side; its rows are SLOWER, in the shared word
    rule_calls.clear()
    slow = _abi(tmp_path, 5)
    assert slow.exit_code == 1, slow.output
    rows = [r for r in json.loads((tmp_path / "a.json").read_text())["data"] if r.get("status") == "ok"]
    assert rows and {r["verdict"] for r in rows} == {"SLOWER"}
    assert sorted(c[1] for c in rule_calls) == pytest.approx(sorted(r["slowdown_pct"] for r in rows))
    assert all(c[0] == "SLOWER" and c[2] == 5 and c[3] for c in rule_calls)
    assert max(r["slowdown_pct"] for r in rows) < 999_999
    assert _abi(tmp_path, 999_999).exit_code == 0                          # a threshold above every slowdown
    # and the rule is the only judge: with a rule that never fails, neither command fails
    monkeypatch.setattr(verdicts, "fails_gate", lambda *args: False)
    assert _compare(tmp_path, perf_json, 1.10, 9).exit_code == 0
    assert _abi(tmp_path, 5).exit_code == 0


def test_an_abi_compare_file_with_the_old_lowercase_words_still_loads_compares_and_plots(tmp_path):
    new = tmp_path / "new.json"
    result = CliRunner().invoke(abi_compare_command, [*ABI_FAST, "--json", str(new)], env=ENV)
    assert result.exit_code == 0, result.output
    payload = json.loads(new.read_text())
    payload["metadata"]["schema"] = "abi-compare/1.0"
    for row in payload["data"]:
        if row.get("verdict"):
            row["verdict"] = row["verdict"].lower()
    assert {r["verdict"] for r in payload["data"] if r.get("verdict")} == {"slower"}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(payload))
    compared = CliRunner().invoke(compare_command, [str(old), str(new), "--json", str(tmp_path / "c.json")])
    assert compared.exit_code == 0, compared.output
    assert len(json.loads((tmp_path / "c.json").read_text())["data"]) == 4     # 2 rows × (tensor, pointer)
    pytest.importorskip("matplotlib")
    from lnbench.plot.ratios import abi_figures
    from lnbench.results import load_result
    ((_, fig),) = abi_figures(load_result(old))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["SLOWER"]
