"""What the README says of the main job and of installing torch holds (issue 33 item 7)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from lnbench.verify.plan import EMULATED_AUTO

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _paragraph(starting: str) -> str:
    start = README.index(starting)
    return README[start:README.index("\n\n", start)]


def test_readme_names_the_backends_the_main_job_verifies():
    """It said the main job "checks every backend"; without a GPU `auto` is lnbench's FlyDSL kernels and torch,
    never compile or liger."""
    main_job = _paragraph("The last line is **the main job**")
    assert "every backend" not in main_job
    named = set(re.findall(r"`([a-z-]+)`", main_job))
    assert set(EMULATED_AUTO) <= named, named
    assert re.search(r"does not run `compile`, `liger`", main_job)
    assert not {"compile", "liger"} & set(EMULATED_AUTO)


def test_readme_says_plain_pypi_torch_is_not_the_cpu_build():
    """`torch==2.13.0` from PyPI is the CPU build only where pip is configured for it (CI's local wheel folder)."""
    assert "from PyPI is the CPU build" not in README
    note = _paragraph("`pip install torch==2.13.0` gives the CPU build only where pip is set up")
    assert "plain PyPI" in note and "--index-url https://download.pytorch.org/whl/cpu" in note


def test_the_test_command_type_checks_as_ci_does():
    """The README's test command runs mypy (pinned in the `test` extra, configured by pyproject's [tool.mypy])
    before the tests, and .ci/run, kept in step with it, does the same (issue 39 item 3)."""
    root = Path(__file__).resolve().parents[1]
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert 'pip install -e ".[test]" && mypy && python -m pytest -n 2 -rs tests' in README
    assert re.search(r"^mypy\n(.*\n)*python -m pytest -n 2 -rs tests$", ci, re.M)
    pins = [r for r in pyproject["project"]["optional-dependencies"]["test"] if r.startswith("mypy")]
    assert len(pins) == 1 and pins[0].startswith("mypy=="), pins
    assert f"mypy {pins[0].removeprefix('mypy==')} (pinned" in README
    assert pyproject["tool"]["mypy"]["files"] == ["lnbench"]
