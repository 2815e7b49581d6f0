"""``pgs --help`` and every command's ``--help`` start without the heavy libraries a command
loads on first use (the model client, the GitHub client's HTTP library, gitpython): a fresh
interpreter each, since this process has imported them long ago. ``bench/startup.py`` times it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import agent.models
from agent.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
LAZY = ("openai", "requests", "git")
PROGRAM = f"""\
import contextlib, io, json, sys
import agent.cli
with contextlib.redirect_stdout(io.StringIO()):
    code = agent.cli.main(sys.argv[1:])
loaded = [m for m in {LAZY!r} if m in sys.modules]
print(json.dumps({{"code": code, "loaded": loaded}}))
"""


def loaded_by(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def commands() -> list[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


def test_pgs_help_loads_none_of_the_heavy_libraries() -> None:
    assert loaded_by("--help") == {"code": 0, "loaded": []}


@pytest.mark.parametrize("command", ["run", "demo", "batch", "ladder", "github", "inspect"])
def test_a_commands_help_loads_none_of_them_either(command: str) -> None:
    assert command in commands()
    assert loaded_by(command, "--help") == {"code": 0, "loaded": []}


def test_the_model_classes_are_still_importable_from_agent_models() -> None:
    from agent.models import OpenAIModel
    from agent.models.openai import OpenAIModel as Defined

    assert OpenAIModel is Defined and "OpenAIModel" in agent.models.__all__
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchModel'"):
        agent.models.NoSuchModel  # noqa: B018
