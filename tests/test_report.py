"""lnbench report: a static HTML dashboard, offline (no script, no external URL), checked in a real headless
Chromium (Debian's package) by structure, never by pixel or colour: the page loads without console errors; the
DOM Chromium builds from it (read back with --dump-dom) has its sections in order (what changed, timed series,
checks, abi-compare, modelled floors), each chart its axes' tick text, a dot a run on its line, and the change
points marked between the right runs; a probe script in a copy of the page, laid out at 1280 and at 390 px wide,
reads the charts' boxes (a chart the browser does not draw has none) and finds no element wider than the window.
The store shaped like issue 40's H200 one (tests/h200_store.py: 336 verify series of one run, 20 abi-compare
series without a value, 16 perf series of 15 runs, one with a planted +5% step) is the main fixture."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import h200_store
from cdp import Browser
from lnbench.history.svg import MIN_HALF_RANGE, Run, chart, nice_step
from cli_helpers import invoke
from test_history import PROFILES, _profile_store, _store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-extensions",
         "--no-first-run", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr",
         "--v=0"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
SECTIONS = ["changes", "timed", "checks", "abi-compare", "modelled"]
PLANTED_TITLE = "perf " + " ".join(h200_store.PLANTED)


def _report(url: str, out: Path) -> Path:
    done = invoke("report", "--store", url, "--out", str(out))
    assert done.exit_code == 0, done.output
    return out / "index.html"


@pytest.fixture(scope="module")
def h200_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the H200-shaped store."""
    folder = tmp_path_factory.mktemp("h200")
    return _report(h200_store.build(folder / "h200.sqlite"), folder / "site")


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


def _dumped(page: Path) -> Node:
    """The page as Chromium builds it (no console error on the way)."""
    run = _chromium("--dump-dom", page.as_uri())
    assert run.returncode == 0 and _console_errors(run.stderr) == [], run.stderr[-2000:]
    return _dom(run.stdout)


def _sections(dom: Node) -> dict[str, Node]:
    return {s.attrs["id"]: s for s in dom.find_all("section")}


def _charts(section: Node) -> dict[str, Node]:
    """A section's charts by series name (the caption's link)."""
    return {fig.find_all("a", "name")[0].text_content(): fig.find_all("svg")[0]
            for fig in section.find_all("figure", "series")}


def _vertices(svg: Node) -> list[tuple[float, float]]:
    (line,) = svg.find_all("polyline") or [Node("polyline", {})]
    return [tuple(map(float, xy.split(","))) for xy in line.attrs.get("points", "").split()]


def _dots(svg: Node) -> list[tuple[float, float, str]]:
    return [(float(c.attrs["cx"]), float(c.attrs["cy"]), c.attrs["data-commit"]) for c in svg.find_all("circle", "point")]


def _plot_box(svg: Node) -> tuple[float, float, float, float]:
    """left, top, right, bottom of the plot: the y axis' line and the x axis' line."""
    y_axis = svg.find_all("g", "y-axis")[0].find_all("line", "axis")[0].attrs
    x_axis = svg.find_all("g", "x-axis")[0].find_all("line", "axis")[0].attrs
    return float(y_axis["x1"]), float(y_axis["y1"]), float(x_axis["x2"]), float(x_axis["y1"])


