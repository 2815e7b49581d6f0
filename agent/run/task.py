"""The task of a run: the issue (a file or its text, :func:`load_issue`) and the repository it
is fixed in (:func:`check_repo`: a git repository with a commit, clean unless
``--allow-dirty``)."""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.errors import InputError
from envs.errors import NotAGitRepository

if TYPE_CHECKING:
    from envs.images import RepoImageSpec


@dataclass(frozen=True)
class Task:
    instance_id: str
    problem_statement: str
    repo: Path
    #: Overrides of the repository image (``--setup``), over the repository's ``.pgs.yaml``.
    image_spec: RepoImageSpec | None = None


def host_git(repo: Path, *args: str) -> str:
    """``git ARGS`` run in the host repository ``repo``: its output (raises on failure)."""
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def head_commit(repo: Path) -> str:
    """The commit the host repository is at (its ``HEAD``)."""
    return host_git(repo, "rev-parse", "HEAD").strip()


def check_repo(repo: Path, *, allow_dirty: bool) -> Path:
    repo = Path(repo).expanduser()
    if not repo.exists():
        raise InputError(f"the repository path {repo} does not exist")
    repo = repo.resolve()
    try:
        top = Path(host_git(repo, "rev-parse", "--show-toplevel").strip())
        host_git(repo, "rev-parse", "--verify", "HEAD")
    except subprocess.CalledProcessError:
        raise NotAGitRepository(
            f"{repo} is not a git repository with a commit: run `git init` and commit, or "
            "point --repo at the folder that holds .git"
        ) from None
    if top != repo:
        raise InputError(f"{repo} is inside the repository {top}: pass --repo {top}")
    dirty = host_git(repo, "status", "--porcelain", "--untracked-files=normal").strip()
    if dirty and not allow_dirty:
        first = dirty.splitlines()[0]
        raise InputError(
            f"the working tree of {repo} has uncommitted changes ({first.strip()!r}...): commit "
            "or stash them, or pass --allow-dirty to work on top of them"
        )
    return repo


def looks_like_path(issue: str) -> bool:
    """One word that ends in .md or .txt or holds a '/': meant as a file, not as the issue's
    text (which has spaces: "parse_date('2024/02/30') should raise" is text)."""
    word = issue.strip()
    return (
        bool(word)
        and not any(c.isspace() for c in word)
        and ("/" in word or word.lower().endswith((".md", ".txt")))
    )


def load_issue(issue: str, repo: Path) -> Task:
    """``issue`` is a file's path or the issue's text itself; a word that looks like a path
    (:func:`looks_like_path`) must be an existing file."""
    path = Path(issue.strip()).expanduser()
    is_file = len(issue) < 1024 and "\n" not in issue and path.is_file()
    if not is_file and looks_like_path(issue):
        what = "is a folder" if path.is_dir() else "no such file"
        raise InputError(
            f"--issue {issue.strip()}: {what}; give an existing file or the issue's text"
        )
    try:
        text = path.read_text(encoding="utf-8") if is_file else issue
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--issue {path}: cannot read it as UTF-8 text ({e})") from None
    if not text.strip():
        where = f"the file {path}" if is_file else "the --issue text"
        raise InputError(f"{where} is empty: describe the problem to fix")
    stem = path.stem if is_file else "issue-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    instance_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{repo.name}__{stem}").strip("-")
    return Task(instance_id=instance_id, problem_statement=text.strip(), repo=repo)
