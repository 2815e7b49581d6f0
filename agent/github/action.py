"""``pgs github``: the GitHub Actions entry. Reads the event a workflow was started by
(``$GITHUB_EVENT_NAME``, the payload at ``$GITHUB_EVENT_PATH``) and says which issue to work
on, or why not.

Acted on, as the OpenHands resolver does: an ``issues`` event with action ``labeled`` whose
label is :attr:`ActionRules.label` (default ``fix-me``), and an ``issue_comment`` event with
action ``created`` whose text mentions :attr:`ActionRules.trigger` (default ``@pgs-agent``);
and ``workflow_dispatch`` (the workflow run by hand, which needs write access) with the input
``issue``, to run again.
Everything else is :class:`Skipped` (``pgs github`` exits 0 with one line saying why, so the
workflow stays green).

Anyone may comment on a public issue, and a comment starts a run that costs model money and
pushes a branch with the repository's token, so (unless ``allow_anyone``):

- a comment counts only from an author GitHub calls ``OWNER``, ``MEMBER`` or
  ``COLLABORATOR`` (the payload's ``author_association``);
- a label counts when someone with triage access put it on; a label that came with the issue
  from its own author (an issue template's ``labels:``), an author without such an
  association, does not;
- comments by bots (``user.type`` ``Bot``) and pgs's own comments (:data:`MARKER`) never
  count, so pgs cannot start itself in a loop (with a personal token its comments are not a
  bot's);
- the trigger counts only as a word of the comment's own text: not inside code (`` ` `` or a
  fenced block), not in a quoted reply (``>``), not as part of a longer name
  (``@pgs-agent-dev``);
- comments on pull requests are skipped: pgs fixes issues, and the pull request's branch may
  come from a fork;
- edited comments are skipped (``created`` only): an edit would start the same request twice.

The issue's own text and its other comments still come from anyone: they are the problem
statement the model reads, contained by the sandbox (docs/threat-model.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core.loop import RunResult
from agent.core.secrets import Redactor
from agent.errors import GitHubError, InputError, Skipped
from agent.github.client import GitHub, IssueRef
from agent.github.pr import MARKER, OpenPRHook
from agent.run.hooks import RunHook
from agent.run.outputs import RunPaths

DEFAULT_LABEL = "fix-me"
DEFAULT_TRIGGER = "@pgs-agent"
#: The ``author_association`` values of people with write access to the repository.
TRUSTED = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
EVENTS = "'issues' (labeled), 'issue_comment' (created) and 'workflow_dispatch' (input 'issue')"


@dataclass(frozen=True)
class ActionRules:
    """Which events start a run (``pgs github --label/--trigger/--allow-anyone``)."""

    label: str = DEFAULT_LABEL
    trigger: str = DEFAULT_TRIGGER
    allow_anyone: bool = False

    def check(self) -> None:
        if not self.label.strip():
            raise InputError("--label is empty: give the label that starts a run (e.g. fix-me)")
        if not self.trigger.strip() or any(c.isspace() for c in self.trigger):
            raise InputError(
                f"--trigger {self.trigger!r} must be one word without spaces (e.g. @pgs-agent)"
            )


@dataclass(frozen=True)
class Trigger:
    """The issue an event asks pgs to work on, and who asked how (for the log)."""

    ref: IssueRef
    reason: str


def read_event(environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """(event name, payload) as GitHub Actions hands them to a step."""
    environ = os.environ if environ is None else environ
    where = "; run it in a GitHub Actions workflow (docs/github-action.yml), or use pgs run"
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        raise InputError(f"GITHUB_EVENT_PATH is not set: pgs github reads the event{where}")
    name = environ.get("GITHUB_EVENT_NAME")
    if not name:
        raise InputError(f"GITHUB_EVENT_NAME is not set: pgs github needs the event's name{where}")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read the event payload {path} ({e.strerror or e})") from None
    try:
        payload = json.loads(text)
    except ValueError as e:
        raise InputError(f"the event payload {path} is not JSON ({e})") from None
    if not isinstance(payload, dict):
        raise InputError(f"the event payload {path} is not a JSON object")
    return name, payload


def _object(payload: Mapping[str, Any], key: str, what: str) -> dict[str, Any]:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise InputError(f"the {what} event's payload has no '{key}' object: not GitHub's payload")
    return value


def _login(user: Any) -> str:
    return str(user.get("login") or "someone") if isinstance(user, dict) else "someone"


def _ref(
    payload: Mapping[str, Any], issue: Mapping[str, Any], environ: Mapping[str, str]
) -> IssueRef:
    repo = payload.get("repository")
    full_name = (repo.get("full_name") if isinstance(repo, dict) else None) or environ.get(
        "GITHUB_REPOSITORY"
    )
    if not isinstance(full_name, str) or full_name.count("/") != 1:
        raise InputError("the event names no repository (repository.full_name, GITHUB_REPOSITORY)")
    running = environ.get("GITHUB_REPOSITORY")
    if running and running.lower() != full_name.lower():
        raise InputError(
            f"the event is about {full_name} but the workflow runs in {running}: pgs github "
            "works on the repository whose workflow it runs in"
        )
    number = issue.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise InputError("the event's issue has no number: not GitHub's payload")
    owner, name = full_name.split("/")
    return IssueRef(owner, name, number)


#: Code (fenced blocks, inline spans), HTML comments: where a trigger does not count.
_NOT_TEXT = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`|<!--.*?(?:-->|\Z)", re.S)


def mentions(body: str, trigger: str) -> bool:
    """Whether ``trigger`` is a word of ``body``'s own text (case-insensitive, as GitHub's
    @mentions): not inside code, an HTML comment or a quoted line, not part of a longer name."""
    text = _NOT_TEXT.sub(" ", body.replace("\r\n", "\n"))
    own = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))
    word = re.compile(rf"(?<![\w@./-]){re.escape(trigger)}(?![\w-])", re.I)
    return bool(word.search(own))


def decide(
    name: str,
    payload: Mapping[str, Any],
    rules: ActionRules,
    environ: Mapping[str, str] | None = None,
) -> Trigger:
    """The issue this event asks pgs to fix; :class:`Skipped` when it asks nothing of pgs (or
    someone who may not ask did), :class:`InputError` for a payload that is not GitHub's."""
    environ = os.environ if environ is None else environ
    action = payload.get("action")
    if name == "issues":
        if action != "labeled":
            raise Skipped(f"the issue was {action}, not labeled")
        label = _object(payload, "label", name).get("name") or ""
        if str(label).casefold() != rules.label.casefold():
            raise Skipped(f"the label added is {label!r}, not {rules.label!r} (--label)")
        issue = _object(payload, "issue", name)
        ref = _ref(payload, issue, environ)
        sender, author = _login(payload.get("sender")), _login(issue.get("user"))
        association = str(issue.get("author_association") or "NONE")
        # Only triage access labels another's issue; an author without it labels their own
        # issue only as they open it (an issue template's labels).
        own = sender.lower() == author.lower()
        if own and association not in TRUSTED and not rules.allow_anyone:
            raise Skipped(
                f"the label {label!r} came with the issue from its author @{author}, who is "
                f"{association}, not an owner, member or collaborator of {ref.full_name}: "
                "a maintainer must add it (or pass --allow-anyone)"
            )
        why = f"the label {label!r} added by @{sender}"
    elif name == "issue_comment":
        if action != "created":
            raise Skipped(f"the comment was {action}, not created")
        issue = _object(payload, "issue", name)
        comment = _object(payload, "comment", name)
        ref = _ref(payload, issue, environ)
        if issue.get("pull_request"):
            raise Skipped(f"{ref} is a pull request: pgs github works on issues")
        user = comment.get("user")
        login = _login(user)
        if isinstance(user, dict) and user.get("type") == "Bot":
            raise Skipped(f"the comment is by the bot @{login}")
        body = str(comment.get("body") or "")
        if MARKER in body:
            raise Skipped("the comment is pgs-agent's own")
        if not mentions(body, rules.trigger):
            raise Skipped(f"the comment does not mention {rules.trigger} (--trigger)")
        association = str(comment.get("author_association") or "NONE")
        if association not in TRUSTED and not rules.allow_anyone:
            raise Skipped(
                f"@{login} is {association} on {ref.full_name}, not an owner, member or "
                f"collaborator: pgs github acts on their {rules.trigger} only with --allow-anyone"
            )
        why = f"{rules.trigger} in a comment by @{login} ({association})"
    elif name == "workflow_dispatch":  # run by hand (write access): the issue is an input
        inputs = payload.get("inputs")
        number = (
            str(inputs.get("issue") or "").strip().lstrip("#") if isinstance(inputs, dict) else ""
        )
        if not number.isdigit() or int(number) < 1:
            raise InputError(
                f"the workflow was run by hand with issue {number!r}: give the number of the "
                "issue to fix (the workflow_dispatch input 'issue')"
            )
        issue = {"number": int(number)}  # its state is read from the API
        ref = _ref(payload, issue, environ)
        why = f"run by hand by @{_login(payload.get('sender'))}"
    else:
        raise Skipped(f"the event is {name!r}: pgs github acts on {EVENTS}")
    if issue.get("state") == "closed":
        raise Skipped(f"the issue {ref} is closed")
    return Trigger(ref, why)


