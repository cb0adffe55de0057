"""`--shard K/N` and `lnbench merge`: the parts of a split, merged, are the unsharded run (verify: row for row,
bitwise; perf: the same case set, comparable with `compare`); what merge refuses, in one line with exit 2."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import ONE_THREAD, error_line, invoke, timing
from lnbench.errors import LnbenchUsageError
from lnbench.run.gpus import deal
from lnbench.merge.command import shard_note
from lnbench.results import PERF as PERF_RESULT, ResultFile, load_result
from lnbench.run.shard import Shard, parse_shard

VERIFY = ["verify", "--device", "cpu", "--backend", "torch", "--dtype", "f32,bf16", "--shapes", "8x64,3x33,1x5", "-q"]
PERF = ["perf", "--device", "cpu", "--dtype", "f32", *timing(runs=2, min_warmup_calls=1, min_iters=2, max_iters=5),
        "--llc-mib", "0.05", "-P", "2", "--backend", "torch", "--op", "fwd,bwd", "--mode", "hot",
        "--shapes", "8x64,3x100,16x32", "-q"]
VALUES = ["status", "max_abs_err", "allowed", "torch_err", "seed"]


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))


def cli(*args: str):
    return invoke(*list(args), env=ONE_THREAD)


@pytest.mark.parametrize("text", ["3/2", "0/2", "1/0", "a/b", "1", "-1/2", "2/2/2"])
def test_bad_shards_are_usage_errors(text):
    with pytest.raises(LnbenchUsageError, match="--shard"):
        parse_shard(text)


def test_shards_split_every_list_into_balanced_disjoint_parts():
    assert parse_shard(" 2 / 4 ") == Shard(2, 4) and parse_shard(None) == Shard(1, 1)
    for count in range(1, 7):
        for size in range(0, 30):
            parts = [Shard(k, count).select(list(range(size))) for k in range(1, count + 1)]
            assert sorted(x for part in parts for x in part) == list(range(size))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_a_huge_n_is_refused_at_once():
    """A part is sliced out of the list: N = 10**12 (a typo) neither builds 10**12 parts nor hangs."""
    assert Shard(1, 10**12).select(list(range(7))) == [0] and Shard(9, 10**12).select(list(range(7))) == []
    with pytest.raises(LnbenchUsageError, match="7 case"):
        Shard(9, 10**12).part(list(range(7)), "case(s)")
    assert all(Shard(k, 3).select(list(range(7))) == deal(list(range(7)), 3)[k - 1] for k in (1, 2, 3))


@pytest.mark.parametrize("command", [["perf", "--device", "cpu"], ["verify", "--device", "cpu"],
                                     ["abi-compare", "--device", "cpu"]])
def test_a_bad_shard_on_any_command_is_one_line_exit_2(command):
    error_line(cli(*command, "--shard", "3/2"), "--shard 3/2")


@pytest.mark.parametrize("command", [PERF, VERIFY], ids=["perf", "verify"])
def test_a_part_beyond_the_case_list_is_refused_before_any_file(command, tmp_path):
    """More parts than cases: a part with no case would write a result without rows, which merge refuses."""
    out = tmp_path / "part.csv"
    error_line(cli(*command, "--shard", "40/40", "--csv", str(out)), "case(s) make fewer than 40 parts")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_self_test_part_is_refused(tmp_path):
    """The self-test's verdict is over every case, and merge joins no self-test parts: --shard is refused."""
    out = tmp_path / "st.json"
    error_line(cli("verify", "--self-test", "--device", "cpu", "--shapes", "8x64", "--shard", "1/2", "--json",
                       str(out), "--no-csv"), "drop --shard")
    assert not out.exists()


