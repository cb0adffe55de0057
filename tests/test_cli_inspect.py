import pandas as pd
from lnbench.results import InspectRow
from cli_helpers import invoke


def test_inspect_compiles_both_abis_and_writes_csv(tmp_path):
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--arch", "gfx950", "--dtype", "bf16", "--shapes", "1x4096",
                    "--op", "fwd,bwd", "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    # fwd: one kernel per ABI; bwd (deterministic): main + partial-reduce per ABI
    assert len(frame) == 6 and set(frame["status"]) == {"ok"}
    fwd = frame[frame["op"] == "fwd"].set_index("abi")
    assert fwd.loc["pointer", "kernarg_bytes"] == 6 * 8 + 4      # six pointers + M
    assert fwd.loc["pointer", "kernarg_bytes"] < fwd.loc["tensor", "kernarg_bytes"]
    assert fwd.loc["pointer", "launcher_slots"] < fwd.loc["tensor", "launcher_slots"]
    assert (frame["scratch_bytes"] == 0).all() and bool(fwd["loads_128bit"].all())


def test_inspect_bad_arch_is_usage_error():
    result = invoke("inspect", "--arch", "gfx1100")
    assert result.exit_code == 2 and "unknown arch" in result.output and "Traceback" not in result.output


def test_inspect_logs_one_line_per_variant_and_keeps_going_past_a_failed_one(monkeypatch):
    """A variant that fails to compile is an error row with a one-line detail; the others still compile, and a
    log (stderr not a terminal) gets one progress line per variant naming it and its outcome."""
    import io

    from rich.console import Console

    from lnbench.inspect import command as inspect_command
    from lnbench.flydsl import inspect as flydsl_inspect
    from lnbench.run.progress import CommandProgress

    def fake_compile(op, dtype, n, abi, arch, dgamma_strategy):
        if op == "bwd":
            raise RuntimeError("boom\nsecond line")
        return (op, abi)

    monkeypatch.setattr(flydsl_inspect, "compile_facts", fake_compile)
    monkeypatch.setattr(flydsl_inspect, "facts_to_rows",
                        lambda facts: [InspectRow(kernel_name=f"k_{facts[0]}_{facts[1]}", kernel_args="a b c",
                                                  vgpr_spills=0, sgpr_spills=1)])
    log = io.StringIO()
    with CommandProgress(Console(file=log, width=200), "compiling", 4) as progress:
        rows = inspect_command.inspect_rows(["gfx942"], ["pointer", "tensor"], ["fwd", "bwd"], ["f16"], [1000],
                                            "deterministic", progress)
    assert [(r.op, r.abi, r.status) for r in rows] == [
        ("fwd", "pointer", "ok"), ("fwd", "tensor", "ok"), ("bwd", "pointer", "error"), ("bwd", "tensor", "error")]
    assert rows[0].arg_count == 3 and rows[0].spills == "0/1" and rows[0].n == 1000
    assert rows[2].detail == "RuntimeError: boom"
    lines = log.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("[1/4 25%] compiling: gfx942 pointer fwd f16 N=1000 ok")
    assert lines[3].startswith("[4/4 100%] compiling: gfx942 tensor bwd f16 N=1000 error")


def test_inspect_progress_goes_to_stderr_not_the_table():
    result = invoke("inspect", "--arch", "gfx942", "--dtype", "f32", "--shapes",
                    "1x1000", "--op", "fwd", "--abi", "pointer")
    assert result.exit_code == 0, result.output
    assert "[1/1 100%] compiling: gfx942 pointer fwd f32 N=1000 ok" in result.stderr
    assert "compiling:" not in result.stdout and "1 kernels from 1 variants" in result.stdout


def test_inspect_isa_writes_the_disassembly_of_each_kernel(tmp_path):
    isa = tmp_path / "isa"
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--arch", "gfx942", "--abi", "pointer", "--dtype", "bf16",
                    "--shapes", "1x1024", "--op", "fwd,bwd", "--isa", str(isa), "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    files = sorted(isa.glob("*.s"))
    assert len(files) == len(frame) == 3 and "ISA of 3 kernels in" in result.output   # fwd; bwd main + reduce
    assert sorted(frame["isa_file"]) == [str(f) for f in files]
    for path, row in zip(files, frame.sort_values("isa_file").itertuples()):
        text = path.read_text()
        assert path.name.startswith(f"gfx942-pointer-{row.op}-bf16-N1024-")
        assert "amdhsa.kernels:" in text and ".amdgcn_target" in text and "s_endpgm" in text
        assert f".kernarg_segment_size: {row.kernarg_bytes}" in text.replace("  ", " ")


def test_inspect_isa_into_a_file_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = invoke("inspect", "--arch", "gfx942", "--shapes", "1x1024", "--isa", str(blocker))
    assert result.exit_code == 2 and "Traceback" not in result.output
