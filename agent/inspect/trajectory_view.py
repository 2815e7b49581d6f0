"""One trajectory as the page shows it: a ``.traj`` file in pgs's layout or SWE-agent's, or a
mini-swe-agent trajectory, read into the one run record (:func:`agent.record.foreign.record_of`:
a :class:`~agent.record.trajectory.RunRecord`, with what a foreign file lacked in its
``missing``), then shown as a :class:`TrajectoryView` built from that record alone.

mini-swe-agent's steps are rebuilt from the record's ``history`` (its messages,
:mod:`agent.inspect.recording`): each reply, the command it ran and the observation that
followed, with the exit code. SWE-agent's and pgs's are the record's ``trajectory``; a file
without one shows the steps rebuilt from its ``history``. An older or foreign file with keys
missing loads too: every missing part becomes a ``"missing: <what>"`` note, never an exception.
The PGS record is shown by :mod:`agent.inspect.pgs_record`.

Errors: :class:`~agent.errors.InspectError` from :func:`load_trajectory` for a file that
is not JSON or not a trajectory.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from agent.errors import InspectError
from agent.inspect.attempts_view import read_attempts
from agent.inspect.diff import parse_diff
from agent.inspect.lenient import (
    KINDS,
    as_dict,
    as_float,
    as_int,
    as_text,
    is_demo,
    read_json,
    usage_of,
)
from agent.inspect.model import Round, StepView, TrajectoryView
from agent.inspect.pgs_record import read_pgs
from agent.inspect.recording import recorded_replies
from agent.record.foreign import (
    TRAJECTORY_KEYS,
    NotATrajectoryError,
    dropped_steps,
    record_of,
)
from agent.record.steps import Info, Limits, Step
from agent.record.trajectory import RunRecord

STEP_KEYS = ("thought", "action", "observation", "execution_time")
#: ``exit_<name>`` in an exit status, in words.
LIMITS = {
    "cost": "cost limit",
    "step_limit": "step limit",
    "time": "time limit",
    "context": "context window full",
    "total_execution_time": "total execution time limit",
    "command_timeout": "command timeout",
    "api_calls": "API call limit",
}
#: Where the issue sits inside the first user message, by writer.
_ISSUE_MARKS = (
    re.compile(r"<issue>\n?(.*?)\n?</issue>", re.S),  # pgs
    re.compile(r"<pr_description>\n?(.*?)\n?</pr_description>", re.S),  # SWE-agent 1.x
    re.compile(r"ISSUE:\n(.*?)\n+INSTRUCTIONS:", re.S),  # SWE-agent 0.7
)


def load_trajectory(path: Path) -> TrajectoryView:
    """One ``.traj`` file (any writer's); :class:`InspectError` if it is not a trajectory."""
    path = Path(path)
    return trajectory_from_dict(read_json(path), path=path)


def trajectory_from_dict(
    data: Any, *, path: Path | None = None, instance_id: str | None = None
) -> TrajectoryView:
    """A trajectory from a ``.traj``'s parsed content, read through the run record
    (:func:`agent.record.foreign.record_of`); :class:`InspectError` if it is none."""
    try:
        record = record_of(data)
    except NotATrajectoryError as e:
        raise InspectError(
            f"{path} is JSON but not a trajectory: it has none of the keys "
            f"{', '.join(TRAJECTORY_KEYS)} (found: {e.found}); pass {KINDS}"
        ) from None
    return trajectory_from_record(record, path=path, instance_id=instance_id)


def trajectory_from_record(
    record: RunRecord,
    *,
    path: Path | None = None,
    instance_id: str | None = None,
    sub: bool = False,
) -> TrajectoryView:
    """The page's view of a run record; whatever it lacks becomes a missing note.

    ``sub``: a conversation stored inside another trajectory (a Tester turn), which has no
    ``replay_config`` and no PGS record of its own.
    """
    if record.writer == "mini-swe-agent":
        return _mini_trajectory(record, path=path, instance_id=instance_id)
    missing: list[str] = []
    given = record.model_fields_set
    info = record.info
    if "info" not in given:
        missing.append("missing: info (exit status, submission, model stats)")
    replay = record.replay_config
    if "replay_config" not in given and not sub:
        missing.append("missing: replay_config (the run's configuration)")
    traj = TrajectoryView(
        record=record,
        path=path,
        instance_id=instance_id or _instance_id(info, replay, path),
    )
    history = record.history
    if "history" not in given:
        missing.append("missing: history (the conversation)")
    traj.issue = _issue(replay, history, missing)
    if "trajectory" in given:
        traj.steps = _steps(record)
    elif history:
        missing.append("missing: trajectory (the steps); shown from the history instead")
        traj.steps = _steps_from_history(history)
    else:
        missing.append("missing: trajectory (the steps)")
    absent: Counter[str] = Counter(m for step in traj.steps for m in step.missing)
    for note, count in sorted(absent.items()):
        missing.append(f"{note} (in {count} of {len(traj.steps)} steps)")
    _read_info(traj, info, replay, missing, path)
    traj.attempts = None if sub else read_attempts(record.attempts)
    if record.pgs is not None and not sub:
        unreadable = [m for m in record.missing if m.startswith("missing: pgs.")]
        traj.pgs = read_pgs(record.pgs, unreadable, replay, _tester_conversation)
        _link_rounds(traj.steps, traj.pgs.rounds)
    elif not sub:
        mode = as_dict(replay.get("pgs")).get("feedback")
        if mode == "none":
            traj.pgs_absent = "no PGS: this run used --feedback none (the Generator alone)"
        else:
            missing.append("missing: pgs (the Tester's properties, rounds and verdict)")
    traj.missing = missing
    return traj


def _mini_trajectory(
    record: RunRecord, *, path: Path | None, instance_id: str | None
) -> TrajectoryView:
    """A mini-swe-agent trajectory: steps rebuilt from its messages (the record's history)."""
    missing: list[str] = []
    info = record.info
    if not info.model_fields_set and not info.model_extra:
        missing.append("missing: info (exit status, submission, model stats)")
    name = path.name.removesuffix(".json").removesuffix(".traj") if path else "trajectory"
    own_id = (record.model_extra or {}).get("instance_id")
    traj = TrajectoryView(
        record=record,
        path=path,
        instance_id=instance_id or str(own_id or info.instance_id or name),
    )
    messages = record.history
    traj.issue = _issue({}, messages, missing)
    recording = {"messages": messages, "info": {"exit_status": info.exit_status}}
    for n, reply in enumerate(recorded_replies(recording)):
        if reply.submitted:
            observation = "(submitted: the output is the patch)"
        elif reply.ran:
            observation = reply.output or ""
        else:  # refused: what the agent answered
            observation = as_text(messages[int(reply.where[9:-1]) + 1].get("content"))
        step = StepView(
            index=n + 1,
            step=Step(
                thought=reply.content,
                action=reply.command or "" if reply.ran else "",
                observation=observation,
                response=reply.content,
                exit_code=reply.exit_code,
            ),
        )
        step.estimated_tokens = (len(reply.content) + len(observation) + 3) // 4
        traj.steps.append(step)
    missing.append("missing: execution_time (mini-swe-agent does not record it)")
    _read_info(traj, info, {}, missing, path)
    config = as_dict((info.model_extra or {}).get("config"))
    model = as_dict(config.get("model"))
    if model.get("model_name"):
        traj.model_name = str(model["model_name"])
    agent = as_dict(config.get("agent"))
    if as_float(agent.get("step_limit")):
        traj.limits.append(f"{as_int(agent.get('step_limit'))} steps")
    if as_float(agent.get("cost_limit")):
        traj.limits.append(f"${as_float(agent.get('cost_limit')):.2f}")
    traj.pgs_absent = "no PGS: a mini-swe-agent run"
    traj.missing = missing
    return traj


def _tester_conversation(record: RunRecord, key: str) -> TrajectoryView:
    """A Tester turn's conversation, stored inside the trajectory under ``key``."""
    return trajectory_from_record(record, instance_id=key, sub=True)


def _link_rounds(steps: list[StepView], rounds: list[Round]) -> None:
    """Pair the submissions, in order, with the rounds that checked them."""
    submits = [s for s in steps if s.tool == "submit" or s.action.strip().split(" ")[0] == "submit"]
    for step, rnd in zip(submits, rounds, strict=False):
        step.round, rnd.step = rnd.number, step.index


def _instance_id(info: Info, replay: dict[str, Any], path: Path | None) -> str:
    problem = as_dict(replay.get("problem_statement"))
    task = as_dict(replay.get("task"))
    for candidate in (info.instance_id, task.get("instance_id"), problem.get("id")):
        if candidate:
            return str(candidate)
    return path.stem if path is not None else "trajectory"


def _issue(replay: dict[str, Any], history: list[Any], missing: list[str]) -> str | None:
    problem = as_dict(replay.get("problem_statement"))
    if problem.get("text"):
        return str(problem["text"])
    task = as_dict(replay.get("task"))
    if task.get("problem_statement"):
        return str(task["problem_statement"])
    for message in history:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        if is_demo(message):
            continue
        content = as_text(message.get("content"))
        for mark in _ISSUE_MARKS:
            found = mark.search(content)
            if found:
                return found.group(1).strip("\n")
        missing.append(
            "missing: the issue on its own (shown: the first user message, which holds it)"
        )
        return content
    missing.append("missing: the issue text (no problem statement and no user message)")
    return None


def _steps(record: RunRecord) -> list[StepView]:
    """The record's steps, each at its place in the file (a step that did not read at all
    shown where it was, as missing)."""
    steps: list[Step | None] = list(record.trajectory)
    for place in dropped_steps(record.missing):
        steps.insert(place, None)
    return [_step(i + 1, s) for i, s in enumerate(steps)]


def _step(index: int, raw: Step | None) -> StepView:
    """``raw``: None where the file's step did not read (not a JSON object)."""
    if raw is None:
        return StepView(index=index, missing=["missing: the step itself (not a JSON object)"])
    step = StepView(index=index, step=raw)
    step.state = {str(k): as_text(v) for k, v in raw.state.items()}
    step.usage = usage_of(raw.usage)
    said = len(step.response or step.thought) + len(step.action) + len(step.observation)
    step.estimated_tokens = (said + 3) // 4
    for key in STEP_KEYS:
        if key not in raw.model_fields_set:
            step.missing.append(f"missing: {key}")
    return step


def _steps_from_history(history: list[Any]) -> list[StepView]:
    """Steps rebuilt from a conversation: each assistant message and the reply that follows."""
    steps: list[StepView] = []
    for i, message in enumerate(history):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if is_demo(message):
            continue
        action = as_text(message.get("action"))
        if not action and isinstance(message.get("tool_calls"), list):
            calls = [c.get("function", {}) for c in message["tool_calls"] if isinstance(c, dict)]
            action = "\n".join(f"{c.get('name')} {c.get('arguments')}" for c in calls)
        following = history[i + 1] if i + 1 < len(history) else {}
        observation = (
            as_text(following.get("content"))
            if isinstance(following, dict) and following.get("role") in ("user", "tool")
            else ""
        )
        content = as_text(message.get("content"))
        step = StepView(
            index=len(steps) + 1,
            step=Step(
                thought=as_text(message.get("thought")) or content,
                action=action,
                observation=observation,
                response=content,
            ),
            missing=["missing: execution_time"],
        )
        step.estimated_tokens = (len(content) + len(action) + len(observation) + 3) // 4
        steps.append(step)
    return steps


def _read_info(
    traj: TrajectoryView,
    info: Info,
    replay: dict[str, Any],
    missing: list[str],
    path: Path | None,
) -> None:
    status = info.exit_status
    if status is None:
        missing.append("missing: info.exit_status (how the run ended)")
    else:
        for name in re.findall(r"exit_(\w+)", status):
            if name in LIMITS:
                traj.limits_hit.append(LIMITS[name])
        if traj.limits_hit and info.limit_message:
            traj.limits_hit[-1] += f": {info.limit_message}"
    if "submission" in info.model_fields_set:
        traj.submission = parse_diff(info.submission or "")
    else:
        beside = path.with_suffix(".patch") if path is not None else None
        if beside is not None and beside.is_file():
            traj.submission = parse_diff(beside.read_text(encoding="utf-8", errors="replace"))
            missing.append(f"missing: info.submission (shown: {beside.name} beside the file)")
        else:
            missing.append("missing: info.submission (the final patch)")
    stats = info.model_stats
    usage = usage_of(stats)
    if usage is None:
        missing.append("missing: info.model_stats (tokens and cost)")
    else:
        traj.usage = usage
    agent = as_dict(replay.get("agent"))
    model = as_dict(replay.get("model")) or as_dict(agent.get("model"))
    traj.model_name = str(model["name"]) if model.get("name") else None
    limits = info.limits or Limits()
    given = limits.model_fields_set
    steps = limits.steps if "steps" in given else agent.get("step_limit")
    seconds = limits.seconds if "seconds" in given else agent.get("time_limit")
    cost = model.get("per_instance_cost_limit")
    calls = model.get("per_instance_call_limit")
    if as_float(steps):
        traj.limits.append(f"{as_int(steps)} steps")
    if as_float(seconds):
        traj.limits.append(f"{as_float(seconds):.0f} s")
    if as_float(cost):
        traj.limits.append(f"${as_float(cost):.2f}")
    if as_float(calls):
        traj.limits.append(f"{as_int(calls)} model calls")