def run_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The Actions run's page, where its artifacts are."""
    environ = os.environ if environ is None else environ
    server, repo, run = (
        environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run}" if server and repo and run else None


def step_summary(text: str, environ: Mapping[str, str] | None = None) -> None:
    """Add ``text`` as a line of the job's summary page (``$GITHUB_STEP_SUMMARY``), when
    there is one; redacted of the host's secret values."""
    environ = os.environ if environ is None else environ
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(Redactor.from_env().redact(text) + "\n")
    except OSError as e:
        print(f"pgs: warning: cannot write the job summary {path}: {e}", file=sys.stderr)


def notice(what: str, environ: Mapping[str, str] | None = None) -> str:
    """The comment pgs leaves on the issue when it sends no patch: why, and where the run is.
    Marked (:data:`MARKER`) and redacted of the host's secret values."""
    url = run_url(environ)
    where = (
        f"\n\nThe trajectory and the patch are in the artifacts of the workflow run: {url}"
        if url
        else ""
    )
    return Redactor.from_env().redact(f"{MARKER}\npgs-agent {what}.{where}")


class NoticeHook(RunHook):
    """After :class:`~agent.github.pr.OpenPRHook`: when it refused the patch, a comment on the
    issue saying so (without the patch), so whoever asked learns why no pull request came."""

    def __init__(self, sender: OpenPRHook) -> None:
        self.sender = sender
        self.url: str | None = None

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        if self.sender.refused:
            why = self.sender.refused.removesuffix(": pass --force anyway")
            pr = self.sender.github.send == "pr"
            what = "opened no pull request" if pr else "posted no patch"
            self.post(f"worked on this issue and {what}: {why}")

    def post(self, what: str) -> None:
        self.url = post_notice(self.sender.client, self.sender.issue.ref, what)


