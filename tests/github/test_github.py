"""``pgs run --issue https://HOST/OWNER/REPO/issues/N``: from a GitHub issue to a patch, a pushed
branch and a draft pull request, against a local fake of GitHub's API (tests/support/github_fake.py)
whose ``clone_url`` is a local bare git repository, the scripted model server, and Docker.

Issue URLs are in test_github_urls.py, GitHub's API errors and early refusals in
test_github_errors.py, the PR hook in test_github_hook.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.github_cli import argv, issue_url, only_gets
from tests.support.github_fake import BODY, REPO, TITLE, TOKEN, FakeGitHub, branch_file, branches
from tests.support.textutil import FIX, SUBMIT, VIEW, bash, call

# isort: split
# Fixtures: pytest finds them by their names in this module.
from tests.support.github_cli import _env, issue_labels, upstream_files  # noqa: F401

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