def _chart_problems(svg: Node) -> list[str]:
    """What keeps a trend chart from showing its series: no dot, not one dot a run (as its title counts them), the
    line not through the dots left to right, a dot outside the plot, fewer than 3 y ticks or one that is not a
    number, no unit on the y axis, an x tick that names no run's commit, a change mark not between two runs."""
    runs = int(re.search(r": (\d+) runs", svg.find_all("title")[0].text).group(1))
    dots = _dots(svg)
    left, top, right, bottom = _plot_box(svg)
    problems = [] if dots else ["no dot"]
    if len(dots) != runs:
        problems.append(f"{len(dots)} dots for {runs} runs")
    if _vertices(svg) != [(x, y) for x, y, _ in dots]:
        problems.append("the line does not run through the dots")
    xs = [x for x, _, _ in dots]
    if xs != sorted(set(xs)):
        problems.append("dots not left to right")
    problems += [f"dot {x},{y} outside the plot" for x, y, _ in dots if not (left <= x <= right and top <= y <= bottom)]
    y_ticks = [t.text_content() for t in svg.find_all("g", "y-axis")[0].find_all("text", "tick")]
    if len(y_ticks) < 3 or not all(re.fullmatch(r"-?\d+(\.\d+)?", t) for t in y_ticks):
        problems.append(f"y ticks {y_ticks}")
    if not svg.find_all("text", "axis-title") or not svg.find_all("text", "axis-title")[0].text_content().strip():
        problems.append("no y axis title")
    commits = {c for _, _, c in dots}
    x_ticks = [t.text for t in svg.find_all("g", "x-axis")[0].find_all("text", "tick")]
    if not x_ticks or not set(x_ticks) <= commits:
        problems.append(f"x ticks {x_ticks} are not the runs' commits")
    for mark in svg.find_all("g", "change"):
        x = float(mark.find_all("line")[0].attrs["x1"])
        after = [dx for dx, _, c in dots if c == mark.attrs["data-commit"]]
        before = [dx for dx in xs if dx < x]
        if not after or not before or not before[-1] < x < after[0] or xs[xs.index(after[0]) - 1] != before[-1]:
            problems.append(f"change mark at {x} is not between the run before {mark.attrs['data-commit']} and it")
    return problems


def _y_range(svg: Node) -> tuple[float, float]:
    ticks = [float(t.text_content()) for t in svg.find_all("g", "y-axis")[0].find_all("text", "tick")]
    return min(ticks), max(ticks)


# -- charts, unit by unit ------------------------------------------------------------------------------------------


def test_a_flat_series_is_drawn_on_at_least_5pct_each_side_of_its_median() -> None:
    """±0.8% noise must not fill the chart: the y axis spans at least ±5% around the median, on round ticks, and
    the dots stay within the middle fifth of the plot's height."""
    rng = np.random.default_rng(7)
    values = 320 * (1 + rng.uniform(-0.008, 0.008, 15))
    runs = [Run(f"c{i:03d}", f"2026-11-{i + 1:02d}T03:00:00", float(v)) for i, v in enumerate(values)]
    drawn = chart(runs, [], "perf x", "us", "H200")
    ticks = [float(t.label) for t in drawn.y_ticks]
    median = float(np.median(values))
    assert min(ticks) <= median * (1 - MIN_HALF_RANGE) and max(ticks) >= median * (1 + MIN_HALF_RANGE)
    step = ticks[1] - ticks[0]
    assert step == pytest.approx(nice_step(max(ticks) - min(ticks)), rel=0.3) and all(
        t / step == pytest.approx(round(t / step)) for t in ticks)
    ys = [d.y for d in drawn.dots]
    assert max(ys) - min(ys) < 0.2 * (drawn.bottom - drawn.top)
    assert drawn.axis_label == "median time (us)" and [t.label for t in drawn.x_ticks][0] == "c000"
    assert len(drawn.bands) == 1 and drawn.marks == []


def test_a_step_gets_a_band_each_side_and_a_mark_between_its_runs_with_commit_and_size() -> None:
    values = [100.0, 101, 99, 100.5, 99.5, 100, 105, 106, 104, 105.5, 104.5]
    runs = [Run(f"c{i:03d}", f"2026-11-{i + 1:02d}T03:00:00", v, v - 0.3, v + 0.3, "busy" if i == 2 else "")
            for i, v in enumerate(values)]
    change = {"index": 6, "from_commit": "c005", "to_commit": "c006", "size_pct": 5.0, "p": 0.01}
    drawn = chart(runs, [change], "perf x", "us", "NVIDIA H200")
    (mark,) = drawn.marks
    assert drawn.dots[5].x < mark.x < drawn.dots[6].x and mark.label == "+5.0% at c006" and mark.commit == "c006"
    low, high = drawn.bands
    assert low.y1 > high.y2                       # the later stretch's band is above (smaller y) the earlier one
    assert low.x2 <= mark.x + 0.1 and high.x1 >= mark.x - 0.1
    dot = drawn.dots[2]
    high, low = map(float, re.search(rf"M{dot.x} ([\d.]+)V([\d.]+)", drawn.intervals).groups())   # its workers' range
    assert dot.busy and high < dot.y < low
    assert all(part in dot.title for part in ("c002", "2026-11-03 03:00", "99 us", "workers 98.7–99.3 us",
                                              "busy machine", "NVIDIA H200"))
    assert chart([], [], "x", "us", "m") is None


