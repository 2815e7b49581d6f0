"""``apply_patch`` (``pgs run --apply``) and what it refuses, on real git repositories and
patches made by git itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent.errors import InputError
from agent.run.apply import apply_patch, links_outside
from tests.support.repos import git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    made = make_repo(tmp_path / "repo", {"pkg/mod.py": "x = 1\n", "README.md": "hi\n"})
    os.symlink("../README.md", made / "pkg" / "readme")  # a link that stays inside
    git(made, "add", "-A")
    git(made, "commit", "-qm", "inside link")
    return made


def patch_of(repo: Path, tmp_path: Path, make: str) -> str:
    """The patch git writes for the shell commands ``make`` run in a clone of ``repo``."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    subprocess.run(["bash", "-c", make], cwd=clone, check=True)
    git(clone, "add", "-A")
    return git(clone, "diff", "--cached", "--binary")


@pytest.mark.parametrize(
    ("make", "shown"),
    [
        ("ln -s /etc/passwd passwd", "passwd -> /etc/passwd"),
        ("ln -s ../../outside pkg/up", "pkg/up -> ../../outside"),
        ("ln -sfn /root pkg/readme", "pkg/readme -> /root"),  # a link retargeted
        ("rm README.md && ln -s /etc/hosts README.md", "README.md -> /etc/hosts"),  # type change
        ("git mv pkg/readme readme", "readme -> ../README.md"),  # moved up
    ],
)
def test_a_link_pointing_outside_the_repository_is_refused(
    repo: Path, tmp_path: Path, make: str, shown: str
) -> None:
    patch = patch_of(repo, tmp_path, make)
    assert links_outside(patch, repo) == [shown]
    with pytest.raises(InputError, match="outside the repository") as refused:
        apply_patch(repo, patch, patch_file=tmp_path / "x.patch")
    assert shown in str(refused.value) and "x.patch" in str(refused.value)
    assert git(repo, "status", "--porcelain") == ""


def test_links_inside_the_repository_apply(repo: Path, tmp_path: Path) -> None:
    patch = patch_of(repo, tmp_path, "ln -s mod.py pkg/alias && ln -s pkg/mod.py top")
    assert links_outside(patch, repo) == []
    apply_patch(repo, patch)
    assert os.readlink(repo / "pkg" / "alias") == "mod.py"


def test_an_unsubmitted_or_redacted_patch_is_refused_unless_forced(
    repo: Path, tmp_path: Path
) -> None:
    patch = patch_of(repo, tmp_path, "echo 'x = 2' > pkg/mod.py")
    with pytest.raises(InputError, match=r"exit_error.*--force"):
        apply_patch(repo, patch, exit_status="exit_error")
    with pytest.raises(InputError, match="MY_TOKEN"):
        apply_patch(repo, patch, redacted=["MY_TOKEN"], force=True)
    assert git(repo, "status", "--porcelain") == ""
    apply_patch(repo, patch, exit_status="submitted (exit_step_limit)", force=True)
    assert (repo / "pkg" / "mod.py").read_text() == "x = 2\n"
