"""Fixtures of the ``pgs inspect`` tests: a headless Chromium (Debian's ``chromium``, installed by
``.ci/setup``), found once per session; tests that need it skip on a machine without it, and FAIL
when CI=true."""

from __future__ import annotations

import shutil

import pytest

from tests.support.inspect_pages import IN_CI, Browser


@pytest.fixture(scope="session")
def browser() -> Browser:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Browser(found)
    if IN_CI:
        pytest.fail("chromium is required in CI: .ci/setup installs it (apt-get install chromium)")
    pytest.skip("no chromium here: apt-get install --no-install-recommends chromium")
