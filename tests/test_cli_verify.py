import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from cli_helpers import error_line, invoke

META_COLUMNS = {"lnbench_version", "torch_version", "flydsl_version", "device_name", "backend", "dtype",
                "M", "N", "seed", "timestamp"}


def test_verify_torch_bf16_writes_csv_and_exits_0(tmp_path, results_dir):
    out = tmp_path / "v.csv"
    result = invoke("verify", "--backend", "torch", "--dtype", "bf16", "--shapes", "64x256,3x257", "--csv", str(out))
    assert result.exit_code == 0, result.output
    assert "CSV written to" in result.output
    frame = pd.read_csv(out)
    assert META_COLUMNS <= set(frame.columns)
    # 2 shapes x (4 two-D kinds x 6 tensors + the 3-D autograd case x 4 tensors)
    assert len(frame) == 2 * (4 * 6 + 4)
    assert set(frame["status"]) == {"PASS"} and set(frame["dtype"]) == {"bf16"}


def test_default_csv_goes_to_results_dir_and_json(tmp_path, results_dir):
    result = invoke("verify", "--backend", "torch", "--dtype", "f32", "--shapes", "4x8", "--json",
                    str(tmp_path / "v.json"), "--quiet")
    assert result.exit_code == 0, result.output
    written = list(results_dir.glob("verify-*.csv"))
    assert len(written) == 1 and (tmp_path / "v.json").stat().st_size > 0


def test_self_test_exits_0_and_names_every_bug(results_dir):
    result = invoke("verify", "--self-test", "--shapes", "8x64,3x33")
    assert result.exit_code == 0, result.output
    for bug in ("drop-c2", "bf16-mean", "eps-decade", "naive-variance"):
        assert bug in result.output
    assert "every planted bug caught" in result.output


BAD_INPUTS = [
    (["--shapes", "4096x"], "malformed shape"),
    (["--shapes", "0x128"], "at least 1"),
    (["--shapes", "-1x5"], "malformed shape"),
    (["--shapes", "abc"], "malformed shape"),
    (["--shapes", "4096x4096x2"], "malformed shape"),
    (["--dtype", "f8"], "unknown dtype"),
    (["--backend", "nope"], "unknown backend"),
    (["--config", "/nonexistent/cfg.toml"], "config file not found"),
    (["--config", "/"], "cannot read config"),
    (["--device", "tpu"], "device"),
    (["--csv", "/proc/forbidden/x.csv"], "cannot create folder"),
]


@pytest.mark.parametrize("args,message", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2(args, message, results_dir):
    error_line(invoke("verify", "--backend", "torch", *args), message)


def test_malformed_and_unreadable_config(tmp_path, results_dir):
    bad = tmp_path / "bad.toml"
    bad.write_text("[verify]\nseed = [")
    result = invoke("verify", "--config", str(bad))
    assert result.exit_code == 2 and "malformed config" in result.output
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[verify]\ntolerance = 1\n")   # a partial file merges over the defaults, but kinds must match
    result = invoke("verify", "--config", str(wrong))
    assert result.exit_code == 2 and "[verify.tolerance]" in result.output and "Traceback" not in result.output


def test_env_lists_every_backend():
    result = invoke("env", "--device", "cpu")
    assert result.exit_code == 0, result.output
    for name in ("torch", "compile", "liger", "flydsl"):
        assert name in result.output


def test_installed_entry_point_runs(tmp_path):
    exe = shutil.which("lnbench") or os.path.join(os.path.dirname(sys.executable), "lnbench")
    assert os.path.exists(exe), "the lnbench console script is not installed"
    env = {**os.environ, "LNBENCH_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run([exe, "verify", "--backend", "torch", "--dtype", "f16", "--shapes", "3x257", "--quiet"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(tmp_path.glob("verify-*.csv"))
    bad = subprocess.run([exe, "verify", "--shapes", "4096x"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr + bad.stdout


@pytest.mark.parametrize("backend", ["flydsl", "flydsl-tensor", "flydsl-atomic"])
def test_flydsl_backends_compile_but_never_pass_without_rocm(backend, tmp_path, results_dir):
    from lnbench.machine.rocm import has_rocm_gpu

    if has_rocm_gpu():
        pytest.skip("a ROCm GPU is present: the flydsl backends execute there (tests/test_flydsl_rocm.py)")
    out = tmp_path / "f.csv"
    result = invoke("verify", "--backend", backend, "--device", "cpu", "--dtype", "bf16", "--shapes", "4x64",
                    "--csv", str(out))
    # compiled only: no verdict, so nothing that was asked for ran (the one rule: exit 1, one line why)
    assert result.exit_code == 1, result.output
    assert "nothing could run here: compiled, not executed (no ROCm GPU" in result.output
    # the reason it cannot run, not its compile facts (was: "cannot run here: gfx942: 4 kernels, max VGPR ...")
    assert f"backend {backend} cannot run here: compiled, not executed (no ROCm GPU)" in " ".join(result.output.split())
    frame = pd.read_csv(out)
    assert len(frame) == 5  # one row per case kind: nothing executed, so no per-tensor rows
    assert all(status.startswith("compiled, not executed (no ROCm GPU)") for status in frame["status"])   # no PASS
    assert "gfx942" in frame["detail"].iloc[0] and "gfx950" in frame["detail"].iloc[0]


def test_verify_auto_device_executes_flydsl_on_the_emulator_without_a_gpu(tmp_path, results_dir):
    """No GPU but the emulator available: the default verify executes the FlyDSL kernels (emulated), labelled so."""
    import torch

    from lnbench.run.device import emulator_status

    if torch.cuda.is_available() or not emulator_status()[0]:
        pytest.skip("the default device is a GPU here, or the emulator is unavailable")
    out = tmp_path / "auto.csv"
    result = invoke("verify", "--dtype", "bf16", "--shapes", "3x257", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["backend"]) == {"flydsl", "flydsl-tensor", "flydsl-atomic", "torch"}
    assert set(frame["status"]) == {"PASS"}
    assert set(frame["device"]) == {"emu:gfx942"} and "emulated" in frame["device_name"].iloc[0]


def test_nothing_ran_names_the_reason_of_a_not_run_row(tmp_path, results_dir):
    """A backend that cannot run here (liger on the CPU): the one line says why, not a bare 'not run'."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: liger runs")
    result = invoke("verify", "--backend", "liger", "--device", "cpu", "--dtype", "f32", "--shapes", "2x8",
                    "--csv", str(tmp_path / "l.csv"))
    assert result.exit_code == 1, result.output
    assert "nothing could run here: not run (needs a CUDA/ROCm GPU)" in result.output \
        or "nothing could run here: not run (liger-kernel not installed" in result.output, result.output
