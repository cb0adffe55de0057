"""What the CLI tests share: `lnbench ARGS` run in the test's process, the check of a refused command's one error
line, the one-thread environment, and the timing options of a tiny perf / abi-compare run
(tests/commands_under_test.py holds whole tiny command lines).

    invoke(*args, env=None, **kw)            `lnbench ARGS` by click's CliRunner: its Result (stdout and stderr in
                                             `output`); env and kw as CliRunner.invoke takes them
    error_line(result, *fragments, code=2)   the one `lnbench: error:` line of a refused run (asserts; returns it)
    ONE_THREAD                               env for CliRunner.invoke / subprocess: torch on one thread
    timing(runs=3, ...)                      -R --warmup-s --min-warmup-calls --target-run-s --min-iters --max-iters
    ABI_TIMING                               timing() of the abi-compare tests: 3 warm-up calls, 5-40 calls of ~2 ms
    verify_workers(tmp)                      pids of live verify workers of runs whose TMPDIR is `tmp`
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from click.testing import CliRunner, Result

from lnbench.run.pool import WORKER_NAME

#: torch on one intra-op thread: CPU runs in tests stay small and do not fight the other test worker for cores
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def invoke(*args: str, env: Mapping[str, str | None] | None = None, **kwargs: Any) -> Result:
    """`lnbench ARGS` run in this process by click's CliRunner (the `lnbench` group, so every command's set-up
    runs as a user's would): its Result, stdout and stderr both in `output`. `env`: variables set (None: unset) for
    the run; `kwargs`: the rest of CliRunner.invoke's (input, catch_exceptions, prog_name)."""
    from lnbench.cli import main          # (imported when first used: the tests that only check lines import less)
    return CliRunner().invoke(main, list(args), env=env, **kwargs)


def error_line(result: Any, *fragments: str, code: int = 2) -> str:
    """The one line a refused command prints, checked: exit `code` (2, a usage error, unless given), exactly one
    non-blank line of output, starting `lnbench: error:` and holding every fragment, never an internal error or a
    traceback. `result` is click's Result (CliRunner.invoke: `output` holds stdout and stderr)."""
    output = result.output
    lines = [line for line in output.splitlines() if line.strip()]
    assert result.exit_code == code, output
    assert len(lines) == 1, output
    line = lines[0]
    assert line.startswith("lnbench: error:"), output
    assert "internal error" not in line and "Traceback" not in output, output
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in the error line: {line!r}"
    return line


def timing(runs: int = 3, *, warmup_s: float = 0, min_warmup_calls: int = 2, target_run_s: float = 0.0005,
           min_iters: int = 3, max_iters: int | None = 20) -> list[str]:
    """The timing options of a tiny perf or abi-compare run: by default 3 runs of about 0.5 ms, no warm-up time
    but 2 warm-up calls, 3 to 20 calls a run. A test names only what it changes; max_iters=None leaves
    --max-iters out (the command's default)."""
    args = ["-R", str(runs), "--warmup-s", str(warmup_s), "--min-warmup-calls", str(min_warmup_calls),
            "--target-run-s", str(target_run_s), "--min-iters", str(min_iters)]
    return args if max_iters is None else [*args, "--max-iters", str(max_iters)]


#: abi-compare's tiny runs: 3 warm-up calls (the Pointer path's first calls settle), 5 to 40 calls of about 2 ms
ABI_TIMING = timing(min_warmup_calls=3, target_run_s=0.002, min_iters=5, max_iters=40)


def verify_workers(tmp: Path) -> list[int]:
    """Pids of the live verify workers (fresh interpreters running lnbench.verify.parallel, or forks of the
    parent, which Linux names WORKER_NAME) of runs whose TMPDIR is `tmp`: other lnbench runs on the same machine
    are not a test's business. The parent's own process, named lnbench or python, is not one of them."""
    mark = f"TMPDIR={tmp}".encode()
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            name = Path(f"/proc/{entry}/comm").read_bytes().strip()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        worker = b"lnbench.verify.parallel" in cmd or name == WORKER_NAME
        if worker and mark in environ.split(b"\0") and state not in ("Z", "X"):
            pids.append(int(entry))
    return pids
