"""Kernel sources as backends: the builder contract (lnbench.flydsl.contract) driven through verify, inspect and
abi-compare, with project-written test sources (tests/kernel_sources/lnbench_test_sources: Pointer ABI with a
backward, Tensor ABI without one, and planted faults), and FlyDSL's own LayerNorm when $LNBENCH_KERNEL_SRC
points at a FlyDSL checkout."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from lnbench import backends
from lnbench.results import load_result
from cli_helpers import invoke
from conftest import kernel_device_names

pytestmark = pytest.mark.rocm

SOURCES = Path(__file__).parent / "kernel_sources"
POINTER = "module:lnbench_test_sources.pointer_ln"
TENSOR = "module:lnbench_test_sources.tensor_ln"
FLYDSL_CHECKOUT = os.environ.get("LNBENCH_KERNEL_SRC", "")


@pytest.fixture(autouse=True)
def clean_sources(monkeypatch, results_dir):
    """Each test sets --kernel-src / config sources itself; nothing leaks into the next test."""
    monkeypatch.delenv(backends.KERNEL_SRC_ENV, raising=False)
    monkeypatch.delenv(backends.SOURCES_ENV, raising=False)
    monkeypatch.setattr(backends, "_sources", {})


def verify(tmp_path: Path, backend: str, *extra: str, src: Path | str = SOURCES, shapes: str = "3x100",
           workers: bool = False):
    """verify of a source on the kernel device, its cases in this process (--jobs 1; the rows are the same as with
    workers) unless `workers`: then as a user's run has them, in verify's worker processes on the emulator."""
    out = tmp_path / "v.csv"
    result = invoke("verify", "--backend", backend, "--kernel-src", str(src), "--device", kernel_device_names()[0],
                    "--dtype", "f32", "--shapes", shapes, "--csv", str(out), "--json", str(tmp_path / "v.json"),
                    *(() if workers else ("--jobs", "1")), *extra)
    frame = load_result(out).rows if out.exists() else None     # the declared types: a commit stays text
    return result, frame


def test_pointer_source_with_backward_passes_and_every_row_names_its_source(tmp_path):
    """Through verify's worker processes where it has them (each imports the source itself); the other verify runs
    here keep their cases in this process."""
    result, frame = verify(tmp_path, POINTER, workers=True)
    assert result.exit_code == 0, result.output
    assert set(frame["status"]) == {"PASS"}
    assert {"y", "mean", "rstd", "dx", "dweight", "dbias"} <= set(frame["tensor"])
    assert set(frame["source_module"]) == {"lnbench_test_sources.pointer_ln"}
    assert frame["source_file"].str.endswith("pointer_ln.py").all()
    assert frame["source_commit"].str.len().min() >= 7         # the lnbench checkout holding the test sources
    # each case names the code objects that executed it (the emulator's ledger: forward and backward)
    assert all(len(str(codes).split()) == 2 for codes in frame["emu_code"])
    meta = json.loads((tmp_path / "v.json").read_text())["metadata"]
    assert meta["kernel_sources"][POINTER]["source_module"] == "lnbench_test_sources.pointer_ln"


def test_pointer_source_in_half_precision_runs_on_the_emulator(tmp_path):
    """Pointer loads/stores of 16-bit elements (global_load_ushort, global_store_short[_d16_hi]) execute: every
    case was an `error` row (no handler in the emulator) for any f16/bf16 source written this way."""
    out = tmp_path / "h.csv"
    result = invoke("verify", "--backend", POINTER, "--kernel-src", str(SOURCES), "--device", kernel_device_names()[0],
                    "--dtype", "f16,bf16", "--shapes", "3x100", "--jobs", "1", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["status"]) == {"PASS"} and set(frame["dtype"]) == {"f16", "bf16"}
    assert "global_load_ushort" in " ".join(frame["emu_opcodes"].astype(str))


def test_tensor_abi_source_without_backward_gives_not_run_rows_naming_the_missing_builder(tmp_path):
    result, frame = verify(tmp_path, TENSOR)
    assert result.exit_code == 0, result.output
    forward = frame[frame["tensor"].isin(["y", "mean", "rstd"])]
    backward = frame[frame["tensor"].isin(["dx", "dweight", "dbias"])]
    assert len(forward) and set(forward["status"]) == {"PASS"}
    assert len(backward) and set(backward["status"]) == {"not run"}
    assert set(backward["detail"]) == {"lnbench_test_sources.tensor_ln has no build_layernorm_bwd_module()"}


@pytest.mark.parametrize("module, words", [
    ("wrong_signature", "returned a launcher taking (Input, Gamma, Output, m, stream): the contract wants 6 buffers"),
    ("import_error", "cannot import lnbench_test_sources.import_error"),
    ("out_of_bounds", "past its end"),
    # a builder calling sys.exit() is the source's error, not lnbench's exit (it stopped the run, losing every
    # later case, with the builder's exit status)
    ("builder_exits", "failed: SystemExit: N=100 is not supported"),
])
def test_faulty_sources_are_error_rows_with_one_line(tmp_path, module, words):
    result, frame = verify(tmp_path, f"module:lnbench_test_sources.{module}")
    assert result.exit_code == 1, result.output
    assert set(frame["status"]) == {"error"}
    assert all(words in detail and "\n" not in detail for detail in frame["detail"])
    assert "Traceback" not in result.output


def test_config_table_names_a_team_variant(tmp_path):
    config = tmp_path / "team.toml"
    config.write_text(f'[backends.team-ln]\nmodule = "lnbench_test_sources.tensor_ln"\npath = "{SOURCES}"\n'
                      f'description = "our Tensor-ABI variant"\n')
    out = tmp_path / "v.csv"
    result = invoke("verify", "--backend", "team-ln", "--config", str(config), "--device", kernel_device_names()[0],
                    "--dtype", "f32", "--shapes", "2x64", "--jobs", "1", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["backend"]) == {"team-ln"}
    assert "PASS" in set(frame["status"])


def test_config_table_with_an_unknown_key_is_a_usage_error(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[backends.team-ln]\nmodule = "x"\nbuilder = "y"\n')
    result = invoke("verify", "--backend", "torch", "--config", str(config), "--shapes", "2x8")
    assert result.exit_code == 2
    assert "unknown key 'builder'" in result.output


def test_entry_point_plugin_module_is_a_backend(monkeypatch):
    import importlib.metadata
    import sys

    monkeypatch.syspath_prepend(str(SOURCES))
    entry = importlib.metadata.EntryPoint("team-plugin", "lnbench_test_sources.pointer_ln", backends.ENTRY_POINT_GROUP)
    monkeypatch.setattr(backends, "_entry_points", lambda: {"team-plugin": entry})
    assert "team-plugin" in backends.backend_names()
    backend = backends.get_backend("team-plugin")
    assert backend.name == "team-plugin" and "bwd" in backend.ops
    assert "lnbench_test_sources.pointer_ln" in sys.modules


def install_plugin(tmp_path: Path, monkeypatch, name: str, target: str) -> None:
    """Install a plugin the way pip would leave it: a dist-info folder with entry_points.txt on the import path
    (this process's sys.path and $PYTHONPATH, so worker processes find it too), next to the test sources."""
    site = tmp_path / "site"
    info = site / "lnbench_team_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lnbench-team-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{backends.ENTRY_POINT_GROUP}]\n{name} = {target}\n")
    for folder in (SOURCES, site):
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(SOURCES), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(backends, "_plugins", {})


