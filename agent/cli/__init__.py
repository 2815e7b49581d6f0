"""``pgs``: the command line. Every user mistake is one ``pgs: error:`` line and exit code 2.

Ctrl-C, SIGTERM and SIGHUP all end a command the same way (:func:`stop_signals`): a
KeyboardInterrupt in the main thread, so the agent records ``interrupted`` in the ``.traj``,
sandboxes are closed as the stack unwinds, and ``pgs`` exits with :data:`INTERRUPTED` (130).
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import termios
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.core.config import ConfigError, add_config_flags, flag_overrides, load_config
from agent.core.loop import Agent, RunResult
from agent.core.run import (
    InputError,
    apply_patch,
    check_output_dir,
    check_repo,
    load_issue,
    output_paths,
    run_task,
    usage,
)
from agent.core.tools import ToolConfigError, ToolInstallError
from agent.github.pr import (
    add_github_flags,
    check_local_flags,
    is_github_run,
    run_github_issue,
    setup_spec,
    with_image_spec,
)
from agent.models import ModelError
from agent.models.scripted import ScriptError
from envs.cli import USER_ERROR, print_error
from envs.errors import EnvError

USER_ERRORS = (
    ConfigError,
    InputError,
    EnvError,
    ModelError,
    ToolConfigError,
    ToolInstallError,
    ScriptError,
)
#: Exit code of a command ended by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, whatever the signal).
INTERRUPTED = 130
#: Signals that end a command the way Ctrl-C does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXAMPLES = Path(__file__).parents[1] / "examples"
err = Console(stderr=True, highlight=False, soft_wrap=True)


def default_output_dir(model: str) -> Path:
    """``trajectories/<time>-<model>-<random>``: two runs started in the same second get two
    folders."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("trajectories") / f"{stamp}-{model.replace('/', '_')}-{uuid.uuid4().hex[:6]}"


# -- pgs run ----------------------------------------------------------------------------------


def add_run_parser(subparsers: Any) -> None:
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
        "refused unless --overwrite",
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results of a previous run of the same issue in --output-dir",
    )
    run.add_argument("--apply", action="store_true", help="apply the patch to --repo at the end")
    run.add_argument(
        "--allow-dirty", action="store_true", help="work on top of uncommitted changes"
    )
    add_github_flags(run)
    add_config_flags(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config, flag_overrides(args))
    output_dir = args.output_dir or default_output_dir(config.model.name)
    image_spec = setup_spec(args.setup, config)
    run = functools.partial(_run_with_progress, overwrite=args.overwrite)
    if is_github_run(args):  # an issue URL: agent/pr.py clones, runs, opens the PR
        return run_github_issue(args, config, output_dir, image_spec, run, _report)
    check_local_flags(args)
    repo = check_repo(args.repo, allow_dirty=args.allow_dirty)
    task = with_image_spec(load_issue(args.issue, repo), image_spec)
    result = run(task, config, output_dir)
    _report(result, output_paths(output_dir, task.instance_id))
    if args.apply and result.submission.strip():
        apply_patch(repo, result.submission)
        err.print(f"applied the patch to {repo}")
    return 0 if result.exit_status == "submitted" else 1


def _run_with_progress(
    task: Any, config: Any, output_dir: Path, *, overwrite: bool = False
) -> RunResult:
    check_output_dir(output_dir, task.instance_id, overwrite=overwrite)
    started = time.monotonic()
    with err.status(f"{task.instance_id}: starting") as status:

        def on_status(text: str) -> None:
            status.update(f"{task.instance_id}: {text}")

        def on_step(agent: Agent, step: dict[str, Any]) -> None:
            stats = agent.model.stats
            action = step["action"].splitlines()[0][:70] if step["action"] else ""
            status.update(
                f"step {agent.steps} | {action} | {stats.tokens_sent + stats.tokens_received} "
                f"tokens | ${stats.instance_cost:.3f} | {time.monotonic() - started:.0f}s"
            )

        try:
            return run_task(task, config, output_dir, status=on_status, on_step=on_step)
        except KeyboardInterrupt:
            traj = output_paths(output_dir, task.instance_id)["traj"]
            if traj.exists():  # not before the agent started
                err.print(f"interrupted; the trajectory so far is in {traj}")
            raise


