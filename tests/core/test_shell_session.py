"""``agent.shell``: the Generator's commands in fresh shells (the default) or in one persistent
session, end to end (scripted server, real openai client, real Docker sandbox); the prompt says
which; and the PGS check (``run_pytest``) never sees what the Generator's session exported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.core.loop import SESSION
from agent.pgs.runner import CheckSettings, run_pytest
from envs.local import LocalSandbox
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, FIX, SUBMIT, bash, run_agent

MOVE = "mkdir -p notes && cd notes && export STAGE=carried && greet() { echo hi-$1; }"
LOOK = 'pwd; echo "stage=${STAGE-none}"; greet you 2>&1 | tail -1'


@pytest.mark.parametrize("shell", ["fresh", "persistent"])
def test_the_generator_shell_mode_is_in_the_prompt_and_in_what_commands_see(
    shell: str, base_image: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    script = [bash(MOVE), bash(LOOK), FIX, SUBMIT]
    overrides = {"agent": {"shell": shell}}
    run = run_agent(repo, script, base_image, tmp_path / "out", overrides)

    assert run.result.exit_status == "submitted"
    assert "+    return text.upper()" in run.result.submission  # the fix, made from notes/
    system = run.requests[0]["messages"][0]["content"]
    steps = run.result.trajectory.steps
    looked = steps[1]["observation"]
    if shell == "persistent":
        assert "carry over to the next command" in system and "fresh shell" not in system
        assert looked.splitlines() == ["/repo/notes", "stage=carried", "hi-you"]
        # The tools' state command runs in the session too (SWE-agent's prompt variables).
        assert steps[0]["state"]["working_dir"] == "/repo/notes"
    else:
        assert "fresh shell" in system and "carry over to the next" not in system
        assert looked.splitlines()[:2] == ["/repo", "stage=none"]
        assert "command not found" in looked
        assert steps[0]["state"]["working_dir"] == "/repo"


_SEES = """
import os

def test_the_generators_session_is_not_here():
    assert os.environ.get("STAGE") is None, os.environ.get("STAGE")
    assert os.environ.get("PYTHONHASHSEED") is None
    assert os.getcwd() == os.path.dirname(os.path.abspath(__file__))
"""


def test_the_pgs_check_does_not_see_the_generators_exports(small_repo: Path) -> None:
    settings = CheckSettings(python=sys.executable)
    with LocalSandbox(small_repo) as sandbox:
        sandbox.write_file("test_sees.py", _SEES)
        moved = sandbox.run(
            "cd /tmp && export STAGE=generator PYTHONHASHSEED=1 PYTHONPATH=/nowhere",
            session=SESSION,
        )
        assert moved.ok
        assert sandbox.run("pwd; echo $STAGE", session=SESSION).output == "/tmp\ngenerator\n"
        report = run_pytest(sandbox, ["test_sees.py"], settings=settings, timeout=120)
    assert [(r.nodeid, r.outcome) for r in report.results] == [
        ("test_sees.py::test_the_generators_session_is_not_here", "passed")
    ], report
