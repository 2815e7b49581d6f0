"""Real ``pgs run`` processes (and runs in this process) on a buggy textutil repository, for the
tests of tests/cli/test_cli_safety.py and test_cli_result_folders.py: the scripted model's fixing
policy, the argv of a run, its ``.traj`` and a wait bounded by the process's life."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.inprocess import Ran, run_pgs
from tests.support.textutil import run_argv

ROOT = Path(__file__).resolve().parents[2]
PGS = [sys.executable, "-m", "agent.cli"]
MODEL = "scripted"


Capture = pytest.CaptureFixture[str]


BUGGY = {
    "textutil.py": 'def shout(text):\n    """Upper-cased, one "!" after."""\n'
    '    return text.lower() + "!"\n',
    "README.md": "text helpers\n",
}
ISSUE = "shout() does not shout: `shout('hi')` returns 'hi!', not 'HI!'."


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


FIX = call("bash", command="sed -i 's/text.lower()/text.upper()/' textutil.py")
SUBMIT = call("submit")


def fixing(request: dict[str, Any]) -> dict[str, Any]:
    """The fix, then submit: stateless, so concurrent runs can share one server."""
    asked = sum(m["role"] == "assistant" for m in request["messages"])
    return [FIX, SUBMIT][min(asked, 1)]


def run_args(repo: Path, url: str, *extra: str, issue: str = ISSUE) -> list[str]:
    return [*PGS, *run_argv(repo, *extra, url=url, issue=issue)]


def pgs(args: list[str], capfd: Capture, cwd: Path = ROOT) -> Ran:
    """A run whose process proves nothing (what it prints, writes and exits with): in this
    process."""
    return run_pgs(args, capfd, cwd=cwd)


def only_traj(out: Path) -> dict[str, Any]:
    trajs = list(out.glob("*/*.traj"))
    assert len(trajs) == 1, trajs
    data: dict[str, Any] = json.loads(trajs[0].read_text())
    return data


def wait_for(event: threading.Event, proc: subprocess.Popen[Any], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not event.wait(0.2):
        assert proc.poll() is None, "pgs ended before the model was asked"
        assert time.monotonic() < deadline, "the model was never asked"
