"""Run hooks (agent/core/hooks.py): what a hook passed to ``run_task`` sees of a real run (the
scripted model, a host sandbox): its start, the status texts, every step, and its end with the
files already written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agent.core.loop import Agent, RunResult
from agent.models.script_server import ScriptedServer
from agent.record.pgs import RoundRecord
from agent.run.config import RunConfig, load_config
from agent.run.hooks import Hooks, RunHook
from agent.run.outputs import RunPaths
from agent.run.run_task import run_task
from agent.run.task import Task, check_repo, load_issue
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, ISSUE, MODEL, SUBMIT, bash

FIX = [bash("echo looking"), bash("sed -i 's/text.lower()/text.upper()/' textutil.py"), SUBMIT]


class Recorder(RunHook):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_start(self, task: Task, config: RunConfig) -> None:
        self.events.append(("start", (task, config)))

    def on_status(self, text: str) -> None:
        self.events.append(("status", text))

    def on_step(self, agent: Agent, step: dict[str, Any]) -> None:
        self.events.append(("step", (agent.steps, step["action"])))

    def on_round(self, record: RoundRecord) -> None:
        self.events.append(("round", record))

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        written = {name: path.exists() for name, path in paths.files().items()}
        self.events.append(("done", (result, written)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def of(self, kind: str) -> list[Any]:
        return [value for k, value in self.events if k == kind]


def local_run(
    tmp_path: Path, script: list[dict[str, Any]], hooks: list[RunHook], feedback: str = "none"
) -> tuple[Task, RunConfig, RunResult]:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    task = load_issue(ISSUE, check_repo(repo, allow_dirty=False))
    with ScriptedServer(script) as server:
        config = load_config(
            None,
            {
                "model": {"name": MODEL, "base_url": server.url, "prices": {MODEL: [0, 0]}},
                "sandbox": {"type": "local"},
                # The check's Python has pytest (the host's python3 may not: no check then).
                "pgs": {"feedback": feedback, "check": {"python": sys.executable}},
            },
        )
        result = run_task(task, config, tmp_path / "out", hooks=hooks)
    return task, config, result


def test_a_hook_sees_the_start_the_status_every_step_and_the_end(tmp_path: Path) -> None:
    first, second = Recorder(), Recorder()
    task, config, result = local_run(tmp_path, FIX, [first, second])

    assert first.events == second.events  # every hook sees every call
    kinds = first.kinds()
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert first.of("start") == [(task, config)]
    assert "the agent is working" in first.of("status")
    steps = first.of("step")
    assert [n for n, _ in steps] == [1, 2, 3] == list(range(1, result.steps + 1))
    assert "sed -i" in steps[1][1]
    [(done, written)] = first.of("done")
    assert done is result and result.exit_status == "submitted"
    assert written["traj"] and written["patch"] and written["pred"]  # written before on_done


def test_pgs_status_goes_through_the_hooks(tmp_path: Path) -> None:
    """Self-Edit (``io``) checks the candidate with the repository's tests: no Tester turns,
    so the same script; its progress reaches the hook as ``PGS: ...``, the checked candidate
    as ``on_round``."""
    recorder = Recorder()
    _, _, result = local_run(tmp_path, FIX, [recorder], feedback="io")
    assert result.exit_status == "submitted"
    assert "PGS: checking candidate 1" in recorder.of("status")
    # Once checked, the round itself: after the submit step, before the end.
    [record] = recorder.of("round")
    assert record.round == 1 and record.verdict is not None and record.report is not None
    kinds = recorder.kinds()
    assert kinds.index("step") < kinds.index("round") < kinds.index("done")


def test_hooks_are_called_in_order_and_an_error_in_one_ends_the_run(tmp_path: Path) -> None:
    calls: list[str] = []

    class Named(RunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_status(self, text: str) -> None:
            calls.append(self.name)

    Hooks([Named("a"), Named("b")]).on_status("x")
    assert calls == ["a", "b"]

    class Stop(RunHook):
        def on_step(self, agent: Agent, step: dict[str, Any]) -> None:
            raise RuntimeError("the hook says stop")

    done = Recorder()
    with pytest.raises(RuntimeError, match="the hook says stop"):
        local_run(tmp_path, FIX, [Stop(), done])
    assert "done" not in done.kinds()


def test_a_hook_gets_each_step_as_the_typed_record_the_traj_holds(tmp_path: Path) -> None:
    from agent.record.trajectory import RunRecord, Step

    class Steps(RunHook):
        def __init__(self) -> None:
            self.steps: list[Step] = []

        def on_step(self, agent: Agent, step: Step) -> None:
            self.steps.append(step)

    hook = Steps()
    _, _, result = local_run(tmp_path, FIX, [hook])
    assert all(isinstance(s, Step) for s in hook.steps) and len(hook.steps) == 3
    assert "sed -i" in hook.steps[1].action and hook.steps[1].exit_code == 0
    written = RunRecord.read(result.trajectory.path)
    assert written.version == "pgs-1" and written.trajectory == hook.steps