# -- the page ------------------------------------------------------------------------------------------------------


def test_the_report_is_one_offline_page_with_what_changed_first_and_failures_before_counts(tmp_path: Path) -> None:
    html = _report(_store(tmp_path, loaded={3}), tmp_path / "site").read_text()
    assert "<script" not in html and not re.search(r"(src|href)=\"(https?:)?//", html)
    order = [m.group(1) for m in re.finditer(r'<section id="([\w-]+)">', html)]
    assert order == SECTIONS
    changes = html.split('<section id="changes">')[1].split("</section>")[0]
    assert changes.count("<tr>") == 2 and "perf torch fwd f32 8x64 hot" in changes and "c024..c025" in changes
    assert html.count("<svg") == 2 and html.count('<g class="change" data-commit="c025">') == 1
    assert html.count('class="point busy"') == 2                                 # run 3 of both perf series
    checks = html.split('<section id="checks">')[1].split("</section>")[0]
    failing = checks.split('<table class="failing">')[1].split("</table>")[0]
    assert failing.count("<tr>") == 2 and '<td data-label="failing since">v006</td>' in failing
    assert checks.index('class="failing"') < checks.index("check-counts")
    assert re.search(r'<details class="check-counts" open><summary class="FAIL">verify: 11 of 12 checks PASS, 1 '
                     r"FAIL or error", checks)


def test_the_h200_report_names_the_step_first_and_draws_only_series_with_values(h200_page: Path) -> None:
    html = h200_page.read_text()
    first = html.split("<section", 2)[1]
    assert first.startswith(' id="changes">') and first.count("<tr>") == 2        # the header and the one step
    assert PLANTED_TITLE in first and f"..{h200_store.STEP_COMMIT}</td>" in first
    size = float(re.search(r'nowrap" data-label="size">\+(\d+\.\d)%', first).group(1))
    assert 3.5 <= size <= 6.5
    timed = html.split('<section id="timed">')[1].split("</section>")[0]
    assert timed.count("<svg") == 16 and timed.index(PLANTED_TITLE) < timed.index("<svg")  # the stepped one first
    abi = html.split('<section id="abi-compare">')[1].split("</section>")[0]
    assert "<svg" not in abi and "20 series without a value, not drawn" in abi
    checks = html.split('<section id="checks">')[1].split("</section>")[0]
    assert "<details class=\"check-counts\"><summary class=\"PASS\">verify: 336 of 336 checks PASS" in checks
    assert "failing" not in checks


#: evaluated in the page: its sections, the charts' laid-out boxes and dots, each element wider than the window
PROBE = """(() => {
const width = document.documentElement.clientWidth, box = r => [r.left, r.top, r.right, r.bottom];
const charts = [...document.querySelectorAll("svg.trend")].map(svg => {
  const line = svg.querySelector("polyline");
  return {id: svg.closest("figure").id, visible: svg.checkVisibility(), svg: box(svg.getBoundingClientRect()),
          line: box(line.getBoundingClientRect()), length: line.getTotalLength(),
          stroke: parseFloat(getComputedStyle(line).strokeWidth),
          dots: [...svg.querySelectorAll("circle.point")].filter(c => c.getBoundingClientRect().width > 0).length};
});
const wide = [...document.querySelectorAll("body *")].filter(e => {
  const r = e.getBoundingClientRect();
  return r.width > 0 && (r.right > width + 0.5 || r.left < -0.5);
}).map(e => `${e.tagName}.${e.getAttribute("class") || ""}#${e.id}`);
const counts = document.querySelector("details.check-counts");
return {width, charts, wide, sections: [...document.querySelectorAll("body > section")].map(s => s.id),
        counts_height: counts ? counts.getBoundingClientRect().height : null};
})()"""


def _laid_out(page: Path, width: int, extra: str = "") -> dict:
    """The probe's answer for a copy of `page` (with `extra` at the end of its body) laid out `width` px wide
    (the DevTools protocol: a headless window is at least 500 px wide); no console error on the way."""
    probed = page.with_name(f"probed-{width}.html")
    probed.write_text(page.read_text().replace("</body>", extra + "</body>"))
    with Browser(CHROMIUM, FLAGS) as browser:
        session = browser.open(probed.as_uri(), width, 900)
        laid = browser.evaluate(session, PROBE)
        assert browser.console_errors(session) == []
    return laid


