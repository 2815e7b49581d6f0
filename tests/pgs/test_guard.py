"""What a check runs is not the working tree's (agent/pgs/guard.py, ``original_tests`` in
agent/pgs/check.py), on real git repositories in a LocalSandbox: the Tester's property files
are put back as the host kept them, whatever was done to them (and never through a symlink
into another folder); the repository's test files, conftest.py and pytest configuration are
the base commit's for the duration of a check, then the candidate's again."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent.pgs.check import original_tests
from agent.pgs.guard import PropertyGuard
from agent.pgs.runner import plugin_dir
from agent.record.pgs import GuardedChange
from envs.local import LocalSandbox
from tests.support.repos import git, make_repo

PROPS = ".pgs/properties"
TESTER_FILE = f"{PROPS}/test_rule.py"
TESTER_TEXT = "def test_rule():\n    assert 1 + 1 == 2\n"
HELPER = f"{PROPS}/conftest.py"
HELPER_TEXT = "import pytest\n"


@pytest.fixture
def box(tmp_path: Path) -> LocalSandbox:
    repo = make_repo(
        tmp_path / "repo",
        {
            "pkg/__init__.py": "",
            "pkg/core.py": "def f():\n    return 1\n",
            "tests/test_core.py": "from pkg.core import f\n\n\ndef test_f():\n"
            "    assert f() == 1\n",
            "tests/conftest.py": "",
            "pyproject.toml": '[project]\nname = "pkg"\nversion = "1"\n\n'
            '[tool.pytest.ini_options]\naddopts = "-q"\n',
            "setup.cfg": "[metadata]\nname = pkg\n",
        },
    )
    return LocalSandbox(repo)


def written_by_the_tester(box: LocalSandbox) -> PropertyGuard:
    box.write_file(TESTER_FILE, TESTER_TEXT)
    box.write_file(HELPER, HELPER_TEXT)
    guard = PropertyGuard(PROPS)
    guard.take(box)
    return guard


def found(changes: Sequence[GuardedChange]) -> set[tuple[str, str]]:
    return {(c.path, c.change) for c in changes}


def test_edits_deletions_additions_and_modes_are_reported_and_undone(box: LocalSandbox) -> None:
    with box:
        guard = written_by_the_tester(box)
        assert set(guard.sha256()) == {TESTER_FILE, HELPER}
        assert guard.restore(box) == []  # nothing changed since the Tester's turn
        box.write_file(TESTER_FILE, "def test_rule():\n    assert True\n")
        box.run(f"rm {HELPER} && echo x > {PROPS}/test_mine.py && echo y > .pgs/conftest.py")
        assert found(guard.restore(box)) == {
            (TESTER_FILE, "edited"),
            (HELPER, "deleted"),
            (f"{PROPS}/test_mine.py", "added"),
            (".pgs/conftest.py", "added"),
        }
        assert box.read_file(TESTER_FILE).decode() == TESTER_TEXT
        assert box.read_file(HELPER).decode() == HELPER_TEXT
        assert box.run(f"ls -A {PROPS}").output.split() == ["conftest.py", "test_rule.py"]
        assert box.run("ls -A .pgs").output.split() == [".gitignore", "properties"]
        box.run(f"chmod 600 {TESTER_FILE}")
        assert found(guard.restore(box)) == {(TESTER_FILE, "mode 644 -> 600")}
        assert found(guard.restore(box)) == set()


def test_a_symlinked_folder_is_replaced_and_its_target_left_alone(
    box: LocalSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "properties").mkdir(parents=True)
    (outside / "properties" / "test_rule.py").write_text("def test_rule():\n    pass\n")
    (outside / "keep.txt").write_text("not pgs's to delete\n")
    with box:
        guard = written_by_the_tester(box)
        box.run(f"rm -rf .pgs && ln -s {outside} .pgs")
        assert found(guard.restore(box)) == {(".pgs", "replaced by a symlink")}
        assert not os.path.islink(Path(box.repo_path) / ".pgs")
        assert box.read_file(TESTER_FILE).decode() == TESTER_TEXT
        # The link's target is untouched: restoring never goes through a symlink.
        assert (outside / "keep.txt").read_text() == "not pgs's to delete\n"
        assert (outside / "properties" / "test_rule.py").exists()

        box.run(f"rm -rf {PROPS} && ln -s {outside}/properties {PROPS}")
        assert found(guard.restore(box)) == {(PROPS, "replaced by a symlink")}
        box.run(f"rm {TESTER_FILE} && ln -s /etc/hostname {TESTER_FILE}")
        assert found(guard.restore(box)) == {(TESTER_FILE, "replaced by a symlink")}
        assert box.read_file(TESTER_FILE).decode() == TESTER_TEXT
        assert (outside / "properties" / "test_rule.py").exists()


def test_the_plugin_folder_is_the_hosts(box: LocalSandbox) -> None:
    with box:
        guard = written_by_the_tester(box)
        folder = plugin_dir(box)
        guard.restore(box)
        box.run(f"echo 'raise SystemExit' > {folder}/pytest.py")
        box.run(f"echo '# mine' >> {folder}/pgs_pytest_plugin.py")
        assert found(guard.restore(box)) == {
            (f"{folder}/pytest.py", "added"),
            (f"{folder}/pgs_pytest_plugin.py", "edited"),
        }
        assert not box.run(f"test -e {folder}/pytest.py").ok
        assert "# mine" not in box.read_file(f"{folder}/pgs_pytest_plugin.py").decode()


def test_before_the_testers_first_turn_anything_in_the_folder_is_the_generators(
    box: LocalSandbox,
) -> None:
    with box:
        box.write_file(f"{PROPS}/test_planted.py", "def test_x():\n    pass\n")
        guard = PropertyGuard(PROPS)
        assert found(guard.restore(box)) == {(f"{PROPS}/test_planted.py", "added")}
        assert box.run(f"ls -A {PROPS}").output.strip() == ""


def head(box: LocalSandbox) -> str:
    return box.run("git rev-parse HEAD").output.strip()


def test_original_tests_runs_the_base_commits_files_and_puts_the_candidates_back(
    box: LocalSandbox,
) -> None:
    with box:
        base = head(box)
        box.write_file("tests/test_core.py", "def test_f():\n    assert True\n")
        box.write_file("conftest.py", "# the candidate's\n")
        box.write_file("tests/test_new.py", "def test_new():\n    pass\n")
        box.run("rm tests/conftest.py")
        # Metadata only in pyproject.toml: not the check's business.
        box.write_file(
            "pyproject.toml",
            '[project]\nname = "pkg"\nversion = "2"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n',
        )
        box.write_file("setup.cfg", "[metadata]\nname = pkg\n\n[tool:pytest]\naddopts = -p x\n")
        tests = ["tests/test_core.py", "tests/test_new.py"]
        with original_tests(box, base, [*tests, f"{PROPS}/test_p.py"], tests=tests) as changed:
            assert found(changed) == {
                ("tests/test_core.py", "modified"),
                ("tests/conftest.py", "deleted"),
                ("conftest.py", "added"),
                ("setup.cfg", "modified"),
            }
            assert "assert f() == 1" in box.read_file("tests/test_core.py").decode()
            assert box.run("test -e tests/conftest.py && test ! -e conftest.py").ok
            assert "tool:pytest" not in box.read_file("setup.cfg").decode()
            assert box.run("test -e tests/test_new.py").ok  # the candidate's own test runs
        assert box.read_file("tests/test_core.py").decode() == "def test_f():\n    assert True\n"
        assert box.read_file("conftest.py").decode() == "# the candidate's\n"
        assert not box.run("test -e tests/conftest.py").ok
        assert "tool:pytest" in box.read_file("setup.cfg").decode()
        assert 'version = "2"' in box.read_file("pyproject.toml").decode()


def test_a_commit_by_the_generator_does_not_move_the_original(box: LocalSandbox) -> None:
    """The base is a SHA: the candidate's test edit, committed, still differs from it."""
    with box:
        base = head(box)
        box.write_file("tests/test_core.py", "def test_f():\n    assert True\n")
        git(Path(box.repo_path), "commit", "-qam", "mine")
        assert head(box) != base
        with original_tests(box, base, ["tests/test_core.py"], tests=["tests/test_core.py"]) as c:
            assert found(c) == {("tests/test_core.py", "modified")}
        assert box.diff(base=base).count("assert True") == 1
