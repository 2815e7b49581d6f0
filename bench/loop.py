"""Agent-side overhead per step of the Generator: everything but the model and the command.

    .venv/bin/python bench/loop.py [--steps 50] [--python 3.9]

A scripted server answers at once with ``steps - 1`` cheap ``bash`` calls (``true`` / ``echo``)
and then ``submit``; the agent runs them in a real DockerSandbox (the base image with a small
repository copied in) through the real openai client. Per step:

    overhead = step wall time - Model.query time - the commands' own run time in the sandbox

where the commands are the action and the bundle's state command (both tools run in the
sandbox; the state command's run time is printed on its own line). The overhead holds parsing,
building the prompt, rendering, the sandbox round trips, reading the state, writing the .traj.
The timers are thin subclasses / a proxy around the real objects (OpenAIModel, DockerSandbox,
Toolset, Trajectory), nothing is faked. Last line: overhead_ms_per_step=<p50>.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.core.loop import Agent
from agent.core.loop_config import AgentConfig
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.models import Model, ModelConfig, ModelResponse, OpenAIModel, RetryConfig
from agent.models.script_server import ScriptedServer
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.images import ensure_base_image
from envs.sandbox import CommandResult
from tests.support.repos import make_repo


class TimedModel:
    """A Model that forwards to the real one and adds up the time spent in ``query``."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.stats = inner.stats  # the same object: the inner model updates it
        self.elapsed = 0.0

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        start = time.perf_counter()
        try:
            return self.inner.query(messages, tools)
        finally:
            self.elapsed += time.perf_counter() - start


class TimedSandbox(DockerSandbox):
    """Records every command: (command, its own duration in the sandbox, wall time here)."""

    runs: list[tuple[str, float, float]]

    def run(self, command: str, **kwargs: Any) -> CommandResult:
        start = time.perf_counter()
        result = super().run(command, **kwargs)
        self.runs.append((command, result.duration, time.perf_counter() - start))
        return result


class TimedToolset(Toolset):
    elapsed = 0.0

    def state(
        self, sandbox: Any, env: Mapping[str, str], *, session: str | None = None
    ) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            return super().state(sandbox, env, session=session)
        finally:
            self.elapsed += time.perf_counter() - start


class TimedTrajectory(Trajectory):
    elapsed = 0.0

    def save(self) -> None:
        start = time.perf_counter()
        super().save()
        self.elapsed += time.perf_counter() - start


class TimedAgent(Agent):
    """Times each step and splits it into model, command, state command and .traj writes."""

    model: TimedModel
    sandbox: TimedSandbox
    toolset: TimedToolset
    traj: TimedTrajectory
    rows: list[dict[str, float]]

    def step(self) -> None:
        self.model.elapsed = self.toolset.elapsed = self.traj.elapsed = 0.0
        self.sandbox.runs = []
        done = len(self.traj.steps)
        start = time.perf_counter()
        try:
            super().step()
        finally:
            wall = time.perf_counter() - start
            actions = {s["action"] for s in self.traj.steps[done:]}
            command = sum(d for c, d, _ in self.sandbox.runs if c in actions)
            # The state command is a tool of the bundle, run in the sandbox like the action:
            # its own run time is reported apart; its round trip stays in the overhead.
            state_run = sum(d for c, d, _ in self.sandbox.runs if c not in actions)
            self.rows.append(
                {
                    "wall": wall,
                    "model": self.model.elapsed,
                    "command": command,
                    "state": self.toolset.elapsed,
                    "save": self.traj.elapsed,
                    "state_run": state_run,
                    "overhead": wall - self.model.elapsed - command - state_run,
                }
            )


def script(steps: int) -> list[dict[str, Any]]:
    replies = []
    for i in range(steps - 1):
        command = "true" if i % 2 else f"echo step {i}"
        replies.append({"content": f"step {i}", "tool_calls": [bash_call(command)]})
    replies.append({"content": "done", "tool_calls": [{"name": "submit", "arguments": {}}]})
    return replies


def bash_call(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=50, help="model steps in the scripted run")
    parser.add_argument("--python", default="3.9", help="base image Python")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.steps = 5

    image = ensure_base_image(args.python)
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(script(args.steps)) as server:
        repo = make_repo(
            Path(tmp) / "repo",
            {"calc.py": "def add(a, b):\n    return a + b\n", "README.md": "x\n"},
        )
        config = ModelConfig(
            name="bench",
            base_url=server.url,
            prices={"bench": (0.0, 0.0)},
            retries=RetryConfig(attempts=1, min_wait=0.0, max_wait=0.0),
        )
        model = TimedModel(OpenAIModel(config))
        traj = TimedTrajectory(Path(tmp) / "out" / "bench.traj", replay_config={})
        toolset = TimedToolset(Toolset.from_paths().bundles)
        with TimedSandbox(DockerSandboxConfig.model_validate({"image": image}), repo=repo) as box:
            box.runs = []
            agent = TimedAgent(AgentConfig(), model, box, toolset, traj)
            agent.rows = []
            result = agent.run("Run the benchmark's commands.")
        size = traj.path.stat().st_size
    assert result.exit_status == "submitted", result.exit_status
    rows = agent.rows

    print(f"{len(rows)} steps, exit status {result.exit_status}, final .traj {size / 1024:.0f} KiB")
    print(f"{'per step (ms)':<28}{'p50':>9}{'p95':>9}{'max':>9}")
    for key, name in [
        ("overhead", "agent overhead"),
        ("model", "model (Model.query)"),
        ("command", "command (own duration)"),
        ("state", "state call, whole"),
        ("state_run", "state command's own run"),
        ("save", ".traj save (in overhead)"),
        ("wall", "step wall time"),
    ]:
        xs = [r[key] * 1e3 for r in rows]
        print(f"{name:<28}{statistics.median(xs):9.2f}{pct(xs, 95):9.2f}{max(xs):9.2f}")
    first, last = rows[: len(rows) // 5], rows[-len(rows) // 5 :]
    print(
        f"overhead p50, first fifth vs last fifth of the run: "
        f"{statistics.median(r['overhead'] for r in first) * 1e3:.2f} ms vs "
        f"{statistics.median(r['overhead'] for r in last) * 1e3:.2f} ms"
    )
    with_state = statistics.median((r["overhead"] + r["state_run"]) * 1e3 for r in rows)
    print(f"overhead p50 counting the state command's own run too: {with_state:.2f} ms")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"overhead_ms_per_step={statistics.median(r['overhead'] for r in rows) * 1e3:.2f}")


if __name__ == "__main__":
    main()