def _report(result: RunResult, paths: dict[str, Path]) -> None:
    if result.submission.strip():
        print(result.submission, end="" if result.submission.endswith("\n") else "\n")
    else:
        err.print("(no changes)")
    stats = usage(result)  # the Generator's and the Tester's
    err.print(
        f"exit status: {result.exit_status} | steps: {result.steps} | tokens: "
        f"{stats['tokens_sent']:.0f} sent, {stats['tokens_received']:.0f} received | "
        f"cost: ${stats['instance_cost']:.4f} (Tester ${stats['tester_cost']:.4f}) | time: "
        f"{result.trajectory.info.get('duration', 0):.1f}s"
    )
    pgs = result.trajectory.extra.get("pgs") or {}
    if pgs.get("mode", "none") != "none":
        validation = pgs.get("validation") or {}
        rounds = pgs.get("rounds") or []
        feedback = sum(1 for r in rounds if r.get("feedback"))
        turns = len(pgs.get("tester_turns") or [])
        err.print(
            f"PGS ({pgs['mode']}): {len(validation.get('kept') or [])} properties kept, "
            f"{len(validation.get('dropped') or [])} dropped ({turns} Tester turns); "
            f"{len(rounds)} candidates checked, {feedback} feedback messages; "
            f"verdict: {pgs.get('verdict')}"
        )
        if pgs.get("verdict_reason"):
            err.print(f"  why: {pgs['verdict_reason']}")
        for r in rounds:
            if r.get("selection"):
                err.print(f"  round {r['round']}: {r['selection'].get('why')}")
    err.print(f"trajectory: {paths['traj']}  patch: {paths['patch']}")


# -- pgs demo ---------------------------------------------------------------------------------


def add_demo_parser(subparsers: Any) -> None:
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
    demo.add_argument("--output-dir", type=Path, default=Path("trajectories") / "demo")
    demo.add_argument("--sandbox", choices=["docker", "local"], default="docker")
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
    from agent.models.scripted import ScriptedServer

    example = EXAMPLES / "median"
    with tempfile.TemporaryDirectory(prefix="pgs-demo-") as tmp:
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
            # The demo's folder is the demo's own: each demo replaces the last one's results.
            result = _run_with_progress(task, config, args.output_dir, overwrite=True)
        finally:
            if server is not None:
                server.stop()
        _report(result, output_paths(args.output_dir, task.instance_id))
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


# -- main -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from agent.inspect.cli import register as register_inspect
    from agent.cli.serve import register as register_server
    from agent.pgs.compare import register_report
    from agent.swebench.batch import register_batch
    from agent.swebench.evaluate import register_eval
    from envs.cli import register as register_env

    parser = argparse.ArgumentParser(
        prog="pgs",
        description="pgs fixes issues in real repositories; each patch is checked in a sandbox.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    add_run_parser(commands)
    add_demo_parser(commands)
    register_env(commands)
    register_server(commands)
    register_batch(commands)
    register_eval(commands)
    register_report(commands)
    register_inspect(commands)
    return parser


@contextmanager
def stop_signals(received: list[signal.Signals]) -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread,
    so all three unwind like Ctrl-C; each one is appended to ``received``. A signal the parent
    set to be ignored (``nohup`` ignores SIGHUP) stays ignored; outside the main thread (where
    Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        sig = signal.Signals(signum)
        if sig == signal.SIGHUP:
            if received:  # the kernel and the shell may both send one; the cleanup must finish
                return
            _leave_dead_terminal()
        received.append(sig)
        raise KeyboardInterrupt

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _leave_dead_terminal() -> None:
    """After a hang-up, writing to the terminal fails (EIO) and would turn the clean unwinding
    into a crash: stdout and stderr that are a terminal go to /dev/null instead."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            if _is_terminal(fd):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _is_terminal(fd: int) -> bool:
    """Like ``os.isatty``, but also True for a terminal that hung up (its ioctls fail with EIO,
    so ``isatty`` says False)."""
    try:
        termios.tcgetattr(fd)
    except termios.error as e:
        return bool(e.args and e.args[0] == errno.EIO)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="pgs: %(levelname)s: %(message)s",
    )
    received: list[signal.Signals] = []
    try:
        with stop_signals(received):
            code: int = args.func(args)
    except USER_ERRORS as e:
        print_error(str(e))
        return USER_ERROR
    except KeyboardInterrupt:
        by = f" by {received[0].name}" if received and received[0] != signal.SIGINT else ""
        print_error(f"interrupted{by}")
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