def test_a_static_only_part_without_a_width_is_refused(tmp_path):
    """abi-compare --static-only splits the distinct widths: two shapes of one width make one part, not two."""
    out = tmp_path / "static.json"
    error_line(cli("abi-compare", "--static-only", "--no-execute", "--shapes", "2x64,4x64", "--shard", "2/2",
                       "--json", str(out), "--no-csv"), "1 distinct width(s) make fewer than 2 parts")
    assert not out.exists()


def _verify_frame(path: Path) -> pd.DataFrame:
    frame = pd.read_json(path, orient="table")
    return frame.set_index(["backend", "case", "dtype", "shape", "eps", "tensor"]).sort_index()


def test_verify_shards_merged_are_the_unsharded_run(tmp_path):
    whole, one, two, merged = (tmp_path / f"{n}.json" for n in ("whole", "one", "two", "merged"))
    for path, extra in ((whole, []), (one, ["--shard", "1/2"]), (two, ["--shard", "2/2"])):
        result = cli(*VERIFY, *extra, "--json", str(path), "--no-csv")
        assert result.exit_code == 0, result.output
    meta = json.loads(one.read_text())["metadata"]
    assert meta["shard"] == "1/2" and meta["shard_total_cases"] == 2 * 3 * len(set(_verify_frame(whole).reset_index()["case"]))
    result = cli("merge", str(two), str(one), "--json", str(merged), "--csv", str(tmp_path / "merged.csv"))
    assert result.exit_code == 0, result.output
    assert "all 2 parts of a --shard split" in result.output
    a, b = _verify_frame(whole), _verify_frame(merged)
    assert len(a) == len(b) and a.index.equals(b.index)
    for column in VALUES:
        assert a[column].astype(str).equals(b[column].astype(str)), column
    payload = json.loads(merged.read_text())
    assert payload["metadata"]["complete"] is True and payload["metadata"]["shard"] == ""
    assert sorted(p["shard"] for p in payload["parts"]) == ["1/2", "2/2"]
    csv = pd.read_csv(tmp_path / "merged.csv")
    assert len(csv) == len(a) and csv["complete"].all() and csv["shard"].isna().all()


def test_verify_csv_parts_of_one_case_each_merge(tmp_path):
    """A CSV's constant columns are its run metadata, but verify's `seed` column is each case's own input seed:
    parts holding one case each differ there, and merge must not take that for different base seeds."""
    parts = [tmp_path / f"{k}.csv" for k in range(1, 6)]
    for k, path in enumerate(parts, 1):
        result = cli("verify", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes", "8x64", "-q",
                     "--shard", f"{k}/5", "--csv", str(path))
        assert result.exit_code == 0, result.output
        assert pd.read_csv(path)["seed"].nunique() == 1
    merged = cli("merge", *map(str, parts), "--csv", str(tmp_path / "merged.csv"))
    assert merged.exit_code == 0, merged.output
    assert "all 5 parts of a --shard split" in merged.output
    assert cli("merge", str(parts[0]), str(parts[0]), "--no-csv").exit_code == 2     # a real clash still refused


def test_merged_abi_compare_parts_compare(tmp_path):
    """abi-compare's run values are in its JSON's worker payloads: the merged file carries every part's, so
    `compare` reads it like one run's (it said the merged file lacked them)."""
    parts = [tmp_path / f"{k}.json" for k in (1, 2)]
    for k, path in enumerate(parts, 1):
        result = cli("abi-compare", "--pair", "torch-entry", "--device", "cpu", "--runtime-only", "--in-process",
                     "--shapes", "2x64,4x32", "--dtype", "f32", "--op", "fwd", "--metric", "direct", "-P", "2",
                     "-R", "2", "--warmup-s", "0", "-q", "--shard", f"{k}/2", "--json", str(path), "--no-csv")
        assert result.exit_code == 0, result.output
    merged = tmp_path / "merged.json"
    assert cli("merge", *map(str, parts), "--json", str(merged), "--no-csv").exit_code == 0
    assert len(json.loads(merged.read_text())["workers"]) == 4
    compared = cli("compare", str(merged), str(merged), "--no-csv", "--json", str(tmp_path / "c.json"))
    assert compared.exit_code == 0, compared.output
    assert list(load_result(tmp_path / "c.json").rows["verdict"]) == ["SAME"] * 4     # 2 shapes x 2 sides


