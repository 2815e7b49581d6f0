"""One task from start to finish (:func:`run_task`): open the sandbox (:mod:`agent.run.sandbox`),
choose the reviewer (:mod:`agent.run.reviewer`), run the Generator, write ``<id>.traj``,
``<id>.patch`` and ``<id>.pred`` under the output folder (:mod:`agent.run.outputs`).

Once the Generator has started, the three files are written whatever ends the run (a submission,
a limit, an error, an interrupt), with the diff so far. A run the loop ended with an error raises
:class:`~agent.errors.RunFailed` (its cause chained), an interrupt stays a KeyboardInterrupt; a
result file that cannot be written (disk full, a read-only folder) raises
:class:`~agent.errors.OutputNotWritten`, naming what was kept."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from pathlib import Path

from agent.core.loop import Agent, RunResult
from agent.core.secrets import Redactor
from agent.core.trajectory_file import Trajectory, write_atomic
from agent.errors import OutputNotWritten, RunFailed
from agent.models import GlobalStats, get_model
from agent.pgs.shared import SharedProperties
from agent.run.config import RunConfig, config_yaml, dump
from agent.run.hooks import Hooks, RunHook
from agent.run.outputs import RunPaths, output_paths, write_results
from agent.run.reviewer import make_reviewer
from agent.run.sandbox import base_commit, close_after_error, open_sandbox
from agent.run.task import Task, head_commit

logger = logging.getLogger(__name__)


def run_task(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    *,
    hooks: Iterable[RunHook] = (),
    global_stats: GlobalStats | None = None,
    paths: RunPaths | None = None,
    shared: SharedProperties | None = None,
) -> RunResult:
    """Run ``task``; ``hooks`` see it start, its progress, each step and its end
    (:mod:`agent.run.hooks`). ``paths``: where its files go (default: :func:`output_paths`);
    ``shared``: a property set to adopt (one attempt of several, :mod:`agent.run.run_attempts`)."""
    run_id = uuid.uuid4().hex[:12]
    hook = Hooks(hooks)
    hook.on_start(task, config)
    paths = paths or output_paths(output_dir, task.instance_id)
    replay = dump(config)
    replay["task"] = {"instance_id": task.instance_id, "repo": str(task.repo)}
    redactor = Redactor.for_config(config)
    write_atomic(paths.config, redactor.redact(config_yaml(config)))  # --config takes it
    traj = Trajectory(paths.traj, replay_config=replay, redactor=redactor)
    traj.info.instance_id = task.instance_id
    traj.info.base_commit = head_commit(task.repo)
    model = get_model(config.model, global_stats)
    toolset = config.tools.toolset()
    sandbox = open_sandbox(
        config,
        task.repo,
        run_id,
        hook,
        task.image_spec,
        toolset,
        record=replay["task"],
        leave_out=(*task.own, output_dir / task.instance_id),
    )
    agent: Agent | None = None
    try:
        base = base_commit(sandbox)
        traj.info.sandbox_base_commit = base
        hook.on_status("the agent is working")
        reviewer = make_reviewer(
            config, task, sandbox, toolset, traj, global_stats, hook, base, shared
        )
        agent = Agent(
            config.agent,
            model,
            sandbox,
            toolset,
            traj,
            function_calling=config.model.function_calling,
            on_step=hook.on_step,
            reviewer=reviewer,
            base=base,
        )
        result = agent.run(task.problem_statement)
        if reviewer is not None and config.pgs.keep_properties:
            write_atomic(paths.properties, redactor.redact(reviewer.properties_patch()))
    except BaseException as e:
        close_after_error(sandbox)
        if agent is None:  # the Generator never started: no exit status, nothing to keep
            raise
        _keep_work_after(e, task, config, traj, paths)
        raise
    sandbox.close()
    write_results(paths, task, config, traj, result.submission)
    hook.on_done(result, paths)
    return result


def _keep_work_after(
    error: BaseException, task: Task, config: RunConfig, traj: Trajectory, paths: RunPaths
) -> None:
    """Write the results of a run the loop ended with ``error`` (its exit status and the diff
    so far are in ``traj.info``); raise :class:`RunFailed` for an error. An interrupt is left
    to propagate: a file that cannot be written then is only a warning."""
    submission = traj.info.submission or ""
    try:
        write_results(paths, task, config, traj, submission)
    except OutputNotWritten as unwritten:
        if not isinstance(error, Exception):
            logger.warning("%s", unwritten)
            return
        raise unwritten from error
    if isinstance(error, Exception):
        status = traj.info.exit_status or "exit_error"
        result = RunResult(
            exit_status=status,
            submission=submission,
            steps=traj.info.steps or 0,
            trajectory=traj,
        )
        raise RunFailed(error, result, paths.folder) from error
