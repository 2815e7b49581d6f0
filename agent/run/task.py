"""The task of a run: the issue (a file or its text, :func:`load_issue`) and the repository it
is fixed in (:func:`check_repo`: a git repository with a commit, clean unless
``--allow-dirty``).

What pgs itself reads or writes inside the repository (an untracked issue file given as
``--issue``, the output folder) is pgs's own, not the code (:func:`own_files`): it never counts
as an uncommitted change, and it is never carried into the sandbox, so never into the patch."""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterable
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
    #: Paths that are pgs's own (the issue file; the output folder is added by the run): what
    #: of them is untracked in ``repo`` stays out of the sandbox (:func:`own_files`).
    own: tuple[Path, ...] = ()


def host_git(repo: Path, *args: str) -> str:
    """``git ARGS`` run in the host repository ``repo``: its output (raises on failure)."""
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def head_commit(repo: Path) -> str:
    """The commit the host repository is at (its ``HEAD``)."""
    return host_git(repo, "rev-parse", "HEAD").strip()


def check_repo(repo: Path, *, allow_dirty: bool, own: Iterable[Path] = ()) -> Path:
    """The repository's top folder, resolved; refused when it is not a git repository with a
    commit, or (unless ``allow_dirty``) when its working tree has changes. Untracked files
    under ``own`` (the issue file, the output folder: :func:`own_files`) are not changes."""
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
    if not allow_dirty:
        check_clean(repo, own)
    return repo


def check_clean(repo: Path, own: Iterable[Path] = ()) -> None:
    """Refuse ``repo`` when its working tree has changes; untracked files under ``own`` (the
    issue file, the output folder: :func:`own_files`) are not changes."""
    mine = set(own_files(repo, own))
    changes = [
        (status, path) for status, path in _status(repo) if not (status == "??" and path in mine)
    ]
    if changes:
        first = " ".join(changes[0])
        raise InputError(
            f"the working tree of {repo} has uncommitted changes ({first!r}...): commit "
            "or stash them, or pass --allow-dirty to work on top of them"
        )


def _status(repo: Path) -> list[tuple[str, str]]:
    """``git status``'s entries (status, path), every untracked file listed by itself."""
    fields = host_git(repo, "status", "--porcelain", "-z", "--untracked-files=all").split("\0")
    entries = []
    rest = iter(fields)
    for field in rest:
        if not field:
            continue
        status, path = field[:2], field[3:]
        entries.append((status, path))
        if "R" in status or "C" in status:  # a rename or copy: its source path follows
            next(rest, None)
    return entries


def own_files(repo: Path, paths: Iterable[Path]) -> list[str]:
    """The untracked files of ``repo`` (ignored ones too) under ``paths`` that lie inside it,
    relative to its top: what pgs reads or writes there for a run (the issue file, the output
    folder), which is not the code. A file the repository tracks is never among them."""
    repo = Path(repo).resolve()
    inside = []
    for path in paths:
        try:
            resolved = Path(path).expanduser().resolve()
            if resolved.exists() and resolved.is_relative_to(repo) and resolved != repo:
                inside.append(":(literal)" + resolved.relative_to(repo).as_posix())
        except (OSError, ValueError):  # a name too long to be a path: not one of ours
            continue
    if not inside:
        return []
    listed = host_git(repo, "ls-files", "--others", "-z", "--", *inside)
    return sorted({name for name in listed.split("\0") if name})


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
    own = (path.absolute(),) if is_file else ()
    return Task(instance_id=instance_id, problem_statement=text.strip(), repo=repo, own=own)