def _part(shard: str, total: int) -> ResultFile:
    return ResultFile(Path(f"{shard.replace('/', '-')}.json"), "perf",
                      PERF_RESULT.run(shard=shard, shard_total_cases=total),
                      pd.DataFrame())


def test_the_shard_note_claims_a_whole_split_only_for_one():
    """'all N parts' only for the parts of one split: not for two unsharded runs (each 1/1), nor for parts
    of two different case lists."""
    assert shard_note([_part("2/2", 6), _part("1/2", 6)]) == "all 2 parts of a --shard split"
    assert shard_note([_part("1/1", 6), _part("1/1", 4)]) == ""
    assert shard_note([_part("1/2", 6), _part("1/2", 6)]) == "part(s) 1 of 2 in more than one file"
    assert "different splits" in shard_note([_part("1/2", 6), _part("2/2", 8)])
    assert shard_note([_part("1/3", 6), _part("3/3", 6)]) == "parts 1, 3 of 3: part(s) 2 missing"


def test_a_split_with_a_part_missing_is_refused_and_marked_incomplete_when_forced(tmp_path):
    """Parts 1 and 3 of 3 are not the run: a CI gate comparing their merge would pass on fewer cases than the
    split holds (a shard job that failed). Refused without --force; with it, the result says it is incomplete,
    as an interrupted run's does."""
    parts = [tmp_path / f"{k}.json" for k in (1, 3)]
    for k, path in zip((1, 3), parts):
        assert cli(*VERIFY, "--shard", f"{k}/3", "--json", str(path), "--no-csv").exit_code == 0
    error_line(cli("merge", *map(str, parts), "--no-csv"), "not a whole split: parts 1, 3 of 3: part(s) 2 missing")
    merged = tmp_path / "merged.json"
    forced = cli("merge", *map(str, parts), "--force", "--json", str(merged), "--no-csv")
    assert forced.exit_code == 0 and "merged with --force: not a whole split" in forced.output, forced.output
    meta = json.loads(merged.read_text())["metadata"]
    assert meta["complete"] is False and "part(s) 2 missing" in meta["stopped"]
    assert load_result(merged).incomplete == meta["stopped"]      # what compare and plot refuse or warn of


@pytest.fixture(scope="module")
def perf_parts(tmp_path_factory):
    out = tmp_path_factory.mktemp("perf")
    runs = {}
    for name, extra in (("whole", []), ("one", ["--shard", "1/2"]), ("two", ["--shard", "2/2"]),
                        ("longer", ["--shard", "2/2", "-R", "3"])):
        runs[name] = out / f"{name}.json"
        result = invoke(*PERF, *extra, "--json", str(runs[name]), "--csv", str(out / f"{name}.csv"),
                        env={**ONE_THREAD, "LNBENCH_RESULTS_DIR": str(out)})
        assert result.exit_code == 0, result.output
    return runs


def _cases(path: Path) -> set[tuple]:
    frame = pd.read_json(path, orient="table").query("row_kind == 'aggregate'")
    return set(frame[["backend", "op", "dtype", "shape", "mode"]].itertuples(index=False, name=None))


def test_perf_shards_merged_have_the_unsharded_case_set_and_compare(perf_parts, tmp_path):
    merged = tmp_path / "merged.json"
    result = cli("merge", str(perf_parts["one"]), str(perf_parts["two"]), "--json", str(merged))
    assert result.exit_code == 0, result.output
    assert "merged 2 perf result(s): 6 cases" in result.output
    assert _cases(merged) == _cases(perf_parts["whole"]) and len(_cases(merged)) == 6
    assert _cases(perf_parts["one"]).isdisjoint(_cases(perf_parts["two"]))
    compared = cli("compare", str(perf_parts["whole"]), str(merged), "--no-csv", "--json", str(tmp_path / "c.json"))
    assert compared.exit_code == 0, compared.output
    verdicts = load_result(tmp_path / "c.json").rows["verdict"]
    assert len(verdicts) == 6 and set(verdicts) <= {"SAME", "SLOWER", "FASTER"}      # each case compared


