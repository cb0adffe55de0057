"""Device names and what each device answers; the emulated device through every command (fake emulator)."""
from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest
import torch

from cli_helpers import error_line, invoke
from lnbench.abi import static
from lnbench.machine.install import install_hint
from lnbench.run.device import device_of, emu_device, parse_device, resolve_device
from lnbench.env.facts import backend_facts, emulator_fact
from lnbench.emu import runtime
from lnbench.errors import LnbenchUsageError


# ---------------------------------------------------------------- parsing

@pytest.mark.parametrize("name,arch", [("emu", "gfx942"), ("emu:gfx942", "gfx942"), ("emu:gfx950", "gfx950")])
def test_emu_names_parse_to_an_emulated_device_on_the_cpu(name, arch):
    dev = parse_device(name)
    assert (dev.name, dev.kind, dev.arch, dev.torch_device) == (f"emu:{arch}", "emu", arch, torch.device("cpu"))
    assert dev.emulated and dev.executes_flydsl and not dev.times_are_real and not dev.is_gpu
    assert dev.label == f"emu:{arch} (emulated)"
    assert dev.stream() is None and dev.index == -1


def test_cpu_device_answers():
    dev = resolve_device("cpu")
    assert (dev.name, dev.kind, dev.torch_device) == ("cpu", "cpu", torch.device("cpu"))
    assert not dev.executes_flydsl and dev.times_are_real and dev.stream() is None
    assert dev.label.startswith("cpu (")
    with dev.guard():
        dev.synchronize()


@pytest.mark.parametrize("name,message", [
    ("emu:gfx1100", "unsupported emulated arch 'gfx1100'; the emulator runs gfx942, gfx950"),
    ("emu:", "unsupported emulated arch"),
    ("tpu", "unknown device 'tpu'; use cpu, cuda, cuda:N or emu"),
    ("mps", "unsupported device 'mps'"),
    ("cuda:x", "unknown device"),
])
def test_bad_device_names_are_usage_errors(name, message):
    with pytest.raises(LnbenchUsageError, match=message):
        parse_device(name)


def test_unavailable_emulator_names_what_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tinygrad" else
                        real_find_spec(name, *a))
    monkeypatch.setattr(runtime, "activate", lambda arch: pytest.fail("activated an unavailable emulator"))
    with pytest.raises(LnbenchUsageError, match=r"'emu:gfx942' is unavailable: .*tinygrad.*pip install 'ziglang>=0.13' 'tinygrad==0.14.0'"):
        resolve_device("emu")
    line = error_line(invoke("verify", "--device", "emu:gfx950"))
    assert "emu:gfx950" in line and install_hint("emu") in line and "lnbench[" not in line


def test_emulator_that_cannot_import_names_what_to_install(monkeypatch):
    import lnbench.emu
    monkeypatch.delattr(lnbench.emu, "runtime")
    monkeypatch.setitem(sys.modules, "lnbench.emu.runtime", None)       # import fails as without tinygrad
    line = error_line(invoke("verify", "--device", "emu"))
    assert "is unavailable: ModuleNotFoundError" in line and line.endswith("pip install 'ziglang>=0.13' 'tinygrad==0.14.0' 'msgpack>=1.0'")


def test_emulator_that_fails_to_activate_is_one_line(monkeypatch):
    from lnbench.emu import EmulatorUnavailable

    def broken(arch):
        raise EmulatorUnavailable("cannot build the HIP stand-in: zig cc exited 1\nlong compiler log")
    monkeypatch.setattr(runtime, "activate", broken)
    line = error_line(invoke("verify", "--device", "emu"))
    assert line.endswith("is unavailable: cannot build the HIP stand-in: zig cc exited 1")


def test_resolving_an_emu_device_activates_its_arch(fake_emulator):
    assert resolve_device("emu:gfx950").arch == "gfx950"
    assert fake_emulator.activations == ["gfx950"]


def test_cpu_tensors_belong_to_the_active_emulated_device(fake_emulator):
    x = torch.zeros(2)
    assert device_of(x).kind == "cpu"
    fake_emulator.activate("gfx950")
    assert device_of(x) == emu_device("gfx950")


# ---------------------------------------------------------------- commands

def test_peak_refuses_the_emulated_device(monkeypatch):
    """peak measures a copy: nothing to model. (perf --device emu models floors: tests/test_perf_modelled.py.)"""
    monkeypatch.setattr(runtime, "activate", lambda arch: pytest.fail("peak activated the emulator"))
    line = error_line(invoke("peak", "--device", "emu:gfx950"))
    assert "emulated device" in line and "times mean nothing" in line


def test_perf_refuses_the_null_device_saying_it_executes_nothing():
    line = error_line(invoke("perf", "--device", "null"))
    assert "executes nothing" in line and "abi-compare --device null" in line


