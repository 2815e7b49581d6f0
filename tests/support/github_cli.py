"""The command line of ``pgs run --issue URL`` against the fake GitHub of tests/github/conftest.py,
for the tests of tests/github/test_github*.py: the repository they serve (with a ``.pgs.yaml``)
and its issue's labels, an environment without tokens or model URLs and with quick retries, and
the argv, error line and requests of a run.

A test module imports the fixtures by name (pytest finds them there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agent.github.client
from agent.github.client import RetrySettings
from tests.support.github_fake import NUMBER, REPO, FakeGitHub
from tests.support.textutil import BUGGY, MODEL, closed_port
from tests.support.textutil import cli_error as _cli_error

PGS_YAML = 'image:\n  python: "3.9"\n'


@pytest.fixture(scope="module")
def upstream_files() -> dict[str, str]:
    return {**BUGGY, ".pgs.yaml": PGS_YAML}


@pytest.fixture(scope="module")
def issue_labels() -> tuple[str, ...]:
    return ("bug", "good first issue")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GITHUB_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(
        agent.github.client, "RETRY", RetrySettings(attempts=3, min_wait=0.01, max_wait=0.02)
    )


def issue_url(fake: FakeGitHub, number: int = NUMBER, repo: str = REPO) -> str:
    return fake.issue_url(repo, number)


def argv(issue: str, *extra: str, url: str | None = None, out: Path | None = None) -> list[str]:
    args = [
        "run",
        "--issue",
        issue,
        "--model",
        MODEL,
        "--base-url",
        url or f"http://127.0.0.1:{closed_port()}/v1",
        "--model.prices",
        json.dumps({MODEL: [0, 0]}),
        "--model.retries",
        json.dumps({"attempts": 1}),
        *extra,
    ]
    if out is not None:
        args += ["--output-dir", str(out)]
    return args


def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    return _cli_error(capsys, *args)


def only_gets(fake: FakeGitHub) -> bool:
    return bool(fake.requests) and all(r.method == "GET" for r in fake.requests)