def post_notice(client: GitHub, ref: IssueRef, what: str) -> str | None:
    """Comment :func:`notice` on the issue; its URL. A failure is a warning, and None: what
    ended the run stays what the user sees."""
    try:
        posted = client.create_comment(ref, notice(what))
    except GitHubError as e:
        print(f"pgs: warning: could not say so on the issue: {e}", file=sys.stderr)
        return None
    return str(posted.get("html_url") or "")


def workspace_repo(ref: IssueRef, workspace: str | None) -> tuple[Path | None, str]:
    """The checkout at ``$GITHUB_WORKSPACE`` when it is ``ref``'s repository and holds no token,
    else None (pgs clones); and a line saying which."""
    if not workspace or not (Path(workspace) / ".git").exists():
        return None, "no checkout at GITHUB_WORKSPACE: cloning the repository"
    path = Path(workspace)

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)

    origin = git("remote", "get-url", "origin").stdout.strip()
    tail = origin.rstrip("/").removesuffix(".git").lower()
    if not tail.endswith("/" + ref.full_name.lower()) and not tail.endswith(
        ":" + ref.full_name.lower()
    ):
        return None, f"the checkout at {path} is not of {ref.full_name}: cloning it"
    # actions/checkout keeps the token in the checkout's git config unless told not to; the
    # whole checkout, .git included, is copied into the sandbox, where the model could read it.
    kept = git("config", "--includes", "--get-regexp", r"^http\..*extraheader$").returncode == 0
    if kept or re.match(r"^[a-z]+://[^/@]+@", origin, re.I):
        return None, (
            f"the checkout at {path} keeps a token in its git config (actions/checkout's "
            "persist-credentials), which the sandbox would see: cloning instead (set "
            "persist-credentials: false)"
        )
    return path, f"using the checkout at {path}"