def test_env_says_whether_the_emulator_is_available(monkeypatch):
    monkeypatch.setattr(runtime, "availability", lambda: (False, "tinygrad is not installed"))
    result = invoke("env", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "unavailable (tinygrad is not installed)" in result.output


def test_env_on_the_emulated_device(fake_emulator):
    result = invoke("env", "--device", "emu:gfx950")
    assert result.exit_code == 0, result.output
    assert "available: emu:gfx942" in result.output and emulator_fact() == runtime.describe()
    assert "emu:gfx950 (emulated)" in result.output              # devices table
    assert "backends on emu:gfx950" in result.output
    facts = {row["backend"]: row["status"] for row in backend_facts(parse_device("emu:gfx950"))}
    assert facts["flydsl"] == facts["flydsl-tensor"] == facts["flydsl-atomic"] == "runnable"


def test_env_lists_flydsl_src_unavailable_when_its_checkout_is_not_a_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("LNBENCH_KERNEL_SRC", str(tmp_path / "no-such-checkout"))   # verify: exit 2, not a folder
    facts = {row["backend"]: row for row in backend_facts(parse_device("cpu"))}
    assert facts["flydsl-src"]["status"] == "unavailable", facts["flydsl-src"]   # was: compile-only / runnable
    assert facts["flydsl-src"]["reason"].endswith("no-such-checkout: not a folder")
    monkeypatch.setenv("LNBENCH_KERNEL_SRC", str(tmp_path))                   # a folder, but no FlyDSL checkout
    empty = {row["backend"]: row for row in backend_facts(parse_device("cpu"))}["flydsl-src"]
    assert empty["status"] == "unavailable" and "not a FlyDSL checkout" in empty["reason"], empty
    module = tmp_path / "kernels" / "norm" / "layernorm_kernel.py"                # the module a checkout holds
    module.parent.mkdir(parents=True)
    module.write_text("")
    assert {row["backend"]: row for row in backend_facts(parse_device("cpu"))}["flydsl-src"]["status"] != "unavailable"


def test_env_with_unavailable_emulator_prints_facts_then_one_error(monkeypatch):
    monkeypatch.setattr(runtime, "availability", lambda: (False, "a real HIP runtime is loaded"))
    result = invoke("env", "--device", "emu")
    assert result.exit_code == 2 and "software" in result.output
    assert result.output.strip().splitlines()[-1].startswith("lnbench: error:")


def test_verify_auto_on_the_emulator_labels_rows_and_isolates_a_fault(fake_emulator, tmp_path, results_dir):
    fake_emulator.fault_if = lambda buffers: buffers["dweight" if "dweight" in buffers else "x"].shape[-1] == 33
    out = tmp_path / "emu.csv"
    result = invoke("verify", "--device", "emu:gfx950", "--dtype", "f32", "--shapes", "8x64,3x33",
                    "--jobs", "1", "--csv", str(out))    # the fake emulator lives in this process, not in workers
    assert result.exit_code == 1, result.output                 # the faulting cases are errors
    assert "Emulated device emu:gfx950" in result.output
    frame = pd.read_csv(out)
    assert set(frame["backend"]) == {"flydsl", "flydsl-tensor", "flydsl-atomic", "torch"}
    assert set(frame["device"]) == {"emu:gfx950"} and set(frame["device_arch"]) == {"gfx950"}
    assert set(frame["device_name"]) == {"emu:gfx950 (emulated)"}
    flydsl = frame[frame["backend"] != "torch"]
    wide, narrow = flydsl[flydsl["N"] == 64], flydsl[flydsl["N"] == 33]
    assert set(wide["status"]) == {"PASS"}
    assert set(narrow["status"]) == {"error"}
    assert narrow["detail"].str.contains("EmulatorFault: planted fault").all()
    assert set(frame[frame["backend"] == "torch"]["status"]) == {"PASS"}
    assert {arch for _, arch in fake_emulator.compiled} == {"gfx950"}


def test_abi_compare_static_only_on_the_emulator_is_static_for_its_arch(monkeypatch, tmp_path, results_dir):
    """--static-only on emu:ARCH compiles for ARCH. (Its runtime part: host cost on null:ARCH beside the modelled
    device floor, tests/test_abi_modelled.py.)"""
    monkeypatch.setattr(runtime, "activate", lambda arch: pytest.fail("abi-compare activated the emulator"))
    # keep the static part instant: patched wherever it is named, after the command's modules are imported (a
    # module first imported while the patch is in place would keep the stand-in for every later test)
    from lnbench.abi import plan, workers
    for module in (static, workers, plan):
        monkeypatch.setattr(module, "flydsl_installed", lambda: False)
    out = tmp_path / "abi.csv"
    result = invoke("abi-compare", "--device", "emu:gfx950", "--shapes", "32x1024,64x512",
                    "--op", "fwd", "--static-only", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["part"]) == {"static"} and set(frame["arch"]) == {"gfx950"}
