"""``pgs run --issue https://github.com/OWNER/REPO/issues/N``: from a GitHub issue to a patch,
and on request to a draft pull request (``--open-pr``) or a comment on the issue (``--comment``).

Without either flag nothing is sent anywhere: the API only gets GETs. A pull request is opened
only for a run that submitted a patch the PGS check passed (:func:`refusal`); ``--force``
overrides the check (``--feedback none`` runs none), never an empty or unsubmitted patch.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from agent.core.config import RunConfig
from agent.core.loop import RunResult
from agent.core.run import InputError, Task, apply_patch, check_repo, output_paths, usage
from agent.github.client import (
    GitHub,
    Issue,
    clone,
    commit_patch,
    fetch_issue,
    looks_like_url,
    parse_issue_url,
    problem_statement,
    push,
)
from envs.cli import print_error
from envs.docker_sandbox import DockerSandboxConfig
from envs.images import RepoImageSpec

err = Console(stderr=True, highlight=False, soft_wrap=True)
#: GitHub refuses comments and PR bodies longer than 65536 characters.
BODY_LIMIT = 60000

RunFn = Callable[[Task, RunConfig, Path], RunResult]
ReportFn = Callable[[RunResult, dict[str, Path]], None]


def add_github_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "GitHub issues",
        "with --issue https://github.com/OWNER/REPO/issues/N (GITHUB_TOKEN for private "
        "repositories and for writing; GITHUB_API_URL for GitHub Enterprise)",
    )
    send = group.add_mutually_exclusive_group()
    send.add_argument(
        "--open-pr",
        action="store_true",
        help="push branch pgs/issue-N and open a draft pull request (checked patches only)",
    )
    send.add_argument(
        "--comment", action="store_true", help="post the patch as a comment on the issue"
    )
    group.add_argument(
        "--fork",
        metavar="OWNER/REPO|URL",
        help="push the branch to this fork (a GitHub repository or a git remote URL)",
    )
    group.add_argument(
        "--base-commit", metavar="SHA", help="work at this commit (default: the default branch)"
    )
    group.add_argument(
        "--workdir",
        type=Path,
        help="where the repository is cloned (default: OUTPUT_DIR/<id>/<repository name>)",
    )
    group.add_argument(
        "--force",
        action="store_true",
        help="work on a closed or locked issue; open a PR or post a comment for a patch whose "
        "PGS verdict is not passed",
    )
    parser.add_argument(
        "--setup",
        action="append",
        metavar="CMD",
        help="install command for the repository image, run in /repo while it is built (with "
        "the host's network; repeatable; replaces the detected install)",
    )


def is_github_run(args: argparse.Namespace) -> bool:
    return args.repo is None or looks_like_url(args.issue)


def check_local_flags(args: argparse.Namespace) -> None:
    """The GitHub-only flags, given to a run on a local issue."""
    used = [
        flag
        for flag, value in (
            ("--open-pr", args.open_pr),
            ("--comment", args.comment),
            ("--fork", args.fork),
            ("--base-commit", args.base_commit),
            ("--workdir", args.workdir),
        )
        if value
    ]
    if used:
        raise InputError(
            f"{used[0]} needs a GitHub issue URL as --issue "
            "(https://github.com/OWNER/REPO/issues/N)"
        )


def setup_spec(setup: list[str] | None, config: RunConfig) -> RepoImageSpec | None:
    """``--setup`` commands as the repository image's install step, in place of the
    detected one (the wheelhouse is still filled from the detected requirements)."""
    if not setup:
        return None
    sandbox = config.sandbox
    if not isinstance(sandbox, DockerSandboxConfig):
        raise InputError("--setup installs into a Docker image: it needs --sandbox docker")
    if sandbox.image:
        raise InputError(
            f"--setup installs into the repository image pgs builds, but --image {sandbox.image} "
            "is given: drop one of them"
        )
    # The image adds pytest and Hypothesis for the Tester after these commands.
    return RepoImageSpec.checked({"install": list(setup)}, source="--setup")


def refusal(result: RunResult, *, force: bool) -> str | None:
    """Why no pull request may be opened for this run, or None."""
    if not result.submission.strip():
        return "the run produced no patch"
    if result.exit_status != "submitted":
        return f"the run ended with {result.exit_status}, not a submitted patch"
    pgs = result.trajectory.extra.get("pgs") or {}
    if force:
        return None
    if pgs.get("mode", "none") == "none":
        return "no check ran (--feedback none): pass --force anyway"
    verdict = pgs.get("verdict", "unchecked")
    if verdict != "passed":
        why = pgs.get("verdict_reason") or "no issue property passed"
        return f"the PGS verdict is {verdict}, not passed ({why}): pass --force anyway"
    return None


def run_github_issue(
    args: argparse.Namespace,
    config: RunConfig,
    output_dir: Path,
    image_spec: RepoImageSpec | None,
    run: RunFn,
    report: ReportFn,
) -> int:
    """The whole path: URL → issue → clone → run → patch → (PR | comment)."""
    if not looks_like_url(args.issue):
        raise InputError(
            "without --repo, --issue must be a GitHub issue URL "
            f"(https://github.com/OWNER/REPO/issues/N), not {args.issue[:60]!r}"
        )
    ref = parse_issue_url(args.issue)
    if (args.open_pr or args.comment) and config.pgs.feedback == "none" and not args.force:
        raise InputError(
            "no pull request or comment without a check: --feedback none runs none; pass "
            "--force to send it anyway, or leave --feedback at its default"
        )
    if args.fork and not args.open_pr:
        raise InputError("--fork is where --open-pr pushes: pass --open-pr too")
    if args.repo is not None and (args.workdir or args.base_commit):
        raise InputError("--workdir and --base-commit choose the clone pgs makes: omit --repo")
    token = os.environ.get("GITHUB_TOKEN") or None
    client = GitHub.from_env()
    issue = fetch_issue(client, ref)
    _check_open(issue, force=args.force)
    instance_id = f"{ref.owner}__{ref.name}-{ref.number}"
    if args.repo is not None:
        repo = check_repo(args.repo, allow_dirty=args.allow_dirty)
    else:
        dest = args.workdir or output_dir / instance_id / ref.name
        repo = clone(issue.repo, dest, commit=args.base_commit, token=token)
        err.print(f"cloned {issue.repo.clone_url} into {repo}")
    task = Task(instance_id, problem_statement(issue), repo, image_spec=image_spec)
    result = run(task, config, output_dir)
    paths = output_paths(output_dir, instance_id)
    report(result, paths)
    code = 0 if result.exit_status == "submitted" else 1
    if args.open_pr:
        reason = refusal(result, force=args.force)
        if reason:
            print_error(f"no pull request opened: {reason}; the patch is in {paths['patch']}")
            return 1
        url = open_pull_request(client, issue, repo, result, args.fork, token, config)
        err.print(f"opened a draft pull request: {url}")
    elif args.comment:
        reason = refusal(result, force=args.force)
        if reason:
            print_error(f"no comment posted: {reason}; the patch is in {paths['patch']}")
            return 1
        posted = client.create_comment(ref, comment_body(issue, result))
        err.print(f"posted the patch on the issue: {posted.get('html_url', ref)}")
    if args.apply and result.submission.strip():
        apply_patch(repo, result.submission)
        err.print(f"applied the patch to {repo}")
    return code


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


def branch_name(issue: Issue) -> str:
    return f"pgs/issue-{issue.ref.number}"


def _fork_target(client: GitHub, fork: str) -> tuple[str, str]:
    """(push URL, owner) of ``--fork``: OWNER/REPO via the API, else a remote URL or path
    whose last two parts are OWNER/REPO."""
    if not looks_like_url(fork) and fork.count("/") == 1 and not Path(fork).exists():
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


def _final_report(pgs: dict[str, Any]) -> dict[str, Any]:
    rounds = pgs.get("rounds") or []
    report: dict[str, Any] = (rounds[-1].get("report") if rounds else None) or {}
    return report


def evidence(result: RunResult) -> list[str]:
    """Markdown lines: the Tester's properties and whether they pass, the tests that ran."""
    pgs = result.trajectory.extra.get("pgs") or {}
    mode = pgs.get("mode", "none")
    if mode == "none":
        return ["No check ran (`--feedback none`): this patch was not tested by pgs."]
    rounds = pgs.get("rounds") or []
    feedback = sum(1 for r in rounds if r.get("feedback"))
    lines = [
        f"PGS (`{mode}`) verdict: **{pgs.get('verdict', 'unchecked')}**, after {len(rounds)} "
        f"checked candidate{'s' if len(rounds) != 1 else ''} and {feedback} feedback "
        f"message{'s' if feedback != 1 else ''}.",
        "",
        f"Why: {pgs.get('verdict_reason') or 'not recorded'}. {VERDICTS}",
    ]
    results = _final_report(pgs).get("results") or []
    outcome = {r["nodeid"]: r for r in results}
    validation = pgs.get("validation") or {}
    kept = validation.get("kept") or []
    dropped = validation.get("dropped") or []
    if kept or dropped:
        lines += ["", "Properties the Tester wrote (validated on the original code first):", ""]
        for nodeid in kept:
            r = outcome.get(nodeid, {})
            mark = {"passed": "passes", None: "not run"}.get(r.get("outcome"), "FAILS")
            kind = f"{r['kind']} property" if r.get("kind") else "property"
            rule = f": {r['rule']}" if r.get("rule") else ""
            lines.append(f"- `{nodeid}` ({kind}{rule}) — {mark} on the patch")
        for d in dropped:
            lines.append(f"- `{d.get('nodeid')}` — dropped: {d.get('reason')}")
    elif pgs.get("properties") is not None:
        lines += ["", "The Tester wrote no property that survived validation."]
    tests = [r for r in results if r.get("kind") == "repo"]
    if tests:
        passed = sum(1 for r in tests if r.get("outcome") == "passed")
        lines += ["", f"Repository tests run on the patch: {len(tests)} ({passed} passed)", ""]
        lines += [f"- `{r['nodeid']}` {r.get('outcome')}" for r in tests[:30]]
        if len(tests) > 30:
            lines.append(f"- ... and {len(tests) - 30} more")
    else:
        lines += ["", "No repository test ran on the patch."]
    return lines


