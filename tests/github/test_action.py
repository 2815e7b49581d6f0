"""``pgs github``: the GitHub Actions entry, fed the event payloads GitHub documents
(tests/github/data: an ``issues`` ``labeled`` event and an ``issue_comment`` ``created`` one,
trimmed), against the local fake of GitHub's API (tests/support/github_fake.py), the scripted
model server and the local sandbox, through the real command line.

An event pgs does not act on, or one from someone who may not ask, is one line and exit code 0
with nothing asked of GitHub or the model; a broken environment is one ``pgs: error:`` line.

The rules on the payloads alone are in test_action_rules.py, the workflow file users copy in
test_action_workflow.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.github.pr import MARKER
from agent.models.script_server import ScriptedServer
from tests.support.github_events import COMMENTED, LABELED, edited
from tests.support.github_fake import NUMBER, REPO, TITLE, TOKEN, FakeGitHub, branch_file
from tests.support.textutil import MODEL, SUBMIT, bash, closed_port

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.github_actions import _env  # noqa: F401

FIX = [bash("sed -i 's/text.lower()/text.upper()/' textutil.py"), SUBMIT]


# --------------------------------------------------------------------------- the command


def summary(tmp_path: Path) -> list[str]:
    """The lines pgs added to the job's summary page."""
    path = tmp_path / "summary.md"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def issue_labels() -> tuple[str, ...]:
    return ("bug", "fix-me")


