"""Fixtures of the tests of agent/core: the tool bundles pgs ships, loaded, and the buggy textutil
repository the Generator fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.tools import Toolset
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY


@pytest.fixture
def ours() -> Toolset:
    return Toolset.from_paths()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "textutil", BUGGY)
