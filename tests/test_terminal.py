"""lnbench in a real terminal (tmux): what a user watching the screen sees. Skipped only where tmux is absent
(.ci/run installs it)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


def _in_tmux(command: list[str], cwd: Path, timeout_s: float = 240.0) -> list[str]:
    """Run `command` in a fresh tmux session (its own server, a 150x60 terminal), typed in with send-keys; the
    screen's lines once it has exited (capture-pane)."""
    tmux = ["tmux", "-L", f"lnbench-test-{uuid.uuid4().hex[:8]}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "TERM": "xterm-256color"}
    env.pop("COLUMNS", None), env.pop("LINES", None), env.pop("NO_COLOR", None)
    subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "150", "-y", "60", "-c", str(cwd), "sh"], env=env,
                   check=True, timeout=30)
    try:
        line = f"clear; {shlex.join(command)}; echo EXIT=$?"
        subprocess.run([*tmux, "send-keys", "-t", "t", line, "Enter"], check=True, timeout=30)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(1.0)
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True,
                                    timeout=30).stdout.splitlines()
            if any(re.fullmatch(r"EXIT=\d+", s.strip()) for s in screen):
                return screen
        pytest.fail("the command did not finish in the terminal:\n" + "\n".join(screen))
    finally:
        subprocess.run([*tmux, "kill-server"], timeout=30)


def test_verify_progress_bar_ends_at_n_of_n_with_the_table_below_it(tmp_path):
    """In a terminal the bar stopped at 119/120 and the table's title printed on the bar's line (the table went
    to stdout under a live bar on stderr): now the bar ends at N/N on its own line, the table starts below it."""
    screen = _in_tmux([sys.executable, "-m", "lnbench.cli", "verify", "--backend", "torch", "--device", "cpu",
                       "--shapes", "8x64,3x100,16x32", "--dtype", "f32,bf16", "--csv", str(tmp_path / "v.csv")],
                      tmp_path)
    text = "\n".join(screen)
    assert "EXIT=0" in text, text
    bars = [i for i, s in enumerate(screen) if s.startswith("verifying")]
    assert len(bars) == 1, text                                           # one bar, drawn once
    bar = screen[bars[0]]
    assert re.match(r"verifying\s+\S+\s+30/30\s+\d+:\d\d:\d\d\s*$", bar), bar   # N/N, and nothing after it
    title = screen[bars[0] + 1]
    assert "lnbench verify on" in title and "verifying" not in title, text      # the table right below the bar
    assert screen[bars[0] + 2].startswith("┏"), text
    assert any(s.startswith("CSV written to") for s in screen[bars[0]:]), text
    assert any(re.fullmatch(r"168 rows: 168 PASS", s) for s in screen[bars[0]:]), text