@pytest.fixture
def fake(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    """The fake GitHub as a workflow's step sees it: its token and repository set."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    return fake


def event(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, payload: dict[str, Any]
) -> None:
    """What the Actions runner sets up before a step: the payload file and its name."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(path))
    monkeypatch.setenv("GITHUB_EVENT_NAME", name)


def checkout(bare: Path, dest: Path, *config: str) -> Path:
    """actions/checkout's result: a clone of the repository (``config``: ``git config`` pairs
    it leaves behind)."""
    subprocess.run(["git", "clone", "-q", str(bare), str(dest)], check=True)
    for pair in config:
        key, value = pair.split("=", 1)
        subprocess.run(["git", "-C", str(dest), "config", key, value], check=True)
    return dest


def pgs_github(
    capsys: pytest.CaptureFixture[str], script: list[dict[str, Any]], *extra: str
) -> tuple[int, str, str, list[dict[str, Any]]]:
    """``pgs github`` as the workflow runs it, with the scripted model; (exit code, stdout,
    stderr, the model's requests)."""
    with ScriptedServer(script) as server:
        code = main(
            [
                "github",
                "--model",
                MODEL,
                "--base-url",
                server.url,
                "--model.prices",
                json.dumps({MODEL: [0, 0]}),
                "--model.retries",
                json.dumps({"attempts": 1}),
                "--sandbox",
                "local",
                *extra,
            ]
        )
        requests = list(server.requests)
    captured = capsys.readouterr()
    return code, captured.out, captured.err, requests


def writes(fake: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake.requests if r.method != "GET"]


def test_an_issue_labelled_fix_me_gets_a_draft_pull_request(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workspace = checkout(bare, tmp_path / "workspace")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(workspace))
    event(monkeypatch, tmp_path, "issues", LABELED)
    code, stdout, stderr, requests = pgs_github(capsys, FIX, "--feedback", "none", "--force")

    assert code == 0, stderr
    assert "+    return text.upper()" in stdout
    assert (
        f"pgs: working on octo/textutil#7 (the label 'fix-me' added by @maintainer); using the "
        f"checkout at {workspace}" in stderr
    )
    problem = requests[0]["messages"][1]["content"]
    assert TITLE in problem and "Labels: bug, fix-me" in problem  # read from the API
    [pull] = fake.pulls
    assert pull["draft"] is True and (pull["head"], pull["base"]) == ("pgs/issue-7", "main")
    assert pull["body"].startswith("Fixes #7")
    assert "return text.upper()" in branch_file(bare, "pgs/issue-7", "textutil.py")
    assert writes(fake) == ["POST /api/v3/repos/octo/textutil/pulls"]
    assert f"opened a draft pull request: {pull['html_url']}" in stderr
    assert summary(tmp_path) == [
        f"pgs-agent opened a draft pull request for octo/textutil#7: {pull['html_url']}"
    ]
    # The run's files are where the workflow uploads them from; the checkout is untouched.
    run = tmp_path / "runner-temp" / "pgs" / "octo__textutil-7"
    assert (run / "octo__textutil-7.patch").read_text() == stdout
    assert not (run / "textutil").exists()  # no clone: the checkout was used
    status = subprocess.run(
        ["git", "-C", str(workspace), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""


def test_a_collaborators_mention_gets_the_patch_as_a_comment(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # actions/checkout with persist-credentials left on: the token is in .git/config, which
    # would be copied into the sandbox; pgs clones instead.
    header = "http.https://github.com/.extraheader=AUTHORIZATION: basic eC1hY2Nlc3M="
    workspace = checkout(bare, tmp_path / "workspace", header)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(workspace))
    event(monkeypatch, tmp_path, "issue_comment", COMMENTED)
    out = tmp_path / "out"
    code, stdout, stderr, _ = pgs_github(
        capsys, FIX, "--comment", "--feedback", "none", "--force", "--output-dir", str(out)
    )

    assert code == 0, stderr
    assert "@pgs-agent in a comment by @maintainer (COLLABORATOR)" in stderr
    assert "keeps a token in its git config" in stderr and "cloning instead" in stderr
    assert (out / "octo__textutil-7" / "textutil" / "textutil.py").is_file()  # the clone
    [comment] = fake.posted_comments
    assert comment["body"].startswith(MARKER)
    assert f"```diff\n{stdout.rstrip()}\n```" in comment["body"]
    assert fake.pulls == []
    # pgs's own comment, coming back as an event, starts nothing.
    own = edited(COMMENTED, comment__body=comment["body"], comment__id=1000)
    event(monkeypatch, tmp_path, "issue_comment", own)
    code, _, stderr, requests = pgs_github(capsys, FIX, "--comment")
    assert (code, requests) == (0, [])
    assert stderr.strip() == "pgs: nothing to do: the comment is pgs-agent's own"


@pytest.mark.parametrize(
    ("name", "payload", "line"),
    [
        (
            "issues",
            edited(LABELED, label__name="bug"),
            "pgs: nothing to do: the label added is 'bug', not 'fix-me' (--label)",
        ),
        (
            "issue_comment",
            edited(COMMENTED, comment__author_association="NONE", comment__user__login="eve"),
            "pgs: nothing to do: @eve is NONE on octo/textutil, not an owner, member or "
            "collaborator: pgs github acts on their @pgs-agent only with --allow-anyone",
        ),
        (
            "issue_comment",
            edited(COMMENTED, comment__user={"login": "renovate[bot]", "type": "Bot"}),
            "pgs: nothing to do: the comment is by the bot @renovate[bot]",
        ),
        (
            "schedule",
            {"schedule": "30 5 * * 1"},
            "pgs: nothing to do: the event is 'schedule': pgs github acts on 'issues' "
            "(labeled), 'issue_comment' (created) and 'workflow_dispatch' (input 'issue')",
        ),
    ],
    ids=["wrong label", "outsider", "bot", "scheduled"],
)
def test_events_not_acted_on_exit_0_with_one_line_and_touch_nothing(
    fake: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    payload: dict[str, Any],
    line: str,
) -> None:
    event(monkeypatch, tmp_path, name, payload)
    code, stdout, stderr, requests = pgs_github(capsys, FIX, "--feedback", "none", "--force")
    assert code == 0
    assert stderr.strip().splitlines() == [line]
    assert stdout == "" and requests == [] and fake.requests == []
    assert summary(tmp_path) == [line.replace("pgs: ", "pgs-agent: ", 1)]
    assert not (tmp_path / "runner-temp" / "pgs").exists()


def test_a_refused_patch_is_explained_on_the_issue(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The verdict rules of ``pgs run --open-pr``: a run that hit its step limit sends no pull
    request; ``pgs github`` says why on the issue, with the workflow run's link, no patch."""
    event(monkeypatch, tmp_path, "issues", LABELED)
    code, stdout, stderr, _ = pgs_github(
        capsys, FIX, "--feedback", "none", "--force", "--agent.step-limit", "1"
    )

    assert code == 1
    assert "+    return text.upper()" in stdout  # kept in the run's files
    assert "pgs: error: no pull request opened: the run ended with" in stderr
    assert fake.pulls == []
    [comment] = fake.posted_comments
    body = comment["body"]
    assert body.startswith(MARKER)
    assert "pgs-agent worked on this issue and opened no pull request: the run ended with" in body
    assert "https://github.com/octo/textutil/actions/runs/4242" in body
    assert "return text.upper()" not in body
    assert writes(fake) == ["POST /api/v3/repos/octo/textutil/issues/7/comments"]
    [line] = summary(tmp_path)
    assert line.startswith("pgs-agent sent nothing for octo/textutil#7: the run ended with")


def test_a_run_that_fails_says_so_on_the_issue(
    fake: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event(monkeypatch, tmp_path, "issues", LABELED)
    code, _, stderr, _ = pgs_github(
        capsys, [], "--feedback", "none", "--force"
    )  # the script is empty: the model server answers with an error

    assert code == 1, stderr
    [comment] = fake.posted_comments
    body = comment["body"]
    assert "pgs-agent could not finish its run on this issue: http://127.0.0.1:" in body
    assert "rejected the request (HTTP 400): script exhausted" in body  # pgs's error line
    assert "https://github.com/octo/textutil/actions/runs/4242" in body
    assert fake.pulls == []


def test_a_model_that_is_down_is_said_on_the_issue_before_the_clone(
    fake: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event(monkeypatch, tmp_path, "issues", LABELED)
    down = f"http://127.0.0.1:{closed_port()}/v1"
    argv = ["github", "--model", MODEL, "--base-url", down, "--sandbox", "local"]
    code = main([*argv, "--model.prices", json.dumps({MODEL: [0, 0]}), "--feedback", "none"])
    err = capsys.readouterr().err
    assert code == 2, err
    said = f"cannot reach the model's server at {down} (connection refused)"
    assert f"pgs: error: {said}" in err
    [comment] = fake.posted_comments
    assert f"pgs-agent could not start on this issue: {said}" in comment["body"]
    assert not (tmp_path / "runner-temp" / "pgs" / "octo__textutil-7").exists()  # no clone


def test_a_second_request_for_the_same_issue_fails_before_the_run(
    fake: FakeGitHub,
    bare: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The branch pgs/issue-N of an earlier run is there: the push would be refused after the
    whole run, so it is found first (for pgs run --open-pr too)."""
    event(monkeypatch, tmp_path, "issues", LABELED)
    code, _, stderr, _ = pgs_github(capsys, FIX, "--feedback", "none", "--force")
    assert code == 0, stderr
    event(monkeypatch, tmp_path, "issue_comment", COMMENTED)
    out = tmp_path / "again"
    code, _, stderr, requests = pgs_github(
        capsys, FIX, "--feedback", "none", "--force", "--output-dir", str(out)
    )
    errors = [line for line in stderr.splitlines() if line.startswith("pgs: error:")]
    assert code == 2 and requests == [], stderr
    assert errors == [
        "pgs: error: --open-pr pushes the branch pgs/issue-7, which octo/textutil already has "
        "(an earlier run's?): delete it there (closing its pull request first), then run again"
    ]
    assert not (out / "octo__textutil-7").exists()  # nothing cloned
    [comment] = fake.posted_comments  # the collaborator who asked learns why
    assert (
        "could not start on this issue: --open-pr pushes the branch pgs/issue-7"
        in (comment["body"])
    )
    url = fake.issue_url(REPO, NUMBER)
    priced = ["--model.prices", json.dumps({MODEL: [0, 0]})]
    code = main(
        ["run", "--issue", url, "--open-pr", "--model", MODEL, *priced, "--output-dir", str(out)]
    )
    assert code == 2 and "which octo/textutil already has" in capsys.readouterr().err
    assert len(fake.pulls) == 1 and len(fake.posted_comments) == 1


def test_a_broken_environment_is_one_error_line(
    fake: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def error(*extra: str) -> str:
        code, _, stderr, requests = pgs_github(capsys, FIX, "--feedback", "none", "--force", *extra)
        # At most the line saying which issue it works on, then the error.
        lines = [line for line in stderr.strip().splitlines() if "pgs: working on" not in line]
        assert code == 2, stderr
        assert len(lines) == 1 and lines[0].startswith("pgs: error: "), stderr
        assert requests == []
        return lines[0]

    assert "GITHUB_EVENT_PATH is not set" in error()
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(tmp_path / "missing.json"))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "issues")
    assert f"cannot read the event payload {tmp_path / 'missing.json'}" in error()
    (tmp_path / "bad.json").write_text("{not json")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(tmp_path / "bad.json"))
    assert "is not JSON" in error()
    event(monkeypatch, tmp_path, "issues", LABELED)
    assert "--trigger 'please fix' must be one word" in error("--trigger", "please fix")
    # On a real runner the local sandbox would put the model's commands beside the token.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert "--sandbox local runs the model's commands on the runner" in error()
    monkeypatch.delenv("GITHUB_ACTIONS")
    monkeypatch.delenv("GITHUB_TOKEN")
    line = error()
    assert "pgs github needs GITHUB_TOKEN" in line and "secrets.GITHUB_TOKEN" in line
    monkeypatch.setenv("GITHUB_TOKEN", "expired-token")
    assert "GitHub refused GITHUB_TOKEN (401" in error()  # before any clone or model call
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert fake.posted_comments == []  # with no token that works, nothing is said
    # Without a check there is nothing to send, as with pgs run --open-pr; the token works,
    # so the issue is told why nothing starts.
    code, _, stderr, requests = pgs_github(capsys, FIX, "--feedback", "none")
    assert (code, requests) == (2, [])
    assert [line for line in stderr.splitlines() if "pgs: error:" in line] == [
        "pgs: error: no pull request or comment without a check: --feedback none runs none; "
        "pass --force to send it anyway, or leave --feedback at its default"
    ]
    [comment] = fake.posted_comments
    assert "pgs-agent could not start on this issue: no pull request or comment" in comment["body"]
    assert fake.pulls == []
    assert not (tmp_path / "runner-temp" / "pgs" / "octo__textutil-7").exists()
