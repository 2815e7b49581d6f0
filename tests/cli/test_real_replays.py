"""Opt-in: real runs of real agents, replayed by ``pgs replay`` on their instances, are handled
reply for reply as the real agent handled them, and end with the same patch.

Nothing large is stored in the repository; fetch the trajectories and point the variables at
them:

- ``PGS_REAL_TRAJS``: a folder of recordings. mini-swe-agent trajectories
  (``<id>.traj.json``) of SWE-bench Verified instances, e.g. from the public results of
  mini-swe-agent 1.15 with gemini-3-pro (``bash-only/20251118_mini-v1.15.0_gemini-3-pro-preview-
  20251118``: ``trajs/<id>/<id>.traj.json``, also in the GitHub repository
  ``gruckion/mini-swe-agent`` under ``swebench_results/20251118_gemini-3-pro-74pct/trajs``);
  and SWE-agent ``.traj`` files of runs on ``SWE-agent/test-repo`` (SWE-agent's own
  ``tests/test_data/trajectories/*/swe-agent__test-repo-i1.traj``, a real gpt-4 run of 0.x, and
  ``*/6e44b9__sweagenttestrepo-1c2844.traj``, a real gpt-4o run of 1.x with tool calls: its
  bundles and repository path are read from the recording; it ran on test-repo at 57e59d0).
- ``PGS_REAL_INSTANCES``: the SWE-bench records of those instances (JSON list or JSONL), and
  ``PGS_REAL_REPOS``: a folder of their repositories named ``OWNER__NAME`` (``--repos-dir``).
- for the SWE-agent recordings: ``PGS_REAL_SWE_AGENT_REPO``, a clone of ``SWE-agent/test-repo``,
  and ``PGS_REAL_SWE_AGENT_TOOLS``, SWE-agent's ``tools`` folder (its bundles ``registry``,
  ``windowed``, ``search``, ``windowed_edit_linting``, ``submit``).

Then ``python -m pytest tests/cli/test_real_replays.py`` (Docker; instance images are built
once, about a minute or two per instance, plus the run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.textutil import pgs_env

ROOT = Path(__file__).resolve().parents[2]
FOLDER = os.environ.get("PGS_REAL_TRAJS")
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not FOLDER, reason="opt-in: set PGS_REAL_TRAJS (see the module doc)"),
]
RECORDINGS = sorted(
    p for p in Path(FOLDER or ".").rglob("*") if FOLDER and p.name.endswith((".traj.json", ".traj"))
)
SWE_BUNDLES = ("registry", "windowed", "search", "windowed_edit_linting", "submit")


def where(recording: Path) -> list[str]:
    """The flags that say where ``recording`` runs."""
    if recording.name.endswith(".traj.json"):
        instances, repos = os.environ["PGS_REAL_INSTANCES"], os.environ["PGS_REAL_REPOS"]
        return ["--instances", instances, "--repos-dir", repos]
    tools = Path(os.environ["PGS_REAL_SWE_AGENT_TOOLS"])
    data = json.loads(recording.read_text())
    config = data.get("replay_config")
    config = json.loads(config) if isinstance(config, str) else config or {}
    # A 1.x recording names its bundles (``tools/<name>``) and where its repository was.
    named = [
        Path(b["path"]).name for b in config.get("agent", {}).get("tools", {}).get("bundles", [])
    ]
    bundles = json.dumps([str(tools / name) for name in named or SWE_BUNDLES])
    steps = data.get("trajectory") or [{}]
    state = steps[0].get("state") or {}
    state = json.loads(state) if isinstance(state, str) else state  # 0.x: a JSON string
    cwd = state.get("working_dir")
    at = ["--sandbox.repo-path", cwd] if isinstance(cwd, str) and cwd.startswith("/") else []
    return ["--repo", os.environ["PGS_REAL_SWE_AGENT_REPO"], "--tools.bundles", bundles, *at]


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_a_real_run_replays_as_the_real_agent_handled_it(recording: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "replay", str(recording), *where(recording), "--json"],
        cwd=ROOT,
        env=pgs_env(),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.stdout, done.stderr
    result = json.loads(done.stdout)
    unlike = [d for d in result["diffs"] if d["handled_unlike"]]
    assert result["handled_unlike"] == 0, json.dumps(unlike, indent=1)
    assert result["patch_equal"], result
