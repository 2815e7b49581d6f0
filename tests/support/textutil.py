"""The textutil repository and its scripted runs, shared by the loop's, the CLI's and GitHub's
tests: a one-line bug (``shout`` lower-cases), the model's replies that fix it, hidden tests that
decide whether a patch fixes it, and helpers to run ``pgs`` and read what a user sees."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.core.loop import RunResult
from agent.models.script_server import ScriptedServer, ScriptSource
from agent.run.config import load_config, merge
from agent.run.outputs import RunPaths, output_paths
from agent.run.run_task import run_task
from agent.run.task import check_repo, load_issue

MODEL = "scripted"
FAST_RETRIES = {"attempts": 3, "min_wait": 0.01, "max_wait": 0.05}

ISSUE = (
    "shout() does not shout\n\n`shout('hi')` returns `'hi!'`; its docstring says it upper-cases "
    "the text, so it must return `'HI!'`."
)
BUGGY = {
    "textutil.py": (
        "def shout(text):\n"
        '    """``text`` upper-cased, with one "!" after it."""\n'
        '    return text.lower() + "!"\n'
    ),
    "tests/test_textutil.py": (
        "from textutil import shout\n\n\ndef test_shout_adds_one_bang():\n"
        "    assert shout('').endswith('!')\n"
    ),
    "README.md": "text helpers\n",
}
#: The tests the agent never sees; the patch must make them pass.
HIDDEN = (
    "from textutil import shout\n\n\ndef test_shout_upper_cases():\n"
    "    assert shout('hi') == 'HI!'\n"
)

CHECK = "python3 -c 'from textutil import shout; print(shout(\"hi\"))'"


def call(name: str, content: str = "", **arguments: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


def bash(command: str, content: str = "") -> dict[str, Any]:
    return call("bash", content, command=command)


VIEW = call("str_replace_editor", "Read the code.", command="view", path="/repo/textutil.py")
FIX = call(
    "str_replace_editor",
    "It lower-cases; the docstring says upper.",
    command="str_replace",
    path="/repo/textutil.py",
    old_str="text.lower()",
    new_str="text.upper()",
)
SUBMIT = call("submit", "Fixed and checked.")
FIX_STEPS = [VIEW, FIX, bash(CHECK, "Check the fix."), SUBMIT]


@dataclass
class Run:
    result: RunResult
    requests: list[dict[str, Any]]
    paths: RunPaths

    @property
    def traj(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.paths.traj.read_text())
        return data


def config_for(url: str, image: str, overrides: Mapping[str, Any] | None = None) -> Any:
    base = {
        "model": {
            "name": MODEL,
            "base_url": url,
            "prices": {MODEL: [0.0, 0.0]},
            "retries": FAST_RETRIES,
        },
        "sandbox": {"image": image},
        "pgs": {"feedback": "none"},  # the Generator alone; PGS has its own tests
    }
    return load_config(None, merge(base, overrides or {}))


def run_agent(
    repo: Path,
    script: ScriptSource,
    image: str,
    out: Path,
    overrides: Mapping[str, Any] | None = None,
) -> Run:
    with ScriptedServer(script) as server:
        task = load_issue(ISSUE, check_repo(repo, allow_dirty=False))
        result = run_task(task, config_for(server.url, image, overrides), out)
        return Run(result, server.requests, output_paths(out, task.instance_id))


def hidden_tests_pass(repo: Path, patch: str, dest: Path) -> bool:
    """Apply ``patch`` to a fresh clone of ``repo`` and run the hidden tests and its own."""
    subprocess.run(["git", "clone", "-q", str(repo), str(dest)], check=True)
    if patch:
        subprocess.run(["git", "apply", "-"], cwd=dest, input=patch, text=True, check=True)
    (dest / "hidden_tests").mkdir()
    (dest / "hidden_tests" / "test_hidden.py").write_text(HIDDEN)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "hidden_tests"],
        cwd=dest,
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


def last_message(request: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = request["messages"][-1]
    return message


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 2) -> str:
    """Run ``pgs`` in this process; it must fail with exit ``code`` (2: a mistake in the
    command; 1: the run ended in an error) and ONE ``pgs: error:`` line, the last; before it
    only the live view of a run that started (none for a mistake found before the run)."""
    got = main(list(argv))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert got == code, err
    assert lines and lines[-1].startswith("pgs: error: "), err
    assert not any(line.startswith("pgs: error: ") for line in lines[:-1]), err
    assert "Traceback" not in err, err
    if len(lines) > 1:  # the run had started: its live view's heading comes first
        assert lines[0].startswith("pgs: ") and " | model " in lines[0], err
    return lines[-1]


def run_argv(
    repo: Path, *extra: str, url: str = "http://127.0.0.1:9/v1", issue: str = ISSUE
) -> list[str]:
    """``pgs run`` on ``repo`` with the scripted model at ``url``, no PGS; ``extra`` last."""
    return [
        "run",
        "--repo",
        str(repo),
        "--issue",
        issue,
        "--model",
        MODEL,
        "--base-url",
        url,
        "--model.prices",
        json.dumps({MODEL: [0, 0]}),
        "--model.retries",
        json.dumps({"attempts": 1}),
        "--feedback",
        "none",
        *extra,
    ]


ROOT = Path(__file__).resolve().parents[2]


def pgs_env(**extra: str) -> dict[str, str]:
    """The environment of a ``python -m agent.cli`` subprocess: no model keys, pgs importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
