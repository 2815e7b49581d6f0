"""The environment of a GitHub Actions step for the tests of ``pgs github``
(tests/github/test_action*.py): the runner's variables cleared, then set as a step sees them
(its temp folder, server URL, run id and summary file), and quick retries.

A test module imports the fixture by name (pytest finds it there)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent.github.client
from agent.github.client import RetrySettings

ACTIONS_ENV = (
    "GITHUB_ACTIONS",
    "GITHUB_EVENT_PATH",
    "GITHUB_EVENT_NAME",
    "GITHUB_REPOSITORY",
    "GITHUB_WORKSPACE",
    "GITHUB_API_URL",
    "GITHUB_TOKEN",
    "GITHUB_SERVER_URL",
    "GITHUB_RUN_ID",
    "RUNNER_TEMP",
    "GITHUB_STEP_SUMMARY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ACTIONS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(
        agent.github.client, "RETRY", RetrySettings(attempts=2, min_wait=0.01, max_wait=0.02)
    )
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "runner-temp"))
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
