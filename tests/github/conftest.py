"""The fake GitHub of tests/support/github_fake.py serving one issue (``REPO`` #``NUMBER``) of
the textutil repository, for the tests of ``pgs run --issue URL`` and of ``pgs github``.

A module sets what differs: ``upstream_files`` (the repository's files) and ``issue_labels``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.github_fake import (
    BODY,
    COMMENTS,
    NUMBER,
    REPO,
    TITLE,
    TOKEN,
    FakeGitHub,
    bare_copy,
)
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY


@pytest.fixture(scope="module")
def upstream_files() -> dict[str, str]:
    return BUGGY


@pytest.fixture(scope="module")
def issue_labels() -> tuple[str, ...]:
    return ("bug",)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory, upstream_files: dict[str, str]) -> Path:
    """The repository GitHub would hold: fixed files and dates, so a fixed commit (and a cached
    repository image)."""
    return make_repo(tmp_path_factory.mktemp("upstream") / "textutil", upstream_files)


@pytest.fixture
def bare(upstream: Path, tmp_path: Path) -> Path:
    """A fresh bare copy per test: pushes of one test do not leak into another."""
    return bare_copy(upstream, tmp_path / "github" / "octo" / "textutil.git")


@pytest.fixture
def fake(
    bare: Path, issue_labels: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeGitHub]:
    """The fake serving ``bare`` as ``REPO`` and its issue ``NUMBER``; ``GITHUB_API_URL`` set."""
    with FakeGitHub(tokens=(TOKEN,)) as server:
        server.add_repo(REPO, bare)
        server.add_issue(REPO, NUMBER, TITLE, BODY, labels=issue_labels, comments=COMMENTS)
        monkeypatch.setenv("GITHUB_API_URL", server.api_url)
        yield server
