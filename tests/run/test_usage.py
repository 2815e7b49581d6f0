"""The run's summary counts the Tester's tokens and cost with the Generator's."""

from __future__ import annotations

from pathlib import Path

from agent.core.loop import RunResult
from agent.core.trajectory_file import Trajectory
from agent.run.outputs import usage


def result_with(generator: dict[str, float], tester: dict[str, float] | None) -> RunResult:
    traj = Trajectory(Path("unused.traj"), replay_config={})
    traj.info["model_stats"] = generator
    if tester is not None:
        traj.extra["pgs"] = {"tester": {"info": {"model_stats": tester}}}
    return RunResult(exit_status="submitted", submission="", steps=3, trajectory=traj)


def test_usage_adds_the_testers_cost_and_tokens() -> None:
    stats = usage(
        result_with(
            {"tokens_sent": 100, "tokens_received": 10, "instance_cost": 0.25},
            {"tokens_sent": 40, "tokens_received": 4, "instance_cost": 0.05},
        )
    )
    assert stats["tokens_sent"] == 140 and stats["tokens_received"] == 14
    assert abs(stats["instance_cost"] - 0.30) < 1e-9
    assert stats["tester_cost"] == 0.05


def test_usage_without_a_tester() -> None:
    stats = usage(result_with({"tokens_sent": 7, "tokens_received": 1, "instance_cost": 0.0}, None))
    assert stats == {
        "tokens_sent": 7.0,
        "tokens_received": 1.0,
        "instance_cost": 0.0,
        "tester_cost": 0.0,
    }