#: What each verdict means, in the PR body.
VERDICTS = (
    "(`passed`: a Tester property that fails on the original code passes on the patch and "
    "nothing that passed before fails; `tests-only`: no issue property took part, the related "
    "tests pass; `unchecked`: nothing ran; `failed`: a check fails on the patch.)"
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
    return "\n".join(lines)[:BODY_LIMIT]


def comment_body(issue: Issue, result: RunResult) -> str:
    pgs = result.trajectory.extra.get("pgs") or {}
    check = (
        "not checked (`--feedback none`)"
        if pgs.get("mode", "none") == "none"
        else f"PGS verdict: **{pgs.get('verdict', 'unchecked')}**: {pgs.get('verdict_reason')}"
    )
    patch = result.submission
    head = (
        f"pgs-agent proposes this patch for #{issue.ref.number} ({check}; exit status "
        f"`{result.exit_status}`, {result.steps} steps):"
    )
    room = BODY_LIMIT - len(head) - 200
    cut = "" if len(patch) <= room else "\n\n(the patch is cut: it is longer than a comment)"
    return f"{head}\n\n```diff\n{patch[:room].rstrip()}\n```{cut}"


def with_image_spec(task: Task, spec: RepoImageSpec | None) -> Task:
    return dataclasses.replace(task, image_spec=spec) if spec else task