def test_entry_point_plugin_is_inspected_beside_lnbench_kernels(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "team-plugin", "lnbench_test_sources.pointer_ln")
    assert backends.source_spec("team-plugin").module == "lnbench_test_sources.pointer_ln"
    assert backends.runs_flydsl("team-plugin")
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--backend", "team-plugin,flydsl", "--abi", "pointer", "--arch", "gfx942", "--op",
                    "fwd", "--dtype", "f32", "--shapes", "2x128", "--execute", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    executed = frame[frame["part"] == "executed"]
    assert set(executed["backend"]) == {"team-plugin", "flydsl"} and set(executed["status"]) == {"ok"}
    mine = executed[executed["backend"] == "team-plugin"].iloc[0]
    assert mine["kernel_name"].startswith("test_ln_fwd") and mine["exec_instructions"] > 0


@pytest.mark.parametrize("other", ["flydsl-src", "module", "config"])
def test_abi_compare_pairs_an_entry_point_plugin_with_every_source_kind(tmp_path, monkeypatch, other):
    """--pair with a plugin on one side and each other kind of kernel source on the other: flydsl-src (pointed at a
    project-written folder laid out like a FlyDSL checkout), module:PKG.MOD and a [backends.NAME] table."""
    install_plugin(tmp_path, monkeypatch, "team-plugin", "lnbench_test_sources.pointer_ln")
    extra: list[str] = ["--kernel-src", str(SOURCES)]
    if other == "flydsl-src":
        checkout = tmp_path / "checkout"
        (checkout / "kernels" / "norm").mkdir(parents=True)
        for part in ("kernels", "kernels/norm"):
            (checkout / part / "__init__.py").write_text("")
        (checkout / "kernels" / "norm" / "layernorm_kernel.py").write_text(
            "from lnbench_test_sources.tensor_ln import *  # noqa: F401,F403\n"
            "from lnbench_test_sources.tensor_ln import build_layernorm_module  # noqa: F401\n")
        name, extra = "flydsl-src", ["--kernel-src", str(checkout)]
    elif other == "module":
        name = TENSOR
    else:
        config = tmp_path / "team.toml"
        config.write_text(f'[backends.team-ln]\nmodule = "lnbench_test_sources.tensor_ln"\npath = "{SOURCES}"\n')
        name, extra = "team-ln", ["--config", str(config)]
    out = tmp_path / "a.csv"
    result = invoke("abi-compare", "--pair", f"{name},team-plugin", *extra, "--static-only", "--arch", "gfx942",
                    "--op", "fwd", "--dtype", "f32", "--shapes", "2x128", "--csv", str(out))
    assert result.exit_code == 0, result.output
    fwd = pd.read_csv(out).iloc[0]
    assert fwd["status"] == "ok" and fwd["exec_status"] == "ok", fwd.to_dict()
    assert fwd["kernarg_tensor"] > fwd["kernarg_pointer"]        # A: the Tensor-ABI source; B: the plugin
    assert fwd["pointer_source"].startswith("lnbench_test_sources.pointer_ln@")


