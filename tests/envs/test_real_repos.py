"""Opt-in: images of real, well-known Python repositories pgs knows nothing about (the list and
pinned commits are :data:`bench.repos.REPOS`). Each must build from detection alone and, with the
network off, collect its own test suite with no error and pass one test file.

Run with ``PGS_REAL_REPOS=DIR``, DIR holding a clone of each repository named as in the list
(``git clone https://github.com/psf/requests DIR/requests``, ...) with the pinned commit. Each
build takes minutes the first time (the host's network reaches the package index), then is a
cache hit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.repos import REPOS, RealRepo, check_repo

FOLDER = os.environ.get("PGS_REAL_REPOS")

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not FOLDER,
        reason="set PGS_REAL_REPOS to a folder holding clones of the repositories of "
        "bench/repos.py (git clone URL $PGS_REAL_REPOS/NAME, at the pinned commit)",
    ),
]


@pytest.mark.parametrize("repo", REPOS, ids=[r.name for r in REPOS])
def test_real_repository_builds_and_its_tests_run_offline(repo: RealRepo) -> None:
    folder = Path(FOLDER or ".") / repo.name
    if not (folder / ".git").exists():
        pytest.skip(f"no clone at {folder}: git clone {repo.url} {folder}")
    outcome = check_repo(repo, folder)
    assert outcome.ok, outcome.line()
    assert outcome.collected and outcome.cached is not None and outcome.cached < 5
