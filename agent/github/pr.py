"""``pgs run --issue https://github.com/OWNER/REPO/issues/N``: from a GitHub issue to a patch,
and on request to a draft pull request (``--open-pr``) or a comment on the issue (``--comment``).

:func:`github_task` turns the URL into a task (the issue fetched, the repository cloned);
:class:`OpenPRHook`, a run hook (:mod:`agent.run.hooks`) configured by a :class:`GitHubConfig`,
sends the patch once the run is done. Without ``send`` nothing is sent anywhere: the API only
gets GETs. A pull request is opened only for a run that submitted a patch the PGS check passed
(:func:`refusal`); ``force`` (``--force``) overrides the check (``--feedback none`` runs none),
never an empty or unsubmitted patch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from agent.core.loop import RunResult
from agent.errors import InputError, print_error
from agent.github.client import (
    GitHub,
    Issue,
    IssueRef,
    fetch_issue,
    looks_like_url,
    parse_issue_url,
    problem_statement,
)
from agent.github.git import clone, commit_patch, push
from agent.record.check import CheckReport
from agent.record.pgs import PGSRecord, ValidationRecord
from agent.run.config import RunConfig
from agent.run.hooks import RunHook
from agent.run.outputs import RunPaths, usage
from agent.run.task import Task, check_repo
from envs.images import RepoImageSpec

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
#: GitHub refuses comments and PR bodies longer than 65536 characters.
BODY_LIMIT = 60000
#: In every comment pgs posts (an HTML comment: not shown), so that ``pgs github`` never takes
#: one of its own comments for a request (agent/github/action.py).
MARKER = "<!-- pgs-agent -->"


class GitHubConfig(BaseModel):
    """What ``pgs run`` does with a GitHub issue: where it clones, and whether a pull request
    or a comment follows the run (the flags of its "GitHub issues" group)."""

    model_config = ConfigDict(extra="forbid")
    send: Literal["nothing", "pr", "comment"] = Field(
        "nothing", description="after the run: open a draft PR (--open-pr), or comment"
    )
    fork: str | None = Field(None, description="OWNER/REPO or git URL that --open-pr pushes to")
    base_commit: str | None = Field(None, description="work at this commit of the clone")
    workdir: Path | None = Field(None, description="where the repository is cloned")
    force: bool = Field(
        False, description="work on a closed or locked issue; send a patch not checked as passed"
    )

    def url_only_flags(self) -> list[str]:
        """The flags given that only mean something with a GitHub issue URL."""
        given = (
            ("--open-pr", self.send == "pr"),
            ("--comment", self.send == "comment"),
            ("--fork", self.fork),
            ("--base-commit", self.base_commit),
            ("--workdir", self.workdir),
        )
        return [flag for flag, value in given if value]


def check_local_flags(github: GitHubConfig) -> None:
    """The GitHub-only flags, given to a run on a local issue."""
    used = github.url_only_flags()
    if used:
        raise InputError(
            f"{used[0]} needs a GitHub issue URL as --issue "
            "(https://github.com/OWNER/REPO/issues/N)"
        )


def refusal(result: RunResult, *, force: bool) -> str | None:
    """Why no pull request may be opened for this run, or None."""
    if not result.submission.strip():
        return "the run produced no patch"
    if result.exit_status != "submitted":
        return f"the run ended with {result.exit_status}, not a submitted patch"
    redacted = result.trajectory.info.patch_redacted
    if redacted:
        return f"the patch held the value of {', '.join(redacted)} (written as ***)"
    pgs = result.trajectory.record.pgs_record
    if force:
        return None
    if pgs.mode == "none":
        return "no check ran (--feedback none): pass --force anyway"
    if pgs.verdict != "passed":
        why = pgs.verdict_reason or "no issue property passed"
        return f"the PGS verdict is {pgs.verdict}, not passed ({why}): pass --force anyway"
    if pgs.sealed is False:  # like tests-only: what the Generator did can forge the evidence
        return (
            "the PGS verdict is passed, but the check ran in the Generator's own sandbox "
            "(--sandbox local: not sealed), where what it did outside the patch can make a "
            "check pass: run with --sandbox docker, or pass --force anyway"
        )
    return None


def github_task(
    url: str,
    github: GitHubConfig,
    config: RunConfig,
    output_dir: Path,
    *,
    repo: Path | None = None,
    allow_dirty: bool = False,
    image_spec: RepoImageSpec | None = None,
) -> tuple[Task, OpenPRHook]:
    """URL → issue → clone (or ``repo``) → the task, and the hook that sends the patch
    (:class:`OpenPRHook`; it sends nothing unless ``github.send`` says so)."""
    if not looks_like_url(url):
        raise InputError(
            "without --repo, --issue must be a GitHub issue URL "
            f"(https://github.com/OWNER/REPO/issues/N), not {url[:60]!r}"
        )
    ref = parse_issue_url(url)
    if github.send != "nothing" and config.pgs.feedback == "none" and not github.force:
        raise InputError(
            "no pull request or comment without a check: --feedback none runs none; pass "
            "--force to send it anyway, or leave --feedback at its default"
        )
    if github.fork and github.send != "pr":
        raise InputError("--fork is where --open-pr pushes: pass --open-pr too")
    if repo is not None and (github.workdir or github.base_commit):
        raise InputError("--workdir and --base-commit choose the clone pgs makes: omit --repo")
    token = os.environ.get("GITHUB_TOKEN") or None
    client = GitHub.from_env()
    check_access(client, ref, github)  # before the run, not after it
    issue = fetch_issue(client, ref)
    _check_open(issue, force=github.force)
    instance_id = f"{ref.owner}__{ref.name}-{ref.number}"
    if repo is not None:
        repo = check_repo(repo, allow_dirty=allow_dirty)
    else:
        dest = github.workdir or output_dir / instance_id / ref.name
        repo = clone(issue.repo, dest, commit=github.base_commit, token=token)
        err.print(f"cloned {issue.repo.clone_url} into {repo}")
    task = Task(
        instance_id=instance_id,
        problem_statement=problem_statement(issue),
        repo=repo,
        image_spec=image_spec,
    )
    return task, OpenPRHook(github, client, issue, token)


def check_access(client: GitHub, ref: IssueRef, github: GitHubConfig) -> None:
    """What ``--open-pr`` / ``--comment`` will need at the end, checked before any clone,
    image or model work: a token GitHub accepts, and for ``--open-pr`` push access to the
    repository the branch goes to (the issue's, or ``--fork`` OWNER/REPO) and no branch
    ``pgs/issue-N`` there yet (the push would be refused)."""
    if github.send == "nothing":
        return
    flag = "--open-pr" if github.send == "pr" else "--comment"
    if not client.token:
        what = "push a branch to" if github.send == "pr" else "comment on"
        raise InputError(
            f"{flag} needs GITHUB_TOKEN, a token that may {what} {ref.full_name}: set it, or "
            f"drop {flag}"
        )
    target = ref.full_name
    if github.send == "pr" and github.fork and _is_full_name(github.fork):
        target = github.fork
    repo = client.repository(target)  # a refused token: one GitHubError line
    if github.send == "pr" and repo.can_push is False:
        raise InputError(
            f"GITHUB_TOKEN may not push to {target}, where --open-pr pushes the branch: give "
            "the token write access, or pass --fork OWNER/REPO of a fork it can push to"
        )
    branch = branch_for(ref)
    known = not github.fork or _is_full_name(github.fork)  # not a fork's git URL
    if github.send == "pr" and known and client.branch_exists(target, branch):
        raise InputError(
            f"--open-pr pushes the branch {branch}, which {target} already has (an earlier "
            "run's?): delete it there (closing its pull request first), then run again"
        )


def _is_full_name(fork: str) -> bool:
    """``--fork`` as OWNER/REPO (not a git URL or a local path)."""
    return not looks_like_url(fork) and fork.count("/") == 1 and not Path(fork).exists()


class OpenPRHook(RunHook):
    """After the run: a draft pull request (``send="pr"``) or a comment on the issue
    (``"comment"``), for a patch :func:`refusal` lets through. A refusal is one ``pgs: error:``
    line and :attr:`refused` holds why (``pgs run`` then exits with 1)."""

    def __init__(
        self, github: GitHubConfig, client: GitHub, issue: Issue, token: str | None = None
    ) -> None:
        self.github = github
        self.client = client
        self.issue = issue
        self.token = token
        self.refused: str | None = None
        #: The pull request's or the comment's URL, once sent.
        self.url: str | None = None
        self._task: Task | None = None
        self._config: RunConfig | None = None

    def on_start(self, task: Task, config: RunConfig) -> None:
        self._task, self._config = task, config

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        if self.github.send == "nothing" or self._task is None or self._config is None:
            return
        what = "no pull request opened" if self.github.send == "pr" else "no comment posted"
        self.refused = refusal(result, force=self.github.force)
        if self.refused:
            print_error(f"{what}: {self.refused}; the patch is in {paths.patch}")
        elif self.github.send == "pr":
            self.url = open_pull_request(
                self.client,
                self.issue,
                self._task.repo,
                result,
                self.github.fork,
                self.token,
                self._config,
            )
            err.print(f"opened a draft pull request: {self.url}")
        else:
            posted = self.client.create_comment(self.issue.ref, comment_body(self.issue, result))
            self.url = str(posted.get("html_url", self.issue.ref))
            err.print(f"posted the patch on the issue: {self.url}")


def _check_open(issue: Issue, *, force: bool) -> None:
    problems = [
        w for w, bad in (("closed", issue.state != "open"), ("locked", issue.locked)) if bad
    ]
    if not problems:
        return
    what = " and ".join(problems)
    if not force:
        raise InputError(f"the issue {issue.ref} is {what}: pass --force to work on it anyway")
    err.print(f"pgs: warning: the issue {issue.ref} is {what}; working on it (--force)")


# -- the pull request ----------------------------------------------------------------------------


def branch_for(ref: IssueRef) -> str:
    return f"pgs/issue-{ref.number}"


def branch_name(issue: Issue) -> str:
    return branch_for(issue.ref)


def _fork_target(client: GitHub, fork: str) -> tuple[str, str]:
    """(push URL, owner) of ``--fork``: OWNER/REPO via the API, else a remote URL or path
    whose last two parts are OWNER/REPO."""
    if _is_full_name(fork):
        repo = client.repository(fork)
        return repo.clone_url, repo.full_name.split("/")[0]
    parts = [p for p in fork.replace(":", "/").rstrip("/").split("/") if p]
    if len(parts) < 2:
        raise InputError(f"--fork {fork!r}: give OWNER/REPO or the fork's git URL")
    return fork, parts[-2]


def open_pull_request(
    client: GitHub,
    issue: Issue,
    repo: Path,
    result: RunResult,
    fork: str | None,
    token: str | None,
    config: RunConfig,
) -> str:
    """Commit the patch on a branch, push it, open a draft PR; returns the PR's URL."""
    branch = branch_name(issue)
    if fork:
        remote, owner = _fork_target(client, fork)
        head = f"{owner}:{branch}"
    else:
        remote, head = issue.repo.clone_url, branch
    message = f"Fix #{issue.ref.number}: {issue.title}\n\nMade by pgs-agent."
    sha = commit_patch(repo, result.submission, message)
    err.print(f"pushing {branch} to {remote}")
    push(repo, remote, sha, branch, token)
    pull = client.create_pull(
        issue.repo,
        title=f"Fix #{issue.ref.number}: {issue.title}",
        head=head,
        base=issue.repo.default_branch,
        body=pr_body(issue, result, config),
    )
    return str(pull.get("html_url") or pull.get("url") or "")


def change_summary(patch: str) -> list[str]:
    """Markdown lines: one per file with its +/- counts, then the totals."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return ["(the patch could not be summarised)"]
    lines = ["| file | + | - |", "|---|---:|---:|"]
    for f in files:
        name = f.path + (" (new)" if f.is_added_file else " (deleted)" if f.is_removed_file else "")
        lines.append(f"| `{name}` | {f.added} | {f.removed} |")
    added = sum(f.added for f in files)
    removed = sum(f.removed for f in files)
    s = "s" if len(files) != 1 else ""
    lines.append(f"\n{len(files)} file{s} changed, +{added} -{removed} lines.")
    return lines


def _final_report(pgs: PGSRecord) -> CheckReport:
    return (pgs.rounds[-1].report if pgs.rounds else None) or CheckReport()


def evidence(result: RunResult) -> list[str]:
    """Markdown lines: the Tester's properties and whether they pass, the tests that ran."""
    pgs = result.trajectory.record.pgs_record
    if pgs.mode == "none":
        return ["No check ran (`--feedback none`): this patch was not tested by pgs."]
    rounds = pgs.rounds
    feedback = len(pgs.feedback_rounds())
    lines = [
        f"PGS (`{pgs.mode}`) verdict: **{pgs.verdict}**, after {len(rounds)} "
        f"checked candidate{'s' if len(rounds) != 1 else ''} and {feedback} feedback "
        f"message{'s' if feedback != 1 else ''}.",
        "",
        f"Why: {pgs.verdict_reason or 'not recorded'}. {VERDICTS}",
        *guarded_lines(pgs),
    ]
    if pgs.sealed is False:
        lines += [
            "",
            "**Not sealed:** the check ran in the Generator's own sandbox (`--sandbox local`), "
            "not in a fresh one: what it did outside the patch could have changed the result.",
        ]
    results = _final_report(pgs).results
    outcome = {r.nodeid: r for r in results}
    validation = pgs.validation or ValidationRecord()
    if validation.kept or validation.dropped:
        lines += ["", "Properties the Tester wrote (validated on the original code first):", ""]
        for nodeid in validation.kept:
            r = outcome.get(nodeid)
            mark = "not run" if r is None else "passes" if r.outcome == "passed" else "FAILS"
            kind = f"{r.kind} property" if r is not None else "property"
            rule = f": {r.rule}" if r is not None and r.rule else ""
            lines.append(f"- `{nodeid}` ({kind}{rule}) — {mark} on the patch")
        for d in validation.dropped:
            lines.append(f"- `{d.nodeid}` — dropped: {d.reason}")
    elif pgs.properties is not None:
        lines += ["", "The Tester wrote no property that survived validation."]
    tests = [r for r in results if r.kind == "repo"]
    if tests:
        passed = sum(1 for r in tests if r.outcome == "passed")
        lines += ["", f"Repository tests run on the patch: {len(tests)} ({passed} passed)", ""]
        lines += [f"- `{r.nodeid}` {r.outcome}" for r in tests[:30]]
        if len(tests) > 30:
            lines.append(f"- ... and {len(tests) - 30} more")
    else:
        lines += ["", "No repository test ran on the patch."]
    return lines


def guarded_lines(pgs: PGSRecord) -> list[str]:
    """Markdown lines naming what the check did not take from the working tree: property
    files the Generator changed, test files the patch changes (any round)."""
    tampered = {(c.path, c.change) for r in pgs.rounds for c in r.tampered}
    changed = {(c.path, c.change) for r in pgs.rounds for c in r.tests_changed}
    lines = []
    if tampered:
        lines += [
            "",
            "**The Generator changed the Tester's property files** (every check ran "
            "the Tester's own version):",
            "",
        ]
        lines += [f"- `{path}` ({change})" for path, change in sorted(tampered)]
    if changed:
        lines += [
            "",
            "**The patch changes test files the check relies on** (the check ran "
            "them as at the base commit; the patch's version was never counted):",
            "",
        ]
        lines += [f"- `{path}` ({change})" for path, change in sorted(changed)]
    return lines


#: What each verdict means, in the PR body.
VERDICTS = (
    "(`passed`: a Tester property that fails on the original code passes on the patch and "
    "nothing that passed before fails; `partial`: the same, but fewer than half of the related "
    "test files ran; `tests-only`: no issue property took part, the related tests pass; "
    "`tests-changed`: the patch changes a test file the check relies on, which ran as at the "
    "base commit; `unchecked`: nothing ran; `failed`: a check fails on the patch.)"
)


def run_line(result: RunResult, config: RunConfig) -> str:
    stats = usage(result)  # the Generator's and the Tester's
    tokens = int(stats["tokens_sent"] + stats["tokens_received"])
    return (
        f"Model `{config.model.name}`; exit status `{result.exit_status}`; {result.steps} steps; "
        f"{tokens} tokens; cost ${stats['instance_cost']:.4f} "
        f"(of which the Tester ${stats['tester_cost']:.4f})."
    )


def pr_body(issue: Issue, result: RunResult, config: RunConfig) -> str:
    lines = [
        f"Fixes #{issue.ref.number}",
        "",
        f"A draft made by pgs-agent for #{issue.ref.number} ({issue.title}). "
        "Review it before merging.",
        "",
        "### What changed",
        "",
        *change_summary(result.submission),
        "",
        "### Evidence",
        "",
        *evidence(result),
        "",
        "### Run",
        "",
        run_line(result, config),
    ]
    return result.trajectory.redactor.redact("\n".join(lines))[:BODY_LIMIT]


def comment_body(issue: Issue, result: RunResult) -> str:
    pgs = result.trajectory.record.pgs_record
    check = (
        "not checked (`--feedback none`)"
        if pgs.mode == "none"
        else f"PGS verdict: **{pgs.verdict}**: {pgs.verdict_reason}"
    )
    patch = result.submission
    head = (
        f"pgs-agent proposes this patch for #{issue.ref.number} ({check}; exit status "
        f"`{result.exit_status}`, {result.steps} steps):"
    )
    room = BODY_LIMIT - len(head) - 200
    cut = "" if len(patch) <= room else "\n\n(the patch is cut: it is longer than a comment)"
    body = f"{MARKER}\n{head}\n\n```diff\n{patch[:room].rstrip()}\n```{cut}"
    return result.trajectory.redactor.redact(body)
