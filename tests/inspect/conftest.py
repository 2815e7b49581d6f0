"""Fixtures of the ``pgs inspect`` tests: a headless Chromium (Debian's ``chromium``, installed by
``.ci/setup``), found once per session (tests that need it skip on a machine without it, and FAIL
when CI=true), and a foreign run folder for the terminal inspector."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.inspect_pages import IN_CI, Browser
from tests.support.inspect_tui import FOREIGN_ID, swe_agent_traj


@pytest.fixture(scope="session")
def browser() -> Browser:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Browser(found)
    if IN_CI:
        pytest.fail("chromium is required in CI: .ci/setup installs it (apt-get install chromium)")
    pytest.skip("no chromium here: apt-get install --no-install-recommends chromium")


@pytest.fixture
def foreign_traj(tmp_path: Path) -> Path:
    path = tmp_path / FOREIGN_ID / f"{FOREIGN_ID}.traj"
    path.parent.mkdir()
    path.write_text(json.dumps(swe_agent_traj(), indent=2))
    return path
