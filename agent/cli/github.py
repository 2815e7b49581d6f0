"""``pgs github``: the step of a GitHub Actions workflow (docs/github-action.yml). Reads the
event that started the workflow (:mod:`agent.github.action`), and for an issue labelled
``fix-me`` or a comment mentioning ``@pgs-agent`` runs pgs on that issue as ``pgs run --issue
URL --open-pr`` (or ``--comment``) would: the same task, the same verdict rules for what is
sent (:mod:`agent.github.pr`). When nothing is sent it says why on the issue. An event it does
not act on is one line and exit code 0.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.cli.env import INDEX_DATE_HELP, NO_REPO_INSTALL_HELP
from agent.cli.run import run_with_progress, setup_spec
from agent.errors import USER_ERRORS, GitHubError, InputError, ModelError, RunFailed, Skipped
from agent.github.action import (
    DEFAULT_LABEL,
    DEFAULT_TRIGGER,
    ActionRules,
    NoticeHook,
    decide,
    post_notice,
    read_event,
    step_summary,
    workspace_repo,
)
from agent.github.client import GitHub, api_url, web_host
from agent.github.pr import GitHubConfig, github_task
from agent.run.config import add_config_flags, flag_overrides, load_config
from agent.run.outputs import check_writable, default_output_dir
from agent.run.reviewer import check_models

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "github",
        help="in a GitHub Actions workflow: fix the issue labelled or @mentioned",
        description="Run in a GitHub Actions workflow (docs/github-action.yml): read the event "
        "($GITHUB_EVENT_NAME, $GITHUB_EVENT_PATH); for an issue given the label --label, or a "
        "comment mentioning --trigger by an owner, member or collaborator, fix the issue and "
        "open a draft pull request (or --comment). Other events: one line, exit code 0. Needs "
        "GITHUB_TOKEN (contents, pull-requests and issues: write) and the model's key.",
    )
    rules = parser.add_argument_group("what starts a run")
    rules.add_argument(
        "--label",
        default=DEFAULT_LABEL,
        help=f"the label that starts a run when added to an issue (default: {DEFAULT_LABEL})",
    )
    rules.add_argument(
        "--trigger",
        default=DEFAULT_TRIGGER,
        help="the word that starts a run when a comment on an issue mentions it, outside code "
        f"and quotes (default: {DEFAULT_TRIGGER})",
    )
    rules.add_argument(
        "--allow-anyone",
        action="store_true",
        help="act on anyone's comment and on labels an issue's author gave it (default: only "
        "an owner's, member's or collaborator's; anyone can comment on a public issue)",
    )
    send = parser.add_argument_group("what is sent")
    how = send.add_mutually_exclusive_group()
    how.add_argument(
        "--open-pr",
        action="store_true",
        help="push branch pgs/issue-N and open a draft pull request (the default; checked "
        "patches only)",
    )
    how.add_argument(
        "--comment", action="store_true", help="post the patch as a comment on the issue instead"
    )
    send.add_argument(
        "--force",
        action="store_true",
        help="send a patch whose PGS verdict is not passed (or that no check ran on); work on "
        "a locked issue",
    )
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with model/agent/sandbox/tools/pgs sections (repeatable, later wins)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="where <id>/<id>.traj, .patch, .pred go, for the workflow to upload (default: "
        "$RUNNER_TEMP/pgs in a workflow)",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="work on top of uncommitted changes in the checkout at $GITHUB_WORKSPACE",
    )
    parser.add_argument(
        "--setup",
        action="append",
        metavar="CMD",
        help="install command for the repository image (repeatable; replaces the detected one)",
    )
    parser.add_argument("--no-repo-install", action="store_true", help=NO_REPO_INSTALL_HELP)
    parser.add_argument("--index-date", metavar="YYYY-MM-DD|now", help=INDEX_DATE_HELP)
    add_config_flags(parser)
    parser.set_defaults(func=cmd_github)


def output_dir_for(args: argparse.Namespace, model: str) -> Path:
    if args.output_dir:
        return Path(args.output_dir)
    temp = os.environ.get("RUNNER_TEMP")  # outside the checkout, which pgs may work on
    return Path(temp) / "pgs" if temp else default_output_dir(model)


def failure(error: Exception) -> str:
    """What ended the run, in the words ``pgs`` prints it (one line, cut)."""
    text = str(error) if isinstance(error, (RunFailed, *USER_ERRORS)) else type(error).__name__
    line = (text.strip().splitlines() or [type(error).__name__])[0]
    return line if len(line) <= 500 else line[:500] + " ..."


def cmd_github(args: argparse.Namespace) -> int:
    rules = ActionRules(label=args.label, trigger=args.trigger, allow_anyone=args.allow_anyone)
    rules.check()
    name, payload = read_event()
    # The config is checked on every event, so a broken workflow fails on the first one.
    config = load_config(args.config, flag_overrides(args))
    if os.environ.get("GITHUB_ACTIONS") == "true" and config.sandbox.type == "local":
        raise InputError(
            "--sandbox local runs the model's commands on the runner, beside GITHUB_TOKEN and "
            "the model's key, with the network, and the issue's text is anyone's: use the "
            "Docker sandbox in a workflow"
        )
    try:
        trigger = decide(name, payload, rules)
    except Skipped as e:
        err.print(f"pgs: nothing to do: {e}")
        step_summary(f"pgs-agent: nothing to do: {e}")
        return 0
    if not os.environ.get("GITHUB_TOKEN"):
        raise InputError(
            "pgs github needs GITHUB_TOKEN to open the pull request or comment: add "
            "`GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}` to the step's env"
        )
    output_dir = output_dir_for(args, config.model.name)
    check_writable(output_dir)
    image_spec = setup_spec(
        args.setup, config, run_install=not args.no_repo_install, index_date=args.index_date
    )
    github = GitHubConfig(send="comment" if args.comment else "pr", force=args.force)
    repo, which = workspace_repo(trigger.ref, os.environ.get("GITHUB_WORKSPACE"))
    err.print(f"pgs: working on {trigger.ref} ({trigger.reason}); {which}")
    url = f"https://{web_host(api_url())}/{trigger.ref.full_name}/issues/{trigger.ref.number}"
    try:
        check_models(config)  # the model's price, URL and key, before the clone
        task, sender = github_task(
            url,
            github,
            config,
            output_dir,
            repo=repo,
            allow_dirty=args.allow_dirty,
            image_spec=image_spec,
        )
    except GitHubError:  # GitHub or the token refused: nothing can be said on the issue
        raise
    except (InputError, ModelError) as e:  # whoever asked learns why nothing starts
        post_notice(GitHub.from_env(), trigger.ref, f"could not start on this issue: {e}")
        step_summary(f"pgs-agent could not start on {trigger.ref}: {e}")
        raise
    notices = NoticeHook(sender)
    try:
        result = run_with_progress(task, config, output_dir, hooks=[sender, notices])
    except Exception as e:  # the model, the sandbox, the push: say so where it was asked
        notices.post(f"could not finish its run on this issue: {failure(e)}")
        step_summary(f"pgs-agent could not finish on {trigger.ref}: {failure(e)}")
        raise
    if sender.refused:
        step_summary(f"pgs-agent sent nothing for {trigger.ref}: {sender.refused}")
        return 1
    what = "opened a draft pull request" if github.send == "pr" else "posted the patch"
    step_summary(f"pgs-agent {what} for {trigger.ref}: {sender.url}")
    return 0 if result.exit_status == "submitted" else 1