def test_flydsl_src_without_a_checkout_is_a_usage_error():
    result = invoke("verify", "--backend", "flydsl-src", "--shapes", "2x8")
    assert result.exit_code == 2
    assert "needs --kernel-src" in result.output


def test_inspect_execute_shows_a_source_beside_lnbench_kernels(tmp_path):
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--backend", f"{POINTER},flydsl", "--kernel-src", str(SOURCES), "--abi", "pointer",
                    "--arch", "gfx942", "--op", "fwd", "--dtype", "f32", "--shapes", "2x128", "--execute",
                    "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    executed = frame[frame["part"] == "executed"]
    assert set(executed["backend"]) == {POINTER, "flydsl"} and set(executed["status"]) == {"ok"}
    mine = executed[executed["backend"] == POINTER].iloc[0]
    assert mine["kernel_name"].startswith("test_ln_fwd") and mine["exec_instructions"] > 0
    assert len(str(mine["code_object"])) == 16


def test_inspect_of_a_builder_calling_sys_exit_is_an_error_row(tmp_path):
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--backend", f"module:lnbench_test_sources.builder_exits,flydsl", "--kernel-src",
                    str(SOURCES), "--abi", "pointer", "--arch", "gfx942", "--op", "fwd", "--dtype", "f32", "--shapes",
                    "1x64", "--csv", str(out))
    assert result.exit_code == 1, result.output                  # was the builder's status (1 here), no rows
    frame = pd.read_csv(out)
    assert set(frame[frame["backend"] == "flydsl"]["status"]) == {"ok"}
    mine = frame[frame["backend"] != "flydsl"]
    assert len(mine) == 1 and "failed: SystemExit: N=64 is not supported" in mine.iloc[0]["detail"]


