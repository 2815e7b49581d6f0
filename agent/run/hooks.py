"""Run hooks: what watches or follows a run plugs in here, instead of callbacks passed down.

:func:`agent.run.run_task.run_task` takes ``hooks=[...]`` and calls, in this order,

- ``on_start(task, config)`` once, before anything is prepared;
- ``on_status(text)`` with progress text (the image, the sandbox, the agent, PGS's rounds:
  ``"PGS: ..."``), from the thread that runs the task;
- ``on_sandbox(sandbox)`` when a sandbox of the run is ready (the repository and the user's
  uncommitted changes in it), before any command of the agent's runs there (the demo's
  recorded session learns where the repository is: :mod:`agent.cli.demo`);
- ``on_step(agent, step)`` after each step of the Generator (``step``: the ``.traj`` entry, a
  :class:`agent.record.trajectory.Step`);
- ``on_round(record)`` after PGS checked a candidate (``record``: its
  :class:`~agent.record.pgs.RoundRecord`: the verdict, the failure fed back, the feedback);
- ``on_done(result, paths)`` once the ``.traj``, ``.patch`` and ``.pred`` are written
  (``paths``: an :class:`agent.run.outputs.RunPaths`). Not called when the run raises.

:class:`RunHook` does nothing in each; a hook overrides what it needs. :class:`Hooks` calls a
list of hooks in order (the first one listed first). An error a hook raises ends the run, as
an error of the run itself would. The hooks shipped: the terminal spinner and report of
``pgs run`` (:mod:`agent.cli.run`), the progress table of ``pgs batch``
(:mod:`agent.swebench.progress`), opening a pull request (:class:`agent.github.pr.OpenPRHook`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.core.loop import Agent, RunResult
    from agent.record.pgs import RoundRecord
    from agent.record.trajectory import Step
    from agent.run.config import RunConfig
    from agent.run.outputs import RunPaths
    from agent.run.task import Task
    from envs.sandbox import Sandbox


class RunHook:
    """A hook of a run; every method does nothing until overridden."""

    def on_start(self, task: Task, config: RunConfig) -> None:
        """The run of ``task`` with ``config`` begins."""

    def on_status(self, text: str) -> None:
        """What the run is doing now, in a few words."""

    def on_sandbox(self, sandbox: Sandbox) -> None:
        """A sandbox of the run is ready; nothing of the agent's has run in it yet."""

    def on_step(self, agent: Agent, step: Step) -> None:
        """The Generator finished a step (``agent.steps`` counts them)."""

    def on_round(self, record: RoundRecord) -> None:
        """PGS checked a candidate: ``record`` holds its verdict and what was fed back."""

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        """The run finished and its files are written."""


class Hooks(RunHook):
    """Several hooks as one: each call goes to every hook, in the order given."""

    def __init__(self, hooks: Iterable[RunHook] = ()) -> None:
        self.hooks = list(hooks)

    def on_start(self, task: Task, config: RunConfig) -> None:
        for hook in self.hooks:
            hook.on_start(task, config)

    def on_status(self, text: str) -> None:
        for hook in self.hooks:
            hook.on_status(text)

    def on_sandbox(self, sandbox: Sandbox) -> None:
        for hook in self.hooks:
            hook.on_sandbox(sandbox)

    def on_step(self, agent: Agent, step: Step) -> None:
        for hook in self.hooks:
            hook.on_step(agent, step)

    def on_round(self, record: RoundRecord) -> None:
        for hook in self.hooks:
            hook.on_round(record)

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        for hook in self.hooks:
            hook.on_done(result, paths)
