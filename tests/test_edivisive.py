"""lnbench's e-divisive (lnbench.history.edivisive): the change points MongoDB's signal-processing-algorithms
found on 201 series (tests/data/change_points_reference.json), its statistic against the definition, its draws
(local, fixed), and an install that needs no other package."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lnbench.history import edivisive
from lnbench.history.changes import change_points
from lnbench.history.edivisive import distances, split_scores

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).parent / "data" / "change_points_reference.json"


def _reference() -> list[dict]:
    return json.loads(REFERENCE.read_text())["series"]


def test_the_change_points_are_those_the_library_found() -> None:
    """The fixture was produced on 2026-12-02 at 998e66e, before lnbench.history.edivisive replaced the library: the
    change points lnbench.history.changes found with signal-processing-algorithms 2.1.6 (its C extension, numpy 2.4.6),
    checked then against the library's own `e_divisive`. Its series: the 114 that tests/test_history.py searched
    (recorded by wrapping change_points during a run of it), the 8-run store's 2, and 85 generated (A/A and
    stepped 1%-noise series of 12-100 runs, two steps, steps near the threshold, whole-number values full of ties;
    each name is its recipe). Indices and p are equal, not close: the permutations draw the library's stream."""
    reference = _reference()
    assert len(reference) == 201 and sum(bool(s["indices"]) for s in reference) == 84
    for series in reference:
        found = change_points(series["values"])
        assert [cp.index for cp in found] == series["indices"], series["name"]
        assert [cp.p for cp in found] == series["p"], series["name"]
        assert [cp.size_pct for cp in found] == pytest.approx(series["size_pct"], rel=1e-12), series["name"]


def _q(x: np.ndarray, tau: int) -> float:
    """The statistic of the split x[:tau] | x[tau:] straight from its definition (module docstring)."""
    a, b = x[:tau], x[tau:]
    cross = np.abs(a[:, None] - b[None, :]).mean()
    within_a, within_b = np.abs(a[:, None] - a[None, :]).mean(), np.abs(b[:, None] - b[None, :]).mean()
    return len(a) * len(b) / len(x) * (2 * cross - within_a - within_b)


def test_split_scores_are_the_energy_statistic_of_every_split() -> None:
    x = np.random.default_rng(0).normal(0, 1, 23)
    x[15:] += 2
    scores = split_scores(distances(x))
    assert scores[0] == 0
    assert scores[1:] == pytest.approx([_q(x, tau) for tau in range(1, 23)], rel=1e-12)
    assert int(np.argmax(scores)) == 15


def test_the_draws_are_local_and_fixed() -> None:
    """Series near the threshold (weak steps: another stream of permutations changes some answers) give the same
    change points whatever numpy's global generator holds, and leave it where it was."""
    weak = [s for s in _reference() if "weak step" in s["name"]]
    answers = []
    for seed in (1, 2):
        np.random.seed(seed)
        answers.append([[cp.index for cp in change_points(s["values"])] for s in weak])
        assert np.random.random() == np.random.RandomState(seed).random()        # not moved
    assert answers[0] == answers[1] == [s["indices"] for s in weak]


def test_a_series_without_a_change_stops_its_permutation_test_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round whose candidate more permutations beat than p allows ends the search there (the full test scores
    101 splits a round)."""
    calls = []
    real = edivisive.split_scores
    monkeypatch.setattr(edivisive, "split_scores", lambda d: calls.append(1) or real(d))
    assert change_points(100 * (1 + np.random.default_rng(7).normal(0, 0.01, 60))) == []
    assert 1 < len(calls) < 30, len(calls)


def test_history_installs_with_its_extra_alone() -> None:
    """No change-point library, no `--no-deps` step: the README's test command and .ci/run install the `test`
    extra only, and the `history` extra is there for `pip install -e ".[history]"`."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^history = \[", pyproject, re.M)
    for text in (pyproject, readme, ci):
        assert "signal-processing-algorithms" not in text and "--no-deps" not in text
    command = 'pip install torch==2.13.0 && pip install -e ".[test]" && mypy && python -m pytest -n 2 -rs tests'
    assert command in readme