@needs_chromium
def test_the_browser_driver_sees_console_errors_and_lays_out_at_the_width_asked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('planted'); undefined_fn();</script></body></html>")
    with Browser(CHROMIUM, FLAGS) as browser:
        session = browser.open(bad.as_uri(), 390, 700)
        errors = browser.console_errors(session)
        assert any("planted" in e for e in errors) and len(errors) == 2, errors
        assert browser.evaluate(session, "[document.documentElement.clientWidth, innerHeight]") == [390, 700]


def _layout_problems(chart: dict) -> list[str]:
    """What keeps the browser from drawing a chart: not visible, no laid-out box, no dot drawn, a line of no length
    or stroke, a line outside its chart's box (its stroke's half-width of slack)."""
    (left, top, right, bottom), (l_left, l_top, l_right, l_bottom) = chart["svg"], chart["line"]
    problems = [] if chart["visible"] else ["not visible"]
    if right - left <= 0 or bottom - top <= 0:
        problems.append(f"no laid-out box {chart['svg']}")
    if chart["dots"] < 1:
        problems.append("no dot drawn")
    if chart["length"] <= 0 or chart["stroke"] <= 0:
        problems.append(f"its line has length {chart['length']} and stroke {chart['stroke']}")
    slack = chart["stroke"] / 2 + 0.5
    if not (left - slack <= l_left <= l_right <= right + slack and top - slack <= l_top <= l_bottom <= bottom + slack):
        problems.append(f"its line {chart['line']} outside the chart {chart['svg']}")
    return problems


@needs_chromium
def test_the_h200_report_in_chromium_has_axes_a_dot_a_run_and_the_step_marked_at_its_commit(h200_page: Path
                                                                                             ) -> None:
    dom = _dumped(h200_page)
    sections = _sections(dom)
    assert list(sections) == SECTIONS
    assert [a.attrs["href"] for a in dom.find_all("nav")[0].find_all("a")] == [f"#{s}" for s in SECTIONS]
    first = sections["changes"].text_content()
    assert PLANTED_TITLE in first and h200_store.STEP_COMMIT in first and re.search(r"\+\d\.\d%", first)
    charts = _charts(sections["timed"])
    assert len(charts) == 16 and list(charts)[0] == PLANTED_TITLE
    for name, svg in charts.items():
        assert _chart_problems(svg) == [], name
        assert len(_dots(svg)) == h200_store.RUNS
        low, high = _y_range(svg)
        median = float(np.median([float(re.search(r" · ([\d.]+) us", c.find_all("title")[0].text).group(1))
                                  for c in svg.find_all("circle", "point")]))
        assert low <= median * 0.95 and high >= median * 1.05, name                # an honest scale
    planted = charts[PLANTED_TITLE]
    (mark,) = planted.find_all("g", "change")
    assert mark.attrs["data-commit"] == h200_store.STEP_COMMIT
    assert f"at {h200_store.STEP_COMMIT}" in mark.find_all("text")[0].text_content()
    xs = {c: x for x, _, c in _dots(planted)}
    x = float(mark.find_all("line")[0].attrs["x1"])
    assert xs[h200_store.commit_of(h200_store.STEP_AT - 1)] < x < xs[h200_store.STEP_COMMIT]
    assert len(planted.find_all("rect", "band")) == 2
    assert all(svg.find_all("g", "change") == [] for name, svg in charts.items() if name != PLANTED_TITLE)
    assert dom.find_all("section")[3].find_all("svg") == []                      # abi-compare: no value, no chart
    # the checker sees a broken chart: a dot past the line, a change mark a run too late
    broken = _charts(_sections(_dumped(h200_page))["timed"])[PLANTED_TITLE]
    broken.find_all("polyline")[0].attrs["points"] += " 999.0,45.0"
    broken.find_all("g", "change")[0].attrs["data-commit"] = h200_store.commit_of(h200_store.STEP_AT + 1)
    problems = " | ".join(_chart_problems(broken))
    assert all(what in problems for what in ("through the dots", "change mark")), problems


