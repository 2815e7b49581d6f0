"""``pgs run --issue https://HOST/OWNER/REPO/issues/N``: from a GitHub issue to a patch, a pushed
branch and a draft pull request, against a local fake of GitHub's API (tests/support/github_fake.py)
whose ``clone_url`` is a local bare git repository, the scripted model server, and Docker.

Bad input fails before any sandbox is started: one ``pgs: error:`` line, exit code 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import agent.github.client
from agent.cli import main
from agent.core.loop import RunResult
from agent.errors import InputError
from agent.github.client import RetrySettings, parse_issue_url
from agent.github.pr import GitHubConfig, OpenPRHook, github_task
from agent.models.script_server import ScriptedServer
from agent.run.config import load_config
from agent.run.run_task import run_task
from tests.support.github_fake import (
    BODY,
    NUMBER,
    REPO,
    TITLE,
    TOKEN,
    FakeGitHub,
    branch_file,
    branches,
)
from tests.support.textutil import BUGGY, FIX, MODEL, SUBMIT, VIEW, bash, call, closed_port
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


# --------------------------------------------------------------------------- issue URLs


names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True).filter(
    lambda s: not s.endswith(".git")
)


@given(owner=names, name=names, number=st.integers(1, 10**7))
def test_issue_urls_parse_back_to_owner_repo_number(owner: str, name: str, number: int) -> None:
    for url in (
        f"https://github.com/{owner}/{name}/issues/{number}",
        f"github.com/{owner}/{name}/issues/{number}/",
        f"https://www.github.com/{owner}/{name}/issues/{number}#issuecomment-1",
    ):
        ref = parse_issue_url(url, "https://api.github.com")
        assert (ref.owner, ref.name, ref.number) == (owner, name, number)


@given(owner=names, name=names, number=st.integers(1, 10**7))
def test_pull_request_and_repository_urls_are_refused_naming_what_they_are(
    owner: str, name: str, number: int
) -> None:
    with pytest.raises(InputError, match="is a pull request URL, not an issue"):
        parse_issue_url(
            f"https://github.com/{owner}/{name}/pull/{number}", "https://api.github.com"
        )
    with pytest.raises(InputError, match="is a repository URL, not an issue"):
        parse_issue_url(f"https://github.com/{owner}/{name}", "https://api.github.com")


def test_enterprise_issue_urls_live_on_the_api_host() -> None:
    ref = parse_issue_url("https://ghe.example/team/lib/issues/3", "https://ghe.example/api/v3")
    assert (ref.full_name, ref.number) == ("team/lib", 3)
    with pytest.raises(InputError, match=r"host github.com is not GitHub's \(ghe.example\)"):
        parse_issue_url("https://github.com/a/b/issues/1", "https://ghe.example/api/v3")


def test_cli_rejects_malformed_issue_urls_saying_which(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    base = f"http://{fake.host}/{REPO}"
    cases = {
        f"{base}/pull/{NUMBER}": "is a pull request URL, not an issue",
        base: "is a repository URL, not an issue",
        f"{base}/issues": "names no issue: add its number",
        f"{base}/issues/seven": "'seven' is not a positive number",
        f"{base}/wiki/Home": "is not a GitHub issue URL",
        f"https://gitlab.com/{REPO}/issues/1": "host gitlab.com is not GitHub's",
        "fix the bug please": "without --repo, --issue must be a GitHub issue URL",
    }
    for url, expected in cases.items():
        assert expected in cli_error(capsys, *argv(url)), url
    assert fake.requests == []  # refused before asking GitHub anything


# --------------------------------------------------------------------------- API errors


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


# --------------------------------------------------------------------------- end to end (Docker)


FIX_STEPS = [
    VIEW,
    FIX,
    bash("python3 -c 'from textutil import shout; print(shout(\"hi\"))'"),
    SUBMIT,
]

#: The Tester's turn (its own conversation, served in order after the Generator's submit).
PROPERTY = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from textutil import shout


@pytest.mark.pgs_issue("shout upper-cases the text and adds one bang")
@given(st.text(alphabet="abcXYZ ", max_size=8))
@example("hi")
def test_shout_upper_cases(text):
    assert shout(text) == text.upper() + "!"


@pytest.mark.pgs_regression("shout ends with exactly one bang")
@given(st.text(alphabet="abc", max_size=8))
def test_shout_ends_with_one_bang(text):
    assert shout(text).endswith("!") and not shout(text).endswith("!!")
"""
TESTER_STEPS = [
    call("str_replace_editor", "Read it.", command="view", path="/repo/textutil.py"),
    call(
        "str_replace_editor",
        "The rule: upper-case plus one bang.",
        command="create",
        path="/repo/.pgs/properties/test_shout.py",
        file_text=PROPERTY,
    ),
    call("submit", "Done."),
]


