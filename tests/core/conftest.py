"""Fixtures of the tests of agent/core: the tool bundles pgs ships, loaded."""

from __future__ import annotations

import pytest

from agent.core.tools import Toolset


@pytest.fixture
def ours() -> Toolset:
    return Toolset.from_paths()