@needs_chromium
@pytest.mark.parametrize("width", [1280, 390])
def test_the_h200_report_fits_the_window_and_draws_every_chart(h200_page: Path, width: int) -> None:
    """Laid out at a desktop's and a phone's width: the sections in order, every chart drawn with its dots, the
    all-PASS checks one line, and no element wider than the window; a planted hidden chart is caught undrawn and
    a planted wide element is caught."""
    markup = h200_page.read_text().split('<svg class="trend"', 1)[1].split("</svg>", 1)[0]
    planted = (f'<figure class="series" id="planted"><svg class="trend" style="display:none"{markup}</svg></figure>'
               '<div id="too-wide" style="width: 2000px; height: 1px"></div>')
    laid = _laid_out(h200_page, width, planted)
    assert laid["width"] == width and laid["sections"] == SECTIONS
    assert set(laid["wide"]) == {"DIV.#too-wide"}, laid["wide"]
    by_id = {c["id"]: c for c in laid["charts"]}
    assert len(by_id) == 17
    for name, drawn in by_id.items():
        problems = _layout_problems(drawn)
        assert (problems != []) == (name == "planted"), (name, problems)
        if name != "planted":
            assert drawn["dots"] == h200_store.RUNS and drawn["svg"][2] <= width
    assert laid["counts_height"] < 40                                         # 336 PASS: one line


def test_an_imported_flydsl_throughput_drop_is_a_slowdown_among_the_timed_series(tmp_path: Path) -> None:
    """FlyDSL's CI dashboard history (TB/s: larger is faster) is timed: its 4% drop at f0020 is listed as slower
    (a time's rise would be), and its charts are in the timed section."""
    from test_flydsl_formats import _history_json

    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    stored = invoke("store", str(_history_json(tmp_path / "history.json")), "--store", url)
    assert stored.exit_code == 0, stored.output
    html = _report(url, tmp_path / "site").read_text()
    changes = html.split('<section id="changes">')[1].split("</section>")[0]
    assert changes.count("<tr>") == 2 and '<td class="slower">slower</td>' in changes and "f0019..f0020" in changes
    assert "32768x8192" in changes and re.search(r'data-label="size">-\d\.\d%', changes)
    assert html.split('<section id="timed">')[1].split("</section>")[0].count("<svg") == 2


def test_modelled_floors_are_charted_in_a_section_of_their_own(tmp_path: Path) -> None:
    """perf --device emu's floors (the profile kind) are not measured trends: the page's modelled-floors section
    has a chart per launch x target x mode, each step marked (exact); the timed section has only the measured
    machine's charts; a compare of two profiles lists each launch x target, labelled modelled; the page loads in
    Chromium without console errors and every chart passes the checker."""
    url = _profile_store(tmp_path, "llllhhl", _store(tmp_path))
    compared = invoke("compare", str(PROFILES / "light.json"), str(PROFILES / "heavy.json"),
                      "--no-csv", "--store", url)
    assert compared.exit_code == 0, compared.output
    html = _report(url, tmp_path / "site").read_text()
    sections = {m.group(1): part for m, part in zip(re.finditer(r'<section id="([\w-]+)">', html),
                                                     html.split("<section")[1:])}
    assert list(sections) == [*SECTIONS, "compare"]
    modelled, timed = sections["modelled"], sections["timed"]
    assert modelled.count("<svg") == 8 and modelled.count('<g class="change"') == 8
    assert modelled.count("<title>change point c003..c004 +10.5% (exact)</title>") == 4
    assert modelled.count(">+10.5% at c004</text>") == 4 and "modelled floor (us)" in modelled
    assert timed.count("<svg") == 2 and "modelled" not in timed
    assert 'class="band"' not in modelled                                      # a constant stretch has no noise
    latest_compare = sections["compare"]
    assert latest_compare.count("<tr>") == 9 and '<td data-label="case">test_ln_fwd_0/MI325X/modelled</td>' in \
        latest_compare
    assert latest_compare.count("(modelled ratio)") == 8
    if CHROMIUM is not None:
        svgs = _dumped(tmp_path / "site" / "index.html").find_all("svg")
        assert len(svgs) == 10 and all(_chart_problems(svg) == [] for svg in svgs)
