"""``pgs run``: fix one issue in a local repository, or from a GitHub issue URL.

The run goes through :func:`agent.run.run_task.run_task` with its hooks: :class:`TerminalHook`
(the spinner on stderr, then the report) and, for a GitHub issue,
:class:`agent.github.pr.OpenPRHook` (``--open-pr`` / ``--comment``). The patch goes to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.status import Status

from agent.cli.env import INDEX_DATE_HELP, NO_REPO_INSTALL_HELP
from agent.cli.view import LiveView
from agent.core.locks import claim
from agent.core.loop import Agent, RunResult
from agent.core.secrets import Redactor
from agent.errors import Claimed, InputError
from agent.github.client import looks_like_url
from agent.github.pr import GitHubConfig, check_local_flags, github_task
from agent.record.pgs import ValidationRecord
from agent.record.trajectory import Step
from agent.run.apply import apply_patch
from agent.run.config import RunConfig, add_config_flags, flag_overrides, load_config
from agent.run.hooks import RunHook
from agent.run.outputs import (
    RunPaths,
    check_output_dir,
    check_writable,
    default_output_dir,
    first_missing,
    mark_as_results,
    output_paths,
    usage,
)
from agent.run.reviewer import check_endpoints, check_models, check_prices
from agent.run.run_attempts import (
    AttemptsConfig,
    add_attempts_flags,
    attempts_config,
    remove_attempts,
    run_attempts,
    summary_lines,
)
from agent.run.runlog import RunLog
from agent.run.task import Task, check_clean, check_repo, load_issue
from envs.images import RepoImageSpec

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="fix one issue in a local repository or from a GitHub issue URL",
        description="Fix an issue in a local git repository and write the patch and trajectory.",
    )
    run.add_argument(
        "--repo", type=Path, help="path of the git repository (omit with a GitHub issue URL)"
    )
    run.add_argument(
        "--issue",
        required=True,
        help="a file holding the issue (a single word ending in .md or .txt, or holding a "
        "'/', must be an existing file), the issue's text, or a GitHub issue URL "
        "(https://github.com/OWNER/REPO/issues/N: the repository is cloned)",
    )
    run.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with model/agent/sandbox/tools/pgs sections, over the shipped defaults "
        "(agent/config/default.yaml); repeat it to stack files, later ones win",
    )
    run.add_argument(
        "--output-dir",
        type=Path,
        help="where <id>/<id>.traj, .patch, .pred go (default: a new folder "
        "trajectories/<time>-<model>-<random>); a folder holding a run of the same issue is "
        "refused unless --overwrite, and so is one where it is running now",
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results of a previous run of the same issue in --output-dir",
    )
    run.add_argument(
        "--apply",
        action="store_true",
        help="apply the patch to --repo at the end (only a submitted patch, unless --force; "
        "never one that links outside the repository or had a secret redacted)",
    )
    run.add_argument(
        "--allow-dirty", action="store_true", help="work on top of uncommitted changes"
    )
    add_view_flags(run)
    add_github_flags(run)
    add_attempts_flags(run)
    add_config_flags(run)
    run.set_defaults(func=cmd_run)


def add_view_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="one spinner line and the report instead of the live view of each step (its "
        "thought, action and output) and PGS round",
    )


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
        "PGS verdict is not passed; --apply the patch of a run that did not submit",
    )
    parser.add_argument(
        "--setup",
        action="append",
        metavar="CMD",
        help="install command for the repository image, run in /repo while it is built (the "
        "package indexes in reach, nothing else; repeatable; replaces the detected install)",
    )
    parser.add_argument("--no-repo-install", action="store_true", help=NO_REPO_INSTALL_HELP)
    parser.add_argument("--index-date", metavar="YYYY-MM-DD|now", help=INDEX_DATE_HELP)


def github_config(args: argparse.Namespace) -> GitHubConfig:
    """The "GitHub issues" flags as the config of :class:`agent.github.pr.OpenPRHook`."""
    send = "pr" if args.open_pr else "comment" if args.comment else "nothing"
    return GitHubConfig(
        send=send,
        fork=args.fork,
        base_commit=args.base_commit,
        workdir=args.workdir,
        force=args.force,
    )


def setup_spec(
    setup: list[str] | None,
    config: RunConfig,
    *,
    run_install: bool = True,
    index_date: str | None = None,
) -> RepoImageSpec | None:
    """``--setup`` commands as the repository image's install step, in place of the
    detected one (the wheelhouse is still filled from the detected requirements);
    ``--no-repo-install`` as ``run_install: false``; ``--index-date`` as ``index_date``."""
    if not setup and run_install and not index_date:
        return None
    sandbox = config.sandbox
    flag = "--setup" if setup else "--no-repo-install" if not run_install else "--index-date"
    what = f"{flag} installs into" if setup else f"{flag} is about"
    if not sandbox.takes_image:
        raise InputError(f"{what} a Docker image: it needs --sandbox docker")
    if sandbox.image_tag():
        raise InputError(
            f"{what} the repository image pgs builds, but --image "
            f"{sandbox.image_tag()} is given: drop one of them"
        )
    # The image adds pytest and Hypothesis for the Tester after these commands.
    fields: dict[str, object] = {"install": list(setup)} if setup else {}
    if not run_install:
        fields["run_install"] = False
    if index_date:  # checked alone, so that a wrong day is named as this flag's
        fields |= RepoImageSpec.checked(
            {"index_date": index_date}, source="--index-date"
        ).model_dump(include={"index_date"})
    return RepoImageSpec.checked(fields, source=flag)


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config, flag_overrides(args))
    attempts = attempts_config(args)
    output_dir = args.output_dir or default_output_dir(config.model.name)
    check_writable(output_dir)  # before a clone or an image is made for nothing
    image_spec = setup_spec(
        args.setup, config, run_install=not args.no_repo_install, index_date=args.index_date
    )
    github = github_config(args)
    hooks: list[RunHook] = []
    if args.repo is None or looks_like_url(args.issue):  # agent/github/pr.py clones
        check_prices(config)  # before the clone
        task, pr_hook = github_task(
            args.issue,
            github,
            config,
            output_dir,
            repo=args.repo,
            allow_dirty=args.allow_dirty,
            image_spec=image_spec,
        )
        check_endpoints(config)  # after the issue is read and cloned, before any image work
        hooks.append(pr_hook)
        repo = task.repo
    else:
        check_local_flags(github)
        pr_hook = None
        repo = check_repo(args.repo, allow_dirty=True)
        task = load_issue(args.issue, repo)
        if not args.allow_dirty:  # the issue file and the output folder are pgs's, not dirt
            check_clean(repo, own=(*task.own, output_dir / task.instance_id))
        check_models(config)  # before any image or sandbox work
        if image_spec:
            task = dataclasses.replace(task, image_spec=image_spec)
    result = run_with_progress(
        task,
        config,
        output_dir,
        overwrite=args.overwrite,
        hooks=hooks,
        quiet=args.quiet,
        attempts=attempts,
    )
    if pr_hook is not None and pr_hook.refused:
        return 1
    if args.apply and result.submission.strip():
        apply_patch(
            repo,
            result.submission,
            exit_status=result.exit_status,
            force=args.force,
            redacted=result.trajectory.info.patch_redacted or (),
            patch_file=output_paths(output_dir, task.instance_id).patch,
        )
        err.print(f"applied the patch to {repo}")
    return 0 if result.exit_status == "submitted" else 1


class TerminalHook(RunHook):
    """``pgs run``'s spinner on stderr: what the run does, then each step (its action, tokens,
    cost, time); at the end the report (:func:`report`), before any later hook sends the
    patch."""

    def __init__(self, console: Console = err) -> None:
        self.console = console
        #: Everything shown goes through it (the host's secrets, :mod:`agent.core.secrets`).
        self.redactor = Redactor.from_env()
        self.spinner: Status | None = None
        self.instance_id = ""
        self.started = time.monotonic()

    def on_start(self, task: Task, config: RunConfig) -> None:
        self.instance_id = task.instance_id
        self.redactor = Redactor.for_config(config)
        self.started = time.monotonic()
        self.spinner = self.console.status(f"{task.instance_id}: starting")
        self.spinner.start()

    def on_status(self, text: str) -> None:
        if self.spinner is not None:
            self.spinner.update(self.redactor.redact(f"{self.instance_id}: {text}"))

    def on_step(self, agent: Agent, step: Step) -> None:
        stats = agent.model.stats
        action = self.redactor.redact(step.action).splitlines()[0][:70] if step.action else ""
        if self.spinner is not None:
            self.spinner.update(
                f"step {agent.steps} | {action} | {stats.tokens_sent + stats.tokens_received} "
                f"tokens | ${stats.instance_cost:.3f} | {time.monotonic() - self.started:.0f}s"
            )

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        self.close()
        report(result, paths, self.console)

    def close(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None


def run_with_progress(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    *,
    overwrite: bool = False,
    hooks: Sequence[RunHook] = (),
    quiet: bool = False,
    attempts: AttemptsConfig | None = None,
) -> RunResult:
    """:func:`run_task` with the live view (:class:`agent.cli.view.LiveView`; ``quiet``: the
    spinner, :class:`TerminalHook`) and the report first, then the run's log file
    (:class:`agent.run.runlog.RunLog`), then ``hooks``; with ``attempts``, several attempts
    (:func:`agent.run.run_attempts.run_attempts`: the attempts an earlier run finished are kept,
    unless ``overwrite``)."""
    check_writable(output_dir)
    made = first_missing(output_dir / task.instance_id)
    with contextlib.ExitStack() as held:
        # The claim makes the same-instance check atomic: two runs of one issue into one
        # folder, started at once, cannot both pass it (agent.core.locks; it dies with the
        # process, so a crashed run leaves nothing that blocks the next one).
        try:
            held.enter_context(claim(output_dir, task.instance_id))
        except Claimed as e:
            raise InputError(f"{e}: wait for it to finish, or pass another --output-dir") from None
        check_output_dir(output_dir, task.instance_id, overwrite=overwrite)
        if made is not None:  # once the run is sure to start: a refused one leaves nothing
            mark_as_results(made)
        if overwrite:
            remove_attempts(output_dir, task.instance_id)
        terminal = TerminalHook() if quiet else LiveView(err, report)
        log = held.enter_context(RunLog(output_paths(output_dir, task.instance_id).log))
        try:
            return run_attempts(task, config, output_dir, attempts, hooks=[terminal, log, *hooks])
        except KeyboardInterrupt:
            terminal.close()
            traj = output_paths(output_dir, task.instance_id).traj
            if traj.exists():  # not before the agent started
                err.print(f"interrupted; the trajectory so far is in {traj}")
            raise
        finally:
            terminal.close()


def report(result: RunResult, paths: RunPaths, console: Console = err) -> None:
    """The patch on stdout; on stderr the run's exit status, usage and PGS summary; the host's
    secrets redacted from all of it."""
    redact = result.trajectory.redactor.redact
    patch = redact(result.submission)
    if patch.strip():
        print(patch, end="" if patch.endswith("\n") else "\n")
    else:
        console.print("(no changes)")
    redacted = result.trajectory.info.patch_redacted
    if redacted:
        console.print(
            f"pgs: warning: the patch held the value of {', '.join(redacted)}; it is written "
            "with *** in its place"
        )
    stats = usage(result)  # the Generator's and the Tester's
    console.print(
        f"exit status: {result.exit_status} | steps: {result.steps} | tokens: "
        f"{stats['tokens_sent']:.0f} sent, {stats['tokens_received']:.0f} received | "
        f"{_cost(result, stats)} | time: {result.trajectory.info.duration or 0:.1f}s"
    )
    pgs = result.trajectory.record.pgs_record
    if pgs.mode != "none":
        validation = pgs.validation or ValidationRecord()
        feedback = len(pgs.feedback_rounds())
        console.print(
            f"PGS ({pgs.mode}): {len(validation.kept)} properties kept, "
            f"{len(validation.dropped)} dropped ({len(pgs.tester_turns)} Tester turns); "
            f"{len(pgs.rounds)} candidates checked, {feedback} feedback messages; "
            f"verdict: {pgs.verdict}"
        )
        if pgs.verdict_reason:
            console.print(redact(f"  why: {pgs.verdict_reason}"))
        for r in pgs.rounds:
            if r.selection:
                console.print(redact(f"  round {r.round}: {r.selection.why}"))
    for line in summary_lines(result.trajectory):  # --attempts: each, the total, the choice
        console.print(redact(line))
    console.print(f"trajectory: {paths.traj}  patch: {paths.patch}")


def _cost(result: RunResult, stats: dict[str, float]) -> str:
    """The cost and where its price came from (``model_stats.price_source``)."""
    stats_of = result.trajectory.info.model_stats
    source = stats_of.price_source if stats_of is not None else None
    if source == "unpriced":
        return "cost: not counted (no price known, cost limits off)"
    where = f"; {source} price" if source else ""
    return f"cost: ${stats['instance_cost']:.4f} (Tester ${stats['tester_cost']:.4f}{where})"
