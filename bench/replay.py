"""The in-process replay model against the scripted HTTP server, for tests of the loop.

    .venv/bin/python bench/replay.py [--steps 40] [--runs 5]

The same whole Generator run (``steps - 1`` cheap ``bash`` calls, then ``submit``, in a
LocalSandbox on a small git repository, the real Agent, Toolset and Trajectory) twice per
round, in one process: once with ``ReplayModel`` answering in-process, once with
``OpenAIModel`` (the real openai client) talking to ``ScriptedServer`` on 127.0.0.1. Prints the
median model time per step and the median run time of each, and the ratio of the model times.
Last line: replay_model_speedup=<HTTP model time / replay model time>.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.core.loop import Agent
from agent.core.loop_config import AgentConfig
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.models import Model, ModelConfig, OpenAIModel, ReplayModel
from agent.models.script_server import ScriptedServer
from bench.loop import TimedModel
from envs.local import LocalSandbox
from tests.support.repos import make_repo


def script(steps: int) -> list[dict[str, Any]]:
    bash = [
        {"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo {i}"}}]}
        for i in range(steps - 1)
    ]
    return [*bash, {"content": "done", "tool_calls": [{"name": "submit", "arguments": {}}]}]


def one_run(model: Model, repo: Path, out: Path) -> tuple[float, float]:
    """(model seconds, run seconds) of one whole run."""
    timed = TimedModel(model)
    with LocalSandbox(repo) as box:
        agent = Agent(
            AgentConfig(),
            timed,
            box,
            Toolset.from_paths(None),
            Trajectory(out / "run.traj", replay_config={}),
        )
        start = time.perf_counter()
        result = agent.run("Run the benchmark's commands.")
        seconds = time.perf_counter() - start
    assert result.exit_status == "submitted", result.exit_status
    return timed.elapsed, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.steps, args.runs = 5, 1
    steps = script(args.steps)
    config = ModelConfig(name="scripted", prices={"scripted": (0.0, 0.0)})
    replay_config = ModelConfig(name="replay", prices={"replay": (0.0, 0.0)})
    times: dict[str, list[tuple[float, float]]] = {"replay": [], "http": []}
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "repo", {"a.py": "x = 1\n"})
        for i in range(args.runs):
            out = Path(tmp) / f"out{i}"
            times["replay"].append(one_run(ReplayModel(replay_config, script=steps), repo, out))
            with ScriptedServer(steps) as server:
                http = OpenAIModel(config.model_copy(update={"base_url": server.url}))
                times["http"].append(one_run(http, repo, out / "http"))
    per_step = {k: statistics.median(m for m, _ in v) / args.steps for k, v in times.items()}
    per_run = {k: statistics.median(s for _, s in v) for k, v in times.items()}
    for kind in ("replay", "http"):
        print(
            f"{kind}: model {per_step[kind] * 1000:.3f} ms/step, "
            f"whole run {per_run[kind]:.2f} s ({args.steps} steps, median of {args.runs})"
        )
    print(f"whole_run_speedup={per_run['http'] / per_run['replay']:.2f}")
    print(f"replay_model_speedup={per_step['http'] / per_step['replay']:.1f}")


if __name__ == "__main__":
    main()