def test_inspect_isa_of_two_sources_with_alike_kernel_names_keeps_both(tmp_path):
    """Both sources name their forward kernel test_ln_fwd_0: the second's ISA overwrote the first's, and both rows
    named the one file left."""
    isa, out = tmp_path / "isa", tmp_path / "i.csv"
    oob = "module:lnbench_test_sources.out_of_bounds"
    result = invoke("inspect", "--backend", f"{POINTER},{oob}", "--kernel-src", str(SOURCES), "--arch", "gfx942",
                    "--op", "fwd", "--dtype", "f32", "--shapes", "1x64", "--isa", str(isa), "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out).set_index("backend")
    assert frame.loc[POINTER, "kernel_name"] == frame.loc[oob, "kernel_name"]
    files = {name: Path(frame.loc[name, "isa_file"]) for name in (POINTER, oob)}
    assert len(set(files.values())) == 2 and sorted(isa.glob("*.s")) == sorted(files.values())
    assert files[POINTER].name.startswith("module_lnbench_test_sources.pointer_ln-gfx942-pointer-fwd-f32-N64-")
    assert files[POINTER].read_text() != files[oob].read_text()      # the planted extra store is in one only


def test_abi_compare_pair_of_sources_static_part(tmp_path):
    out = tmp_path / "a.csv"
    result = invoke("abi-compare", "--pair", f"{TENSOR},{POINTER}", "--kernel-src", str(SOURCES), "--static-only",
                    "--arch", "gfx942", "--op", "fwd,bwd", "--dtype", "f32", "--shapes", "2x128", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    fwd = frame[frame["op"] == "fwd"].iloc[0]
    assert fwd["status"] == "ok" and fwd["exec_status"] == "ok"
    # the Tensor-ABI launch passes layouts: more kernarg bytes than the bare pointers of the Pointer ABI
    assert fwd["kernarg_tensor"] > fwd["kernarg_pointer"]
    assert set(frame["tensor_source"]) == {"lnbench_test_sources.tensor_ln@" + fwd["tensor_source"].split("@")[1]}
    assert fwd["pointer_source"].startswith("lnbench_test_sources.pointer_ln@")
    bwd = frame[frame["op"] == "bwd"].iloc[0]
    assert bwd["status"] == "not run" and "has no build_layernorm_bwd_module()" in bwd["detail"]


@pytest.mark.skipif(not (Path(FLYDSL_CHECKOUT) / "kernels" / "norm" / "layernorm_kernel.py").is_file(),
                    reason="LNBENCH_KERNEL_SRC does not point at a FlyDSL checkout (kernels/norm/layernorm_kernel.py)")
def test_flydsl_own_layernorm_fails_exactly_on_offset_rows(tmp_path):
    """FlyDSL's forward computes the variance as E[x²]−mean²: rows of 1000 + randn must FAIL, randn rows PASS."""
    result, frame = verify(tmp_path, "flydsl-src", src=FLYDSL_CHECKOUT, shapes="3x1024")
    assert result.exit_code == 1, result.output
    assert not frame["status"].isin(["error", "not run"]).any(), frame[["case", "tensor", "status", "detail"]]
    offset = frame[frame["case"] == "offset"]
    assert set(offset[offset["tensor"].isin(["y", "rstd"])]["status"]) == {"FAIL"}
    assert set(frame[frame["case"] == "randn"]["status"]) == {"PASS"}
    assert frame["source_commit"].notna().all()


def test_lnbench_forward_through_the_contract_runs_the_same_code_objects_as_flydsl(tmp_path):
    """One launch path: lnbench's builder module (lnbench.flydsl.builders) driven as a kernel source executes the
    very code objects `--backend flydsl` executes."""
    import torch
    from lnbench.run.device import resolve_device

    resolve_device(kernel_device_names()[0])
    from lnbench.emu import runtime
    from lnbench.flydsl import launch

    gen = torch.Generator().manual_seed(5)
    x, w, b = (torch.randn(*s, generator=gen) for s in ((3, 96), (96,), (96,)))
    source = backends.get_backend("module:lnbench.flydsl.builders")
    with runtime.launch_scope({}) as launches:
        y_src, mean_src, _ = source.forward(x, w, b, 1e-5)
        y_own, mean_own, _ = launch.forward(x, w, b, 1e-5)
    codes = [p.code_object_sha256 for p in launches]
    assert len(codes) == 2 and codes[0] == codes[1] and len(codes[0]) == 64
    assert torch.equal(y_src, y_own) and torch.equal(mean_src, mean_own)
    assert source.missing_backward == "lnbench.flydsl.builders has no build_layernorm_bwd_module()"


def test_without_a_rocm_gpu_a_source_is_compiled_not_executed(tmp_path):
    out = tmp_path / "v.csv"
    result = invoke("verify", "--backend", POINTER, "--kernel-src", str(SOURCES), "--device", "cpu", "--dtype", "f32",
                    "--shapes", "2x64", "--csv", str(out))
    frame = pd.read_csv(out)
    assert set(frame["status"]) == {"compiled, not executed (no ROCm GPU)"}, result.output
    assert frame["detail"].str.contains("gfx942: 3 kernels").all() and frame["detail"].str.contains("gfx950").all()
    # as for lnbench's own kernels without a GPU: compiled, never a PASS, and nothing asked for ran (exit 1)
    assert result.exit_code == 1 and "nothing could run here: compiled, not executed" in result.output
    assert "PASS" not in set(frame["status"])


def test_two_sources_with_one_module_name_each_get_their_own_module(tmp_path):
    """Two checkouts of one project (FlyDSL main and a branch) name the same module; each source must import its
    own copy, not the one Python imported first, and name its own file."""
    import sys

    from lnbench.flydsl.contract import SourceSpec, load_module, provenance

    specs = []
    for tag in ("main", "branch"):
        folder = tmp_path / tag
        (folder / "twinpkg" / "norm").mkdir(parents=True)
        for part in ("twinpkg", "twinpkg/norm"):
            (folder / part / "__init__.py").write_text("")
        (folder / "twinpkg" / "norm" / "kernel.py").write_text(f"MARK = {tag!r}\n")
        specs.append(SourceSpec(f"twin-{tag}", "twinpkg.norm.kernel", str(folder)))
    try:
        first, second = (load_module(spec) for spec in specs)
        assert (first.MARK, second.MARK) == ("main", "branch")
        assert [provenance(s)["source_file"] for s in specs] == [
            str((tmp_path / tag / "twinpkg" / "norm" / "kernel.py").resolve()) for tag in ("main", "branch")]
        assert load_module(specs[0]) is first                    # each keeps its own, whichever came last
    finally:
        for key in [k for k in sys.modules if k == "twinpkg" or k.startswith("twinpkg.")]:
            del sys.modules[key]


@pytest.mark.parametrize("backend,words", [
    ("flydsl-src", "is not a FlyDSL checkout (it has no kernels/norm/layernorm_kernel.py)"),
    ("module:lnbench_nowhere.ln", "is not where lnbench_nowhere.ln is (no such module there, nor installed)")])
def test_a_kernel_src_that_is_not_a_kernel_source_is_one_usage_line_before_any_work(tmp_path, backend, words):
    """--kernel-src at a folder without the module gave one `error` row per case, each with the same
    ModuleNotFoundError, after the whole run: now one line, exit 2, and nothing written."""
    import subprocess
    import sys

    folder = tmp_path / "not-a-source"
    folder.mkdir()
    (folder / "README.md").write_text("a folder, but no kernels in it\n")
    out = tmp_path / "v.csv"
    env = {k: v for k, v in os.environ.items() if k not in (backends.KERNEL_SRC_ENV, backends.SOURCES_ENV)}
    done = subprocess.run([sys.executable, "-m", "lnbench.cli", "verify", "--backend", backend, "--kernel-src",
                           str(folder), "--device", kernel_device_names()[0], "--shapes", "3x100,8x64", "--csv",
                           str(out), "-q"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [f"lnbench: error: kernel source {backend}: {folder} {words}"], done.stderr
    assert not out.exists() and not done.stdout.strip()


def test_a_source_tree_without_git_is_named_by_a_content_hash(tmp_path):
    """A `git archive` export has no .git: source_commit was empty, so two different trees looked the same."""
    import shutil

    from lnbench.machine.checkout import content_hash

    tree = tmp_path / "export"
    shutil.copytree(SOURCES, tree, ignore=shutil.ignore_patterns("__pycache__"))
    result, frame = verify(tmp_path, POINTER, src=tree, shapes="3x100")
    assert result.exit_code == 0, result.output
    commits = set(frame["source_commit"])
    assert commits == {content_hash(tree)} and next(iter(commits)).startswith("content:"), commits
    assert len(next(iter(commits))) == len("content:") + 12
    module = tree / "lnbench_test_sources" / "pointer_ln.py"
    before = content_hash(tree)
    module.write_text(module.read_text() + "\n# one more line\n")
    edited = content_hash(tree)
    assert edited != before                                   # another tree, another name
    (tree / "lnbench_test_sources" / "__pycache__").mkdir(exist_ok=True)
    (tree / "lnbench_test_sources" / "__pycache__" / "x.py").write_text("junk")
    assert content_hash(tree) == edited                       # byte-code caches are not the source
