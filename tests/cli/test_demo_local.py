"""``pgs demo`` where there is no Docker: the recorded session replayed in the local sandbox (its
replies recorded at ``/repo`` and moved to the local copy), the hidden tests run the same way in
a fresh copy with a verdict that says they were not sealed, a live model's demo graded without
Docker too, and the default when no daemon answers. The real command line (in this process:
nothing here is about the process), DOCKER_HOST pointing at nothing (so any use of Docker
fails), the scripted server over HTTP for the live model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cli.demo import EXAMPLES
from agent.models.script_format import load_script
from agent.models.script_server import ScriptedServer
from tests.support.inprocess import Ran, run_pgs

NO_DOCKER = "unix:///nonexistent/pgs-demo-has-no-docker.sock"
PASS_LOCAL = (
    "hidden tests on the patched repository: PASS (not sealed: they ran on this machine, in a "
    "fresh copy of the repository, where the agent's commands ran too)"
)
#: The fix the recorded session ends with.
FIXED = "+    return (ordered[middle - 1] + ordered[middle]) / 2"


Capture = pytest.CaptureFixture[str]


def demo(capfd: Capture, cwd: Path, *args: str, **env: str) -> Ran:
    return run_pgs(
        ["demo", "--quiet", *args], capfd, cwd=cwd, env={"DOCKER_HOST": NO_DOCKER, **env}
    )


def test_the_recorded_demo_runs_in_the_local_sandbox_without_docker(
    tmp_path: Path, capfd: Capture
) -> None:
    done = demo(capfd, tmp_path, "--sandbox", "local")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert FIXED in done.stdout  # the recorded fix, written in the local copy, not at /repo
    assert PASS_LOCAL in done.stderr.splitlines(), done.stderr
    assert "exit status: submitted" in done.stderr
    # The PGS check says what the demo's verdict says: nothing was sealed.
    assert "not sealed: the check ran in the Generator's own sandbox" in done.stderr
    patch = tmp_path / "trajectories" / "demo" / "stats__issue" / "stats__issue.patch"
    assert FIXED in patch.read_text()


@pytest.fixture
def live_model() -> Iterator[ScriptedServer]:
    """A stand-in for a hosted model: it reads where the repository is from the prompt, as a
    model does, and answers with the recorded session's replies for that place."""
    script = load_script(EXAMPLES / "median" / "replay.yaml")

    def policy(request: dict[str, Any]) -> Any:
        prompt = str(request["messages"][0]["content"])
        found = re.search(r"repository at (/\S+?)\.?\s", prompt)
        assert found, prompt
        script.serve_repo_at(found.group(1))
        return script.next_step(request)

    with ScriptedServer(policy) as server:
        yield server


def test_a_live_model_demo_in_the_local_sandbox_grades_without_docker(
    tmp_path: Path, live_model: ScriptedServer, capfd: Capture
) -> None:
    done = demo(
        capfd,
        tmp_path,
        "--sandbox",
        "local",
        OPENAI_API_KEY="sk-test-scripted",
        OPENAI_BASE_URL=live_model.url,
    )
    assert done.returncode == 0, done.stderr
    assert "no OPENAI_API_KEY" not in done.stderr  # the live branch, not the recording
    assert live_model.requests and live_model.requests[0]["model"] == "gpt-4o-mini"
    assert PASS_LOCAL in done.stderr.splitlines(), done.stderr
    assert "cannot reach the Docker daemon" not in done.stderr


def test_a_live_model_demo_without_docker_asks_for_the_local_sandbox(
    tmp_path: Path, live_model: ScriptedServer, capfd: Capture
) -> None:
    # A live model's commands are not known in advance: no silent fall-back to the host. The
    # model answers (it is checked first, before any sandbox), yet is never asked to work.
    done = demo(capfd, tmp_path, OPENAI_API_KEY="sk-test-scripted", OPENAI_BASE_URL=live_model.url)
    assert done.returncode == 2, done.stderr
    assert not live_model.requests
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"pgs: error: cannot reach the Docker daemon at {NO_DOCKER}, and with OPENAI_API_KEY "
        "set the demo runs the model's commands: pass --sandbox local to run them on this "
        "machine with no isolation, or start Docker"
    )
    assert not (tmp_path / "trajectories").exists()
