"""``pgs demo``: fix the bundled example issue end to end, then run the tests the agent never
saw on the patched repository.

Without OPENAI_API_KEY the model is a recorded session (``agent/examples/median/replay.yaml``)
played by the scripted server; its replies name the repository at ``/repo``, where it was
recorded, and are moved to wherever the sandbox holds it (:meth:`Script.serve_repo_at
<agent.models.script_format.Script.serve_repo_at>`, once the sandbox is ready: the run's
``on_sandbox`` hook). Where the commands run:

- ``--sandbox docker``: a container; the hidden tests run in a fresh container of the
  repository's image, which the agent never touched (sealed, :mod:`envs.seal`);
- ``--sandbox local``: this machine, in a temporary copy of the example, on the Python pgs runs
  on (first on ``PATH``: it has pytest and Hypothesis); the hidden tests run the same way in a
  fresh copy, and the verdict says they were not sealed;
- neither given: docker when a Docker daemon answers, else local with a note saying so, for the
  recorded session only (its commands are known; a live model's are not, so with a key set
  and no Docker the demo asks for ``--sandbox local``).
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shlex
import shutil
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agent.cli.run import add_view_flags, run_with_progress
from agent.errors import InputError
from agent.run.config import load_config
from agent.run.hooks import RunHook
from agent.run.reviewer import check_models
from agent.run.task import load_issue
from envs import scratch

if TYPE_CHECKING:
    from agent.models.script_server import ScriptedServer
    from envs.registry import SandboxSettings
    from envs.sandbox import Sandbox

EXAMPLES = Path(__file__).parents[1] / "examples"
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
#: What the hidden tests run, in the patched repository.
HIDDEN_TESTS = "python3 -m pytest -q -p no:cacheprovider tests hidden_tests"


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="fix the bundled example issue end to end",
        description="Fix a bug in a bundled example repository, then run the tests the agent "
        "never saw. Without OPENAI_API_KEY the model is a recorded session played by the "
        "scripted server; with it, the real model (--model) does the work.",
    )
    demo.add_argument(
        "--model", default="gpt-4o-mini", help="model used when OPENAI_API_KEY is set"
    )
    demo.add_argument(
        "--output-dir",
        type=Path,
        default=Path("trajectories") / "demo",
        help="where the example's run is written (default: trajectories/demo)",
    )
    demo.add_argument(
        "--sandbox",
        choices=["docker", "local"],
        default=None,
        help="where the commands run: a Docker container, or this machine with no isolation "
        "(default: docker when a Docker daemon answers, else local for the recorded session)",
    )
    add_view_flags(demo)
    demo.set_defaults(func=cmd_demo)


def make_example_repo(dest: Path, name: str = "median") -> Path:
    """The example repository as a git repo; fixed dates make its commit (and image) stable."""
    import subprocess

    shutil.copytree(EXAMPLES / name / "repo", dest)
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    }
    ident = ["-c", "user.name=pgs", "-c", "user.email=pgs@example.com"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], [*ident, "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=dest, env=env, check=True, capture_output=True)
    return dest


def choose_sandbox(requested: str | None, *, live: bool) -> str:
    """``--sandbox``, or docker when a daemon answers, else local for the recorded session
    (with a note saying so); a live model without Docker needs ``--sandbox local`` said."""
    if requested is not None:
        return requested
    from envs.docker_util import docker_unreachable

    cause = docker_unreachable()
    if cause is None:
        return "docker"
    if live:
        raise InputError(
            f"{cause}, and with OPENAI_API_KEY set the demo runs the model's commands: pass "
            "--sandbox local to run them on this machine with no isolation, or start Docker"
        )
    err.print(
        f"pgs: note: {cause}: the recorded demo runs with --sandbox local (on this machine, "
        "in a temporary copy, with no isolation); pass --sandbox docker to insist on Docker"
    )
    return "local"


def sandbox_settings(kind: str) -> dict[str, Any]:
    """The demo's sandbox section: a local one runs the example on pgs's own Python, which has
    pytest and Hypothesis (the Tester's properties need them), whatever ``python3`` is."""
    if kind != "local":
        return {"type": kind}
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    return {"type": "local", "env": {"PATH": path}}


class _ReplayHere(RunHook):
    """The recorded replies name the repository where the sandbox holds it."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server

    def on_sandbox(self, sandbox: Sandbox) -> None:
        self.server.script.serve_repo_at(sandbox.repo_path)


def cmd_demo(args: argparse.Namespace) -> int:
    from agent.models.script_server import ScriptedServer

    live = bool(os.environ.get("OPENAI_API_KEY"))
    example = EXAMPLES / "median"
    with scratch.temporary_directory("pgs-demo-") as tmp:
        repo = make_example_repo(Path(tmp) / "stats")
        task = load_issue(str(example / "issue.md"), repo)
        overrides: dict[str, Any] = {}
        hooks: list[RunHook] = []
        server = None
        if live:
            overrides["model"] = {"name": args.model}
        else:
            server = ScriptedServer(example / "replay.yaml")
            server.start()
            hooks.append(_ReplayHere(server))
            overrides["model"] = {
                "name": "demo-replay",
                "base_url": server.url,
                "prices": {"demo-replay": [0.0, 0.0]},
            }
            err.print(f"no OPENAI_API_KEY: replaying a recorded session through {server.url}")
        try:
            # prices, the model's URL and key: before Docker is asked or an image built
            check_models(load_config(None, overrides))
            overrides["sandbox"] = sandbox_settings(choose_sandbox(args.sandbox, live=live))
            config = load_config(None, overrides)
            # The demo's folder is the demo's own: each demo replaces the last one's results.
            result = run_with_progress(
                task, config, args.output_dir, overwrite=True, quiet=args.quiet, hooks=hooks
            )
        finally:
            if server is not None:
                server.stop()
        return _check_hidden_tests(repo, result.submission, example / "hidden", config.sandbox)


def _check_hidden_tests(
    repo: Path, patch: str, hidden: Path, sandbox: SandboxSettings | None = None
) -> int:
    """Apply the patch to a fresh copy and run the tests the agent never saw, in a new sandbox
    of the run's kind (``sandbox``; default: Docker): a fresh container of the repository's
    image is sealed (the agent never touched it); a fresh copy on this machine is not (the
    agent's commands ran here too)."""
    from envs.registry import make_sandbox, sandbox_config

    settings = sandbox if sandbox is not None else sandbox_config({"type": "docker"})
    if settings.takes_image:
        from envs.images import build_repo_image

        settings = settings.updated(image=build_repo_image(repo).tag)
        how = "sealed: in a fresh container of the repository's image, never touched by the agent"
    else:
        how = (
            "not sealed: they ran on this machine, in a fresh copy of the repository, where the "
            "agent's commands ran too"
        )
    with make_sandbox(settings, repo=repo, run_id=uuid.uuid4().hex[:12]) as box:
        box.upload(hidden, "hidden_tests")
        patch_file = posixpath.join(box.home, "agent.patch")
        box.write_file(patch_file, patch)
        result = box.run(f"git apply {shlex.quote(patch_file)} && {HIDDEN_TESTS}", timeout=300)
    tail = "\n".join(result.output.strip().splitlines()[-3:])
    verdict = "PASS" if result.ok else "FAIL"
    err.print(f"hidden tests on the patched repository: {verdict} ({how})\n{tail}")
    return 0 if result.ok else 1
