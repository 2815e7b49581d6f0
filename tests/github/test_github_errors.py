"""``pgs run --issue URL``: GitHub's API errors (404, a private repository, a bad token, the rate
limit, an unreachable API, server errors) and flags that need an issue URL or conflict, against
the fake GitHub of tests/support/github_fake.py.

Bad input fails before any sandbox is started: one ``pgs: error:`` line, exit code 2.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from agent.cli import main
from tests.support.github_cli import argv, cli_error, issue_url, only_gets
from tests.support.github_fake import REPO, TOKEN, FakeGitHub
from tests.support.textutil import cli_error as _cli_error
from tests.support.textutil import closed_port

# isort: split
# Fixtures: pytest finds them by their names in this module.
from tests.support.github_cli import _env, issue_labels, upstream_files  # noqa: F401


def test_unknown_repository_or_issue_is_a_404_message(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = cli_error(capsys, *argv(issue_url(fake, repo="octo/nope")))
    assert "the repository octo/nope was not found or is private (404" in line
    assert "set GITHUB_TOKEN" in line
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    line = cli_error(capsys, *argv(issue_url(fake, number=99)))
    assert f"the issue {REPO}#99 was not found (404)" in line


def test_private_repository_without_a_token_says_set_github_token(
    fake: FakeGitHub, bare: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add_repo("octo/secret", bare, private=True)
    line = cli_error(capsys, *argv(issue_url(fake, 1, "octo/secret")))
    assert "not found or is private" in line and "set GITHUB_TOKEN" in line
    fake.fail(r"/repos/octo/textutil$", 403, message="Forbidden")
    line = cli_error(capsys, *argv(issue_url(fake)))
    assert "(403 Forbidden)" in line and "set GITHUB_TOKEN" in line


def test_bad_token_is_refused_with_401_and_403(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "expired-token")
    line = cli_error(capsys, *argv(issue_url(fake)))
    assert "GitHub refused GITHUB_TOKEN (401 Bad credentials)" in line
    assert "expired-token" not in line
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    fake.fail(r"/issues/7$", 403, message="Resource not accessible by integration")
    line = cli_error(capsys, *argv(issue_url(fake)))
    assert "GITHUB_TOKEN may not read the issue octo/textutil#7 (403" in line


def test_rate_limit_says_when_it_resets(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.exhaust_rate_limit(reset_in=10 * 60 - 5)
    clock = time.strftime("%H:%M", time.localtime(fake.reset))
    line = cli_error(capsys, *argv(issue_url(fake)))
    assert "rate limit is used up (5000 requests an hour)" in line
    assert f"it resets at {clock} (in 10 minutes)" in line
    assert "set GITHUB_TOKEN for a higher limit" in line

    fake.remaining = 5000
    reset = str(int(time.time()) + 90)
    fake.fail("/repos/", 429, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset})
    assert "(in 2 minutes)" in cli_error(capsys, *argv(issue_url(fake)))


def test_unreachable_api_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = closed_port()
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{port}/api/v3")
    line = cli_error(capsys, *argv(f"http://127.0.0.1:{port}/{REPO}/issues/1"))
    assert (
        f"cannot reach the GitHub API at http://127.0.0.1:{port}/api/v3 (connection refused)"
        in line
    )


def test_server_errors_are_retried_then_reported(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.fail(r"/issues/7$", 502, times=3, message="Bad Gateway")
    line = cli_error(capsys, *argv(issue_url(fake)))
    assert "GitHub answered 502 Bad Gateway for the issue octo/textutil#7 (3 attempts)" in line
    assert sum(r.path.endswith("/issues/7") for r in fake.requests) == 3


def test_a_pull_request_number_is_not_an_issue(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add_issue(REPO, 8, "a PR", "", pull_request=True)
    assert "octo/textutil#8 is a pull request, not an issue" in cli_error(
        capsys, *argv(issue_url(fake, 8))
    )


def test_closed_or_locked_issue_needs_force(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake.add_issue(REPO, 9, "old", "fixed long ago", state="closed")
    fake.add_issue(REPO, 10, "heated", "locked thread", locked=True)
    assert "octo/textutil#9 is closed: pass --force" in cli_error(capsys, *argv(issue_url(fake, 9)))
    assert "octo/textutil#10 is locked: pass --force" in cli_error(
        capsys, *argv(issue_url(fake, 10))
    )
    # With --force it goes on: the clone is made, then the model is found down (before any
    # sandbox work).
    out = tmp_path / "out"
    code = main(argv(issue_url(fake, 9), "--force", "--sandbox", "local", out=out))
    err = capsys.readouterr().err
    assert code == 2
    assert "pgs: warning: the issue octo/textutil#9 is closed; working on it (--force)" in err
    assert "pgs: error: cannot reach the model's server at http://127.0.0.1:" in err
    assert (out / "octo__textutil-9" / "textutil" / "textutil.py").is_file()


def test_flags_that_need_an_issue_url_or_conflict_are_refused_early(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    local = tmp_path / "local"
    subprocess.run(["git", "clone", "-q", str(fake.repos[REPO].clone_url), str(local)], check=True)
    line = cli_error(capsys, *argv("fix it", "--repo", str(local), "--open-pr"))
    assert "--open-pr needs a GitHub issue URL" in line
    line = cli_error(capsys, *argv(issue_url(fake), "--open-pr", "--feedback", "none"))
    assert "no pull request or comment without a check" in line and "--force" in line
    line = cli_error(capsys, *argv(issue_url(fake), "--comment", "--feedback", "none"))
    assert "no pull request or comment without a check" in line and "--force" in line
    line = cli_error(capsys, *argv(issue_url(fake), "--setup", "pip install -e .", "--image", "x"))
    assert "--setup installs into the repository image pgs builds" in line
    line = cli_error(capsys, *argv(issue_url(fake), "--fork", "me/textutil"))
    assert "--fork is where --open-pr pushes" in line
    assert fake.requests == []
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("mine\n")
    line = cli_error(capsys, *argv(issue_url(fake), "--workdir", str(tmp_path / "busy")))
    assert "exists and is not empty" in line
    line = cli_error(
        capsys,
        *argv(issue_url(fake), "--workdir", str(tmp_path / "w"), "--base-commit", "deadbeef"),
    )
    assert "--base-commit deadbeef is not a commit of octo/textutil" in line
    assert only_gets(fake)


@pytest.mark.parametrize("flag", ["--open-pr", "--comment"])
def test_open_pr_and_comment_check_the_token_before_the_run(
    fake: FakeGitHub,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flag: str,
) -> None:
    # The model endpoint is a closed port: any line about it means the run started.
    out = tmp_path / "out"
    base = argv(issue_url(fake), flag, "--sandbox", "local", out=out)

    def fails_before_the_run() -> str:
        code = main(base)
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, err
        assert len(lines) == 1 and lines[0].startswith("pgs: error:"), err
        assert "cannot reach http://127.0.0.1" not in err  # no model call was tried
        assert not (out / "octo__textutil-7").exists()  # nothing cloned
        return lines[0]

    line = fails_before_the_run()  # no token at all
    assert f"{flag} needs GITHUB_TOKEN" in line and "set it" in line
    monkeypatch.setenv("GITHUB_TOKEN", "expired-token")
    assert "GitHub refused GITHUB_TOKEN (401" in fails_before_the_run()
    if flag == "--open-pr":  # a token that may read the repository but not push to it
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        fake.repos[REPO].read_only.add(TOKEN)
        line = fails_before_the_run()
        assert "GITHUB_TOKEN may not push to octo/textutil" in line and "--fork" in line
    assert fake.pulls == [] and fake.posted_comments == []


def test_issue_url_with_repo_uses_the_local_repository(
    fake: FakeGitHub, bare: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    local = tmp_path / "mine"
    subprocess.run(["git", "clone", "-q", str(bare), str(local)], check=True)
    args = argv(issue_url(fake), "--repo", str(local), "--sandbox", "local", out=tmp_path / "o")
    # The issue is read, then the model is found down: exit code 2.
    line = _cli_error(capsys, *args, code=2)
    assert "pgs: error: cannot reach the model's server at http://127.0.0.1:" in line
    assert only_gets(fake)
    assert not (tmp_path / "o" / "octo__textutil-7" / "textutil").exists()  # nothing cloned
    line = cli_error(capsys, *args, "--base-commit", "HEAD")
    assert "--workdir and --base-commit choose the clone pgs makes: omit --repo" in line
