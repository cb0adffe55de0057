"""lnbench report: a static HTML dashboard, offline (no script, no external URL), checked in a real headless
Chromium (Debian's package): the page loads without console errors, and the DOM Chromium builds from it (read back
with --dump-dom) holds each machine's section and each chart's line, dots and change lines where the data puts
them; a probe script in a copy of the page reads the charts' laid-out boxes (a chart the browser does not draw
has none). No pixel or colour is compared."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
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


@dataclass
class Node:
    """An element of the browser's DOM as --dump-dom serialises it (attribute names lower-cased)."""

    tag: str
    attrs: dict[str, str]
    children: list["Node"] = field(default_factory=list)
    text: str = ""

    def find_all(self, tag: str, cls: str | None = None) -> list["Node"]:
        """Descendants of `tag` (with `cls` among their classes when given), in document order."""
        found = []
        for child in self.children:
            if child.tag == tag and (cls is None or cls in child.attrs.get("class", "").split()):
                found.append(child)
            found += child.find_all(tag, cls)
        return found

    def text_content(self) -> str:
        return self.text + "".join(child.text_content() for child in self.children)


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def _dom(html: str) -> Node:
    """The element tree of a serialised DOM."""
    root = Node("#document", {})
    stack = [root]

    class Builder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            node = Node(tag, {k: v or "" for k, v in attrs})
            stack[-1].children.append(node)
            if tag not in VOID:
                stack.append(node)

        def handle_startendtag(self, tag, attrs):
            stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

        def handle_endtag(self, tag):
            while len(stack) > 1 and stack.pop().tag != tag:
                pass

        def handle_data(self, data):
            stack[-1].text += data

    Builder().feed(html)
    return root


def _vertices(svg: Node) -> list[tuple[float, float]]:
    (line,) = svg.find_all("polyline") or [Node("polyline", {})]
    return [tuple(map(float, xy.split(","))) for xy in line.attrs.get("points", "").split()]


def _chart_problems(svg: Node) -> list[str]:
    """What keeps a trend chart from showing its series: not one line vertex a run (as its title counts them), a
    vertex outside the view box or out of run order, the newest run's dot off the line's end, a busy run's hollow
    dot off the line, a change line not standing on a run from top to bottom."""
    _, _, width, height = map(float, svg.attrs["viewbox"].split())
    runs = int(re.search(r": (\d+) runs", svg.find_all("title")[0].text).group(1))
    points = _vertices(svg)
    xs = [x for x, _ in points]
    problems = []
    if len(points) != runs:
        problems.append(f"{len(points)} line vertices for {runs} runs")
    problems += [f"vertex {p} outside 0..{width:g} x 0..{height:g}" for p in points
                 if not (0 <= p[0] <= width and 0 <= p[1] <= height)]
    if xs != sorted(set(xs)):
        problems.append("vertices not left to right")
    near = lambda x, y: any(abs(x - px) < 0.05 and abs(y - py) < 0.05 for px, py in points)   # noqa: E731
    newest = [c for c in svg.find_all("circle") if "loaded" not in c.attrs.get("class", "")]
    if not points or len(newest) != 1 or (float(newest[0].attrs["cx"]), float(newest[0].attrs["cy"])) != points[-1]:
        problems.append("the newest run's dot is not on the line's last vertex")
    problems += [f"busy-run dot at {c.attrs['cx']},{c.attrs['cy']} off the line"
                 for c in svg.find_all("circle", "loaded") if not near(float(c.attrs["cx"]), float(c.attrs["cy"]))]
    for line in svg.find_all("line", "change"):
        x1, x2, y1, y2 = (float(line.attrs[k]) for k in ("x1", "x2", "y1", "y2"))
        if not (x1 == x2 and any(abs(x1 - x) < 0.05 for x in xs) and (y1, y2) == (0, height)):
            problems.append(f"change line at x {x1:g}..{x2:g} is not on a run from top to bottom")
    return problems


#: run in a copy of the page: each trend chart's laid-out box, its line's box and length, and its line's stroke width
PROBE = """<script>
const charts = [...document.querySelectorAll("svg.trend")].map(svg => {
  const line = svg.querySelector("polyline"), box = r => [r.left, r.top, r.right, r.bottom];
  return {id: svg.parentElement.id, visible: svg.checkVisibility(), svg: box(svg.getBoundingClientRect()),
          line: box(line.getBoundingClientRect()), length: line.getTotalLength(),
          stroke: parseFloat(getComputedStyle(line).strokeWidth)};
});
document.body.insertAdjacentHTML("beforeend", `<pre id="probe">${JSON.stringify(charts)}</pre>`);
</script>"""


