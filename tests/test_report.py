"""lnbench report: a static HTML dashboard, offline (no script, no external URL), checked in a real headless
Chromium (Debian's package): the page loads without console errors and a screenshot shows the charts."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lnbench.cli import main
from test_history import PROFILES, _profile_store, _store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-extensions",
         "--no-first-run", "--disable-sync", "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0"]


def _report(tmp_path: Path) -> Path:
    url = _store(tmp_path, loaded={3})
    out = CliRunner().invoke(main, ["report", "--store", url, "--out", str(tmp_path / "site")])
    assert out.exit_code == 0, out.output
    return tmp_path / "site" / "index.html"


def test_the_report_is_one_offline_page_with_charts_change_points_and_failures_first(tmp_path: Path) -> None:
    html = _report(tmp_path).read_text()
    assert "<script" not in html and not re.search(r"(src|href)=\"(https?:)?//", html)
    assert html.count("<svg") == 2 and html.count('class="change"') == 1 and 'class="loaded"' in html
    assert "c024..c025" in html
    statuses = re.findall(r'<td class="(PASS|FAIL|error)">', html)          # verify's machine's table
    assert statuses[0] == "FAIL" and set(statuses[1:]) == {"PASS"}


def _chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)


def _console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_the_report_loads_in_chromium_without_console_errors_and_shows_its_charts(tmp_path: Path) -> None:
    page = _report(tmp_path)
    dom = _chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 2 and _console_errors(dom.stderr) == []
    # the check sees console errors: a page that throws is caught
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('planted'); undefined_fn();</script></body></html>")
    assert _console_errors(_chromium("--dump-dom", bad.as_uri()).stderr)
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars", page.as_uri())
    import matplotlib.image

    pixels = (matplotlib.image.imread(shot)[..., :3] * 255).round()
    blue = ((abs(pixels[..., 0] - 31) < 8) & (abs(pixels[..., 1] - 119) < 8) & (abs(pixels[..., 2] - 180) < 8)).sum()
    red = ((abs(pixels[..., 0] - 214) < 20) & (abs(pixels[..., 1] - 39) < 25) & (abs(pixels[..., 2] - 40) < 25)).sum()
    assert blue > 200 and red > 20, (blue, red)      # the trend lines and the change point's line are drawn


def test_modelled_floors_are_charted_in_a_section_of_their_own(tmp_path: Path) -> None:
    """perf --device emu's floors (the profile kind) are not measured trends: their machine's page has a section
    titled as modelled floors with a chart per launch x target x mode, the steps marked (exact); the measured
    machine has none; a compare of two profiles lists each launch x target, labelled modelled; the page loads in
    Chromium without console errors."""
    url = _profile_store(tmp_path, "llllhhl", _store(tmp_path))
    compared = CliRunner().invoke(main, ["compare", str(PROFILES / "light.json"), str(PROFILES / "heavy.json"),
                                         "--no-csv", "--store", url])
    assert compared.exit_code == 0, compared.output
    out = CliRunner().invoke(main, ["report", "--store", url, "--out", str(tmp_path / "site")])
    assert out.exit_code == 0, out.output
    html = (tmp_path / "site" / "index.html").read_text()
    sections = {re.search(r"<h2>(.*?)</h2>", part).group(1): part for part in html.split("<section")[1:]}
    emulated = next(part for name, part in sections.items() if name.startswith("emu:gfx942"))
    measured = [part for name, part in sections.items() if not name.startswith("emu:")]
    trends, modelled = emulated.split("Modelled floors (perf --device emu): lower bounds, not measurements")
    assert trends.split('-trends">Trends</h3>')[1].count("<svg") == 0
    assert modelled.count("<svg") == 8 and modelled.count('class="change"') == 8
    assert modelled.count("c003..c004 +10.5% (exact)") == 4 and "modelled us" in modelled
    assert all("Modelled floors" not in part for part in measured) and sum(p.count("<svg") for p in measured) == 2
    tables = [part.split('-compare">Latest compare</h3>')[1].split("<h3")[0] for part in sections.values()]
    latest_compare = next(t for t in tables if "<table>" in t)       # a compare's machine is its own
    assert latest_compare.count("<tr>") == 9 and "<td>test_ln_fwd_0/MI325X/modelled</td>" in latest_compare
    assert latest_compare.count("(modelled ratio)") == 8
    if CHROMIUM is not None:
        dom = _chromium("--dump-dom", (tmp_path / "site" / "index.html").as_uri())
        assert dom.returncode == 0 and dom.stdout.count("<svg") == 10 and _console_errors(dom.stderr) == []
