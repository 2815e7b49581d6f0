"""Real git repositories for tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: Fixed dates: the same files give the same commit, so repository images stay cached.
FIXED_DATES = {
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=pgs@example.com", "-c", "user.name=pgs", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **FIXED_DATES},
    ).stdout


def make_repo(path: Path, files: dict[str, str], message: str = "initial") -> Path:
    """A real git repository at ``path`` holding ``files``, committed."""
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return path