def _layout_problems(chart: dict) -> list[str]:
    """What keeps the browser from drawing a chart: not visible, no laid-out box, a line of no length or stroke,
    a line outside its chart's box (its stroke's half-width of slack)."""
    (left, top, right, bottom), (l_left, l_top, l_right, l_bottom) = chart["svg"], chart["line"]
    problems = [] if chart["visible"] else ["not visible"]
    if right - left <= 0 or bottom - top <= 0:
        problems.append(f"no laid-out box {chart['svg']}")
    if chart["length"] <= 0 or chart["stroke"] <= 0:
        problems.append(f"its line has length {chart['length']} and stroke {chart['stroke']}")
    slack = chart["stroke"] / 2 + 0.5
    if not (left - slack <= l_left <= l_right <= right + slack and top - slack <= l_top <= l_bottom <= bottom + slack):
        problems.append(f"its line {chart['line']} outside the chart {chart['svg']}")
    return problems


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_the_report_loads_in_chromium_without_console_errors_and_draws_its_charts(tmp_path: Path) -> None:
    page = _report(tmp_path)
    dumped = _chromium("--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert _console_errors(dumped.stderr) == []
    # the check sees console errors: a page that throws is caught
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('planted'); undefined_fn();</script></body></html>")
    assert _console_errors(_chromium("--dump-dom", bad.as_uri()).stderr)

    dom = _dom(dumped.stdout)
    sections = {s.attrs["id"]: s for s in dom.find_all("section")}
    links = {a.attrs["href"].lstrip("#"): a.text_content() for a in dom.find_all("nav")[0].find_all("a")}
    assert set(links) == set(sections) and len(sections) == 2                 # one section a machine, each linked
    assert all(s.find_all("h2")[0].text_content() == links[i] for i, s in sections.items())
    (measured,) = [s for i, s in sections.items() if i.startswith("cpu-")]
    charts = {div.find_all("h4")[0].text_content().split(" · ")[0]: div.find_all("svg")[0]
              for div in measured.find_all("div", "chart")}
    assert set(charts) == {"perf torch fwd f32 8x64 hot", "perf torch bwd f32 8x64 hot"}
    assert len(dom.find_all("svg")) == 2                                      # the other machine: a verify, no chart
    for name, svg in charts.items():
        assert _chart_problems(svg) == [], name
        points = _vertices(svg)
        assert len(points) == 40                                              # _store's 40 runs
        ((x, y),) = [(float(c.attrs["cx"]), float(c.attrs["cy"])) for c in svg.find_all("circle", "loaded")]
        assert (x, y) == points[3]                                            # the busy run (loaded={3}), hollow
    fwd = charts["perf torch fwd f32 8x64 hot"]
    (change,) = fwd.find_all("line", "change")                                # fwd's 5 % step at run 25
    assert float(change.attrs["x1"]) == _vertices(fwd)[25][0] and "c024..c025" in change.text_content()
    assert charts["perf torch bwd f32 8x64 hot"].find_all("line", "change") == []
    # the checker sees a broken chart: a vertex past the right edge (one more than the runs, so the newest dot is
    # off the line's end), a change line between two runs
    broken = _dom(dumped.stdout).find_all("svg")[0]
    (line,) = broken.find_all("polyline")
    line.attrs["points"] += " 999.0,45.0"
    broken.find_all("line", "change")[0].attrs.update(x1="100.3", x2="100.3")
    problems = " | ".join(_chart_problems(broken))
    assert all(what in problems for what in ("41 line vertices", "outside", "newest", "change line")), problems

    # laid out: a copy of the page with a probe script, and a planted chart the browser must not draw
    first = dumped.stdout.split('<svg class="trend"', 1)[1].split("</svg>", 1)[0]
    planted = f'<div class="chart" id="planted"><svg class="trend" style="display:none"{first}</svg></div>'
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", planted + PROBE + "</body>"))
    run = _chromium("--dump-dom", probed.as_uri())
    assert run.returncode == 0 and _console_errors(run.stderr) == [], run.stderr[-2000:]
    laid_out = {c["id"]: c for c in json.loads(_dom(run.stdout).find_all("pre")[0].text)}
    assert set(laid_out) == {div.attrs["id"] for div in measured.find_all("div", "chart")} | {"planted"}
    for name, chart in laid_out.items():
        problems = _layout_problems(chart)
        assert (problems != []) == (name == "planted"), (name, problems)
        if name != "planted":
            assert chart["length"] > 340                                      # at least the 348 px it runs across


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
        assert dom.returncode == 0 and _console_errors(dom.stderr) == []
        svgs = _dom(dom.stdout).find_all("svg")
        assert len(svgs) == 10 and all(_chart_problems(svg) == [] for svg in svgs)