def run_cli(
    capsys: pytest.CaptureFixture[str], script: list[dict[str, Any]], *args: str
) -> tuple[int, str, str, list[dict[str, Any]]]:
    with ScriptedServer(script) as server:
        code = main([*args, "--base-url", server.url])  # the last --base-url wins
        requests = server.requests
    captured = capsys.readouterr()
    return code, captured.out, captured.err, requests


@pytest.mark.docker
def test_issue_url_to_patch_sends_nothing_without_flags(
    fake: FakeGitHub, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.page_size = 1  # the two comments come on two pages
    fake.fail(r"/issues/7$", 500, times=1)  # retried
    out = tmp_path / "out"
    code, stdout, stderr, requests = run_cli(
        capsys,
        FIX_STEPS,
        *argv(issue_url(fake), "--image", base_image, "--feedback", "none", out=out),
    )

    assert code == 0, stderr
    assert "+    return text.upper()" in stdout
    assert (out / "octo__textutil-7" / "octo__textutil-7.patch").read_text() == stdout
    # The problem statement: title, body, labels, comments.
    problem = requests[0]["messages"][1]["content"]
    for text in (TITLE, BODY, "Labels: bug, good first issue", "@alice wrote on 2024-03-01:"):
        assert text in problem
    assert "The docstring is right." in problem
    assert only_gets(fake)
    assert sum(r.path.split("?")[0].endswith("/comments") for r in fake.requests) == 2
    assert branches(Path(fake.repos[REPO].clone_url)) == ["main"]


@pytest.mark.docker
def test_open_pr_pushes_the_branch_and_opens_a_draft_pr(
    fake: FakeGitHub,
    bare: Path,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    out = tmp_path / "out"
    extra = ["--image", base_image, "--feedback", "none", "--force", "--open-pr"]
    code, _, stderr, _ = run_cli(capsys, FIX_STEPS, *argv(issue_url(fake), *extra, out=out))

    assert code == 0, stderr
    assert "return text.upper()" in branch_file(bare, "pgs/issue-7", "textutil.py")
    parent = subprocess.run(
        ["git", "--git-dir", str(bare), "rev-parse", "pgs/issue-7^", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert parent[0] == parent[1]  # one commit on top of the default branch
    [pull] = fake.pulls
    assert pull["draft"] is True
    assert (pull["head"], pull["base"]) == ("pgs/issue-7", "main")
    assert pull["title"] == f"Fix #7: {TITLE}"
    body = pull["body"]
    assert body.startswith("Fixes #7")
    assert "| `textutil.py` | 1 | 1 |" in body and "1 file changed, +1 -1 lines." in body
    assert "No check ran (`--feedback none`)" in body
    assert "4 steps" in body and "cost $0.0000" in body
    assert f"opened a draft pull request: {pull['html_url']}" in stderr
    posts = [r for r in fake.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/api/v3/repos/octo/textutil/pulls"]
    assert all(r.token == TOKEN for r in fake.requests)
    # The token is in no file pgs wrote, the clone's git config included.
    for path in out.rglob("*"):
        if path.is_file() and "/objects/" not in str(path):
            assert TOKEN not in path.read_text(errors="replace"), path


@pytest.mark.docker
def test_comment_posts_the_patch_on_the_issue(
    fake: FakeGitHub,
    bare: Path,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    extra = ["--image", base_image, "--feedback", "none", "--force", "--comment"]
    code, stdout, stderr, _ = run_cli(
        capsys, FIX_STEPS, *argv(issue_url(fake), *extra, out=tmp_path / "out")
    )

    assert code == 0, stderr
    [comment] = fake.posted_comments
    assert "not checked (`--feedback none`)" in comment["body"]
    assert f"```diff\n{stdout.rstrip()}\n```" in comment["body"]
    assert fake.pulls == [] and branches(bare) == ["main"]
    assert "posted the patch on the issue" in stderr


@pytest.mark.docker
def test_pr_is_refused_when_the_run_did_not_submit(
    fake: FakeGitHub,
    bare: Path,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    extra = ["--image", base_image, "--feedback", "none", "--force", "--open-pr"]
    extra += ["--agent.step-limit", "1"]
    code, stdout, stderr, _ = run_cli(
        capsys, [FIX, SUBMIT], *argv(issue_url(fake), *extra, out=tmp_path / "out")
    )

    assert code == 1
    assert "+    return text.upper()" in stdout  # the patch is still printed and kept
    assert (
        "pgs: error: no pull request opened: the run ended with submitted (exit_step_limit), "
        "not a submitted patch" in stderr
    )
    assert only_gets(fake) and branches(bare) == ["main"]


@pytest.mark.docker
def test_pgs_checked_patch_opens_a_pr_listing_the_properties(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    docker_client: Any,
) -> None:
    """The repository-image path (no --image), with --setup; PGS on: the Tester's properties
    are validated, the patch passes them, and the PR says so."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    out = tmp_path / "out"
    setup = "python3 -m pip install pytest && touch /opt/pgs-setup-ran"
    # The Tester's first turn, then its fresh probe (the same file again: nothing new).
    script = [bash("ls /opt/pgs-setup-ran"), VIEW, FIX, SUBMIT, *TESTER_STEPS, *TESTER_STEPS]
    extra = ["--setup", setup, "--open-pr", "--workdir", str(tmp_path / "clone")]
    code, _, stderr, requests = run_cli(capsys, script, *argv(issue_url(fake), *extra, out=out))

    assert code == 0, stderr
    assert "/opt/pgs-setup-ran" in requests[1]["messages"][-1]["content"]  # --setup ran
    assert "No such file" not in requests[1]["messages"][-1]["content"]
    assert "verdict: passed" in stderr
    assert "return text.upper()" in branch_file(bare, "pgs/issue-7", "textutil.py")
    assert (
        ".pgs"
        not in subprocess.run(
            ["git", "--git-dir", str(bare), "diff", "--stat", "main", "pgs/issue-7"],
            capture_output=True,
            text=True,
        ).stdout
    )
    [pull] = fake.pulls
    body = pull["body"]
    assert "PGS (`property-min`) verdict: **passed**" in body
    assert (
        "`.pgs/properties/test_shout.py::test_shout_upper_cases` (issue property: shout "
        "upper-cases the text and adds one bang) — passes on the patch" in body
    )
    assert "test_shout_ends_with_one_bang` (regression property" in body
    assert "`tests/test_textutil.py::test_shout_adds_one_bang` passed" in body
    assert "Fixes #7" in body and "cost $" in body


@pytest.mark.docker
def test_open_pr_refuses_a_patch_that_changes_a_test_the_check_relies_on_without_force(
    fake: FakeGitHub,
    bare: Path,
    docker_client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The right fix, plus an edit of the related repository test: the check ran the base
    commit's test (it passes), the verdict is tests-changed; no pull request."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    edit_test = bash(
        "sed -i 's/def test_shout_adds_one_bang/def test_shout_bangs/' tests/test_textutil.py"
    )
    # Generator; the Tester's first turn, then its fresh probe (nothing new).
    script = [VIEW, FIX, edit_test, SUBMIT, *TESTER_STEPS, *TESTER_STEPS]
    code, _, stderr, _ = run_cli(
        capsys, script, *argv(issue_url(fake), "--open-pr", out=tmp_path / "out")
    )

    assert code == 1, stderr
    assert "verdict: tests-changed" in stderr
    assert (
        "pgs: error: no pull request opened: the PGS verdict is tests-changed, not passed (the "
        "patch changes test files the check relies on: tests/test_textutil.py (modified); the "
        "check ran them as at the base commit, where 1 issue property" in stderr
    )
    assert "pass --force anyway" in stderr
    assert only_gets(fake) and branches(bare) == ["main"]


#: A Tester turn whose property lacks the pgs marks: validation drops it.
UNMARKED_STEPS = [
    call(
        "str_replace_editor",
        "The rule, without a mark.",
        command="create",
        path="/repo/.pgs/properties/test_shout.py",
        file_text="\n".join(
            line for line in PROPERTY.splitlines() if not line.startswith("@pytest.mark.pgs_")
        ),
    ),
    call("submit", "Done."),
]


@pytest.mark.docker
def test_open_pr_refuses_a_tests_only_verdict_without_force(
    fake: FakeGitHub,
    bare: Path,
    docker_client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every property dropped, twice (the Tester's retry too): the related repository test
    passes, which is tests-only, not passed; no pull request, the patch kept."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    # Generator; the Tester's first turn, its retry (with the reasons), its probe.
    script = [VIEW, FIX, SUBMIT, *UNMARKED_STEPS, *UNMARKED_STEPS, *UNMARKED_STEPS]
    extra = ["--open-pr"]  # the repository image: pytest and Hypothesis for the checks
    code, stdout, stderr, requests = run_cli(
        capsys, script, *argv(issue_url(fake), *extra, out=tmp_path / "out")
    )

    assert code == 1, stderr
    assert "+    return text.upper()" in stdout
    assert "verdict: tests-only" in stderr
    assert (
        "pgs: error: no pull request opened: the PGS verdict is tests-only, not passed (no "
        "issue property took part; 0 regression properties and 1 related repository test "
        "pass; checked: 0 properties, 1 of 1 related test files ran): pass --force anyway" in stderr
    )
    assert only_gets(fake) and branches(bare) == ["main"]
    # The retry's first message carried the validation report's lines.
    retry = [r for r in requests if "NO issue property survived" in json.dumps(r["messages"][:2])]
    assert retry and "neither a pgs_issue nor a pgs_regression marker" in json.dumps(retry[0])


@pytest.mark.docker
def test_open_pr_from_a_fork_pushes_there_and_names_the_fork_owner_in_head(
    fake: FakeGitHub,
    bare: Path,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    fork = tmp_path / "github" / "me" / "textutil.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(bare), str(fork)], check=True)
    fake.add_repo("me/textutil", fork)
    extra = ["--image", base_image, "--feedback", "none", "--force", "--open-pr"]
    code, _, stderr, _ = run_cli(
        capsys,
        FIX_STEPS,
        *argv(issue_url(fake), *extra, "--fork", "me/textutil", out=tmp_path / "out"),
    )

    assert code == 0, stderr
    assert branches(bare) == ["main"]
    assert "return text.upper()" in branch_file(fork, "pgs/issue-7", "textutil.py")
    [pull] = fake.pulls
    assert (pull["head"], pull["base"]) == ("me:pgs/issue-7", "main")
    assert fake.requests[-1].path == "/api/v3/repos/octo/textutil/pulls"


def test_the_token_goes_in_a_header_for_https_remotes_only() -> None:
    from agent.github.git import git_env

    env = git_env("https://github.com/octo/textutil.git", "s3cret")
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
    assert "s3cret" not in env["GIT_CONFIG_VALUE_0"]  # base64 of x-access-token:s3cret
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert "GIT_CONFIG_VALUE_0" not in git_env("/srv/git/textutil.git", "s3cret")
    assert "GIT_CONFIG_VALUE_0" not in git_env("https://github.com/octo/textutil.git", None)


# --------------------------------------------------------------------------- the PR hook


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
