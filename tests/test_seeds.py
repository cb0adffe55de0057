"""Case seeds derived from the base seed stay valid seeds (0 .. 2**63-1), whatever the base."""
from __future__ import annotations

from lnbench import validate
from lnbench.perf.cases import build_cases


def test_derived_seeds_wrap_inside_the_seed_range():
    top = validate.SEED_MAX
    assert validate.derived_seed(5, 7) == 12
    assert validate.derived_seed(top, 1) == 0 and validate.derived_seed(top, 0) == top
    for offset in (1, 1000, 7919 * (4096 * 31 + 4096)):
        assert validate.seed(validate.derived_seed(top, offset)) == validate.derived_seed(top, offset)


def test_perf_cases_from_the_largest_base_seed_record_valid_seeds():
    cases = build_cases(["torch"], ["fwd"], ["f32"], [(4096, 4096), (3, 257)], ["hot"], 1e-5, validate.SEED_MAX, {})
    assert cases and all(0 <= c.seed <= validate.SEED_MAX for c in cases)
    assert len({c.seed for c in cases}) == len(cases)


def test_git_commit_says_dirty_for_uncommitted_tracked_changes(tmp_path, monkeypatch):
    import subprocess

    from lnbench.machine import checkout
    from lnbench.run import metadata

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("x = 1\n")
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(checkout, "PACKAGE_DIR", repo / "pkg")
    metadata.git_commit.cache_clear()
    clean = metadata.git_commit()
    (repo / "untracked.txt").write_text("not counted\n")
    metadata.git_commit.cache_clear()
    assert metadata.git_commit() == clean and len(clean) >= 7 and "dirty" not in clean
    (repo / "pkg" / "__init__.py").write_text("x = 2\n")
    metadata.git_commit.cache_clear()
    assert metadata.git_commit() == clean + "-dirty"
    metadata.git_commit.cache_clear()


def test_git_commit_is_empty_for_an_install_inside_another_checkout(tmp_path, monkeypatch):
    """lnbench installed (not editable) into a virtual environment inside some repository: that repository's
    commit is not lnbench's, so git_commit says nothing rather than naming it."""
    import subprocess

    from lnbench.machine import checkout
    from lnbench.run import metadata

    repo = tmp_path / "project"
    installed = repo / ".venv" / "site-packages" / "lnbench"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text(".venv/\n")
    (repo / "main.py").write_text("y = 1\n")
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(checkout, "PACKAGE_DIR", installed)
    metadata.git_commit.cache_clear()
    try:
        assert metadata.git_commit() == ""
    finally:
        metadata.git_commit.cache_clear()


def test_verify_cases_from_the_largest_base_seed_record_valid_seeds():
    from lnbench.verify.cases import build_cases as verify_cases
    cases = verify_cases([(2, 8), (3, 257)], ["f32", "bf16"], [1e-5, 1e-2], validate.SEED_MAX)
    assert cases and all(0 <= c.seed <= validate.SEED_MAX for c in cases)
