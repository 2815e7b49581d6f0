"""The PR hook of ``pgs run --issue URL`` (``github_task`` and ``run_task`` with the hook it
returns, a host sandbox, the scripted model): it opens a draft PR or posts a comment as its config
says, refuses an empty patch or one that held a secret, and its config is built from the flags."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from agent.core.loop import RunResult
from agent.github.pr import GitHubConfig, OpenPRHook, github_task
from agent.models.script_server import ScriptedServer
from agent.run.config import load_config
from agent.run.run_task import run_task
from tests.support.github_cli import issue_url, only_gets
from tests.support.github_fake import TOKEN, FakeGitHub, branch_file, branches
from tests.support.textutil import MODEL, SUBMIT, bash

# isort: split
# Fixtures: pytest finds them by their names in this module.
from tests.support.github_cli import _env, issue_labels, upstream_files  # noqa: F401


def hook_run(
    fake: FakeGitHub, tmp_path: Path, github: GitHubConfig, script: list[dict[str, Any]]
) -> tuple[OpenPRHook, RunResult]:
    """``github_task`` and ``run_task`` with the hook it returns: a host sandbox, the scripted
    model, no check (the hook's own rules are what these tests are about)."""
    out = tmp_path / "out"
    with ScriptedServer(script) as server:
        config = load_config(
            None,
            {
                "model": {"name": MODEL, "base_url": server.url, "prices": {MODEL: [0, 0]}},
                "sandbox": {"type": "local"},
                "pgs": {"feedback": "none"},
            },
        )
        task, hook = github_task(issue_url(fake), github, config, out)
        result = run_task(task, config, out, hooks=[hook])
    return hook, result


LOCAL_FIX = [bash("sed -i 's/text.lower()/text.upper()/' textutil.py"), SUBMIT]


def test_the_pr_hook_opens_a_draft_pr_as_its_config_says(
    fake: FakeGitHub, bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    hook, result = hook_run(fake, tmp_path, GitHubConfig(send="pr", force=True), LOCAL_FIX)
    assert result.exit_status == "submitted" and hook.refused is None
    [pull] = fake.pulls
    assert hook.url == pull["html_url"]
    assert "return text.upper()" in branch_file(bare, "pgs/issue-7", "textutil.py")


def test_the_pr_hook_posts_a_comment_as_its_config_says(
    fake: FakeGitHub, bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    hook, _ = hook_run(fake, tmp_path, GitHubConfig(send="comment", force=True), LOCAL_FIX)
    [comment] = fake.posted_comments
    assert "+    return text.upper()" in comment["body"] and hook.url
    assert fake.pulls == [] and branches(bare) == ["main"]


def test_the_pr_hook_refuses_an_empty_patch_and_sends_nothing(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    hook, _ = hook_run(fake, tmp_path, GitHubConfig(send="pr", force=True), [SUBMIT])
    assert hook.refused == "the run produced no patch"
    assert only_gets(fake) and branches(bare) == ["main"]
    assert (
        "pgs: error: no pull request opened: the run produced no patch" in capsys.readouterr().err
    )
    # Nothing to send: nothing is sent, nothing refused.
    hook, _ = hook_run(fake, tmp_path / "again", GitHubConfig(), LOCAL_FIX)
    assert hook.refused is None and hook.url is None and only_gets(fake)


@pytest.mark.parametrize("send", ["pr", "comment"])
def test_a_patch_that_held_a_secret_is_not_sent(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    send: Literal["pr", "comment"],
) -> None:
    canary = f"pw-canary-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", canary)
    leak = bash(f"echo 'PASSWORD = \"{canary}\"' >> textutil.py")
    hook, result = hook_run(fake, tmp_path, GitHubConfig(send=send, force=True), [leak, SUBMIT])

    assert hook.refused is not None and "MY_SERVICE_PASSWORD" in hook.refused
    assert 'PASSWORD = "***"' in result.submission and canary not in result.submission
    assert fake.pulls == [] and fake.posted_comments == [] and branches(bare) == ["main"]
    assert only_gets(fake)


def test_github_config_is_built_from_the_flags_and_checked() -> None:
    assert GitHubConfig().send == "nothing"
    config = GitHubConfig(send="pr", fork="me/textutil", workdir=Path("w"))
    assert config.url_only_flags() == ["--open-pr", "--fork", "--workdir"]
    with pytest.raises(ValidationError):
        GitHubConfig(send="email")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        GitHubConfig.model_validate({"open_pr": True})
