"""``pgs demo``: fix the bundled example issue end to end, then run the tests the agent never
saw on the patched repository."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.cli.run import add_view_flags, run_with_progress
from agent.errors import InputError
from agent.run.config import load_config
from agent.run.reviewer import check_models
from agent.run.task import load_issue
from envs import scratch

EXAMPLES = Path(__file__).parents[1] / "examples"
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="fix the bundled example issue end to end",
        description="Fix a bug in a bundled example repository, in a Docker sandbox. Without "
        "OPENAI_API_KEY the model is a recorded session played by the scripted server; with it, "
        "the real model (--model) does the work.",
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
        default="docker",
        help="where the commands run: a Docker container, or this machine (default: docker)",
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


def cmd_demo(args: argparse.Namespace) -> int:
    from agent.models.script_server import ScriptedServer

    example = EXAMPLES / "median"
    with scratch.temporary_directory("pgs-demo-") as tmp:
        repo = make_example_repo(Path(tmp) / "stats")
        task = load_issue(str(example / "issue.md"), repo)
        overrides: dict[str, Any] = {"sandbox": {"type": args.sandbox}}
        if os.environ.get("OPENAI_API_KEY"):
            overrides["model"] = {"name": args.model}
            server = None
        else:
            if args.sandbox != "docker":
                raise InputError("the recorded demo edits /repo: run it with --sandbox docker")
            server = ScriptedServer(example / "replay.yaml")
            server.start()
            overrides["model"] = {
                "name": "demo-replay",
                "base_url": server.url,
                "prices": {"demo-replay": [0.0, 0.0]},
            }
            err.print(f"no OPENAI_API_KEY: replaying a recorded session through {server.url}")
        try:
            config = load_config(None, overrides)
            check_models(config)  # before the image is built
            # The demo's folder is the demo's own: each demo replaces the last one's results.
            result = run_with_progress(
                task, config, args.output_dir, overwrite=True, quiet=args.quiet
            )
        finally:
            if server is not None:
                server.stop()
        return _check_hidden_tests(repo, result.submission, example / "hidden")


def _check_hidden_tests(repo: Path, patch: str, hidden: Path) -> int:
    """Apply the patch to a fresh copy and run the tests the agent never saw, in the sandbox."""
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
    from envs.images import build_repo_image

    image = build_repo_image(repo)
    with DockerSandbox(DockerSandboxConfig(image=image.tag)) as box:
        box.upload(hidden, "/repo/hidden_tests")
        box.write_file("/tmp/agent.patch", patch)
        result = box.run(
            "git apply /tmp/agent.patch && python3 -m pytest -q -p no:cacheprovider "
            "tests hidden_tests",
            timeout=300,
        )
    tail = "\n".join(result.output.strip().splitlines()[-3:])
    verdict = "PASS" if result.ok else "FAIL"
    err.print(f"hidden tests on the patched repository: {verdict}\n{tail}")
    return 0 if result.ok else 1
