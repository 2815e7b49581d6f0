"""Fixtures of the command-line tests: the buggy textutil repository a run fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_runs import BUGGY
from tests.support.repos import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "textutil", BUGGY)