def test_csv_parts_merged_to_json_hold_lists(perf_parts, tmp_path):
    """A CSV's list cells (`run_us`: `25.0;30.04;26.56`) become JSON lists in a merged JSON, as the parts' own JSON
    have them (they were strings)."""
    merged = {}
    for name, suffix in (("csv", ".csv"), ("json", ".json")):
        merged[name] = tmp_path / f"from-{name}.json"
        parts = [str(perf_parts[n].with_suffix(suffix)) for n in ("one", "two")]
        assert cli("merge", *parts, "--json", str(merged[name]), "--no-csv").exit_code == 0
    rows = {name: json.loads(path.read_text())["data"] for name, path in merged.items()}
    assert all(isinstance(r["run_us"], list) for r in rows["csv"] if r["status"] == "ok")
    for from_csv, from_json in zip(rows["csv"], rows["json"], strict=True):   # pandas reads JSON floats to ~1 ulp
        assert from_csv["run_us"] == (pytest.approx(from_json["run_us"]) if from_json["run_us"] else None)


def test_merged_speedups_pair_cases_of_different_parts(perf_parts, tmp_path):
    """A part's speed-up needs the baseline's case of the same shape, which the split may have put in another
    part (perf --backend torch,compile --shard: blank there); the merge computes them over every part."""
    other = json.loads(perf_parts["one"].read_text())
    other["metadata"]["shard"] = "2/2"
    for row in other["data"]:
        row.update(backend="other", speedup=None)
        if row["row_kind"] == "aggregate":
            row["median_us"] *= 2
    edited = tmp_path / "other.json"
    edited.write_text(json.dumps(other))
    merged = tmp_path / "merged.json"
    assert cli("merge", str(perf_parts["one"]), str(edited), "--json", str(merged), "--no-csv").exit_code == 0
    speedups = [r["speedup"] for r in json.loads(merged.read_text())["data"]
                if r["row_kind"] == "aggregate" and r["backend"] == "other"]
    assert len(speedups) == 3 and speedups == pytest.approx([0.5] * 3)


def test_merge_refusals_are_one_line_exit_2(perf_parts, tmp_path):
    one, two = str(perf_parts["one"]), str(perf_parts["two"])
    verify_csv = tmp_path / "v.csv"
    assert cli(*VERIFY, "--shapes", "8x64", "--csv", str(verify_csv)).exit_code == 0
    error_line(cli("merge", str(verify_csv), two), "an lnbench verify result and")
    error_line(cli("merge", one, one), "is in both")
    error_line(cli("merge", one, str(perf_parts["longer"])), "runs 2 vs 3")
    error_line(cli("merge", one, str(Path(two).with_suffix(".csv"))), "a CSV and a JSON")
    error_line(cli("merge", one, two, "--json", two), "")
    for change, fragment in (({"complete": False, "stopped": "interrupted (SIGINT) after 1 of 3 cases"},
                              "incomplete (interrupted"), ({"lnbench_version": "9.9.9"}, "lnbench_version")):
        payload = json.loads(Path(two).read_text())
        payload["metadata"].update(change)
        edited = tmp_path / "edited.json"
        edited.write_text(json.dumps(payload))
        error_line(cli("merge", one, str(edited)), fragment)
    forced = cli("merge", one, one, "--force", "--json", str(tmp_path / "forced.json"))
    assert forced.exit_code == 0 and "merged with --force" in forced.output
