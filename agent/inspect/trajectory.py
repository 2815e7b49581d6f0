"""One trajectory: a ``.traj`` file in pgs's layout or SWE-agent's, or a mini-swe-agent
trajectory (``messages``, ``trajectory_format: mini-swe-agent-1`` or 2.x's ``-1.1``), as a
:class:`Trajectory`.

mini-swe-agent's layout: ``info`` (``exit_status``, ``submission``, ``model_stats``, ``config``)
and ``messages``; its steps are rebuilt from the messages (:mod:`agent.inspect.recording`): each
reply, the command it ran and the observation that followed, with the exit code.

SWE-agent's layout: ``trajectory``, ``history``, ``info``, ``replay_config``; steps with
``thought``, ``action``, ``observation``, ``response``, ``execution_time``, ``state``, ``query``.
An older or foreign file with keys missing loads too: every missing part becomes a
``"missing: <what>"`` note, never an exception. The PGS record is read by
:mod:`agent.inspect.pgs_record`.

Errors: :class:`~agent.errors.InspectError` from :func:`load_trajectory` for a file that
is not JSON or not a trajectory.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from agent.errors import InspectError
from agent.inspect.attempts import read_attempts
from agent.inspect.diff import parse_diff
from agent.inspect.fields import (
    KINDS,
    TRAJ_KEYS,
    as_dict,
    as_float,
    as_int,
    as_text,
    is_demo,
    is_trajectory,
    read_json,
    read_usage,
)
from agent.inspect.model import Round, Step, Trajectory
from agent.inspect.pgs_record import read_pgs
from agent.inspect.recording import recorded_replies

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


def load_trajectory(path: Path) -> Trajectory:
    """One ``.traj`` file (any writer's); :class:`InspectError` if it is not a trajectory."""
    path = Path(path)
    data = read_json(path)
    if not is_trajectory(data):
        found = ", ".join(sorted(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise InspectError(
            f"{path} is JSON but not a trajectory: it has none of the keys "
            f"{', '.join(TRAJ_KEYS)} (found: {found or 'nothing'}); pass {KINDS}"
        )
    return trajectory_from_dict(data, path=path)


def trajectory_from_dict(
    data: dict[str, Any],
    *,
    path: Path | None = None,
    instance_id: str | None = None,
    sub: bool = False,
) -> Trajectory:
    """A trajectory from a ``.traj``'s content; whatever is absent becomes a missing note.

    ``sub``: a conversation stored inside another trajectory (a Tester turn), which has no
    ``replay_config`` and no PGS record of its own.
    """
    if isinstance(data.get("messages"), list) and "history" not in data:
        return _mini_trajectory(data, path=path, instance_id=instance_id)
    missing: list[str] = []
    info = data.get("info")
    if not isinstance(info, dict):
        missing.append("missing: info (exit status, submission, model stats)")
        info = {}
    replay = as_dict(data.get("replay_config"))
    if "replay_config" not in data and not sub:
        missing.append("missing: replay_config (the run's configuration)")
    writer = _writer(data, info, replay)
    traj = Trajectory(
        path=path,
        instance_id=instance_id or _instance_id(info, replay, path),
        writer=writer,
    )
    history = data.get("history")
    if not isinstance(history, list):
        missing.append("missing: history (the conversation)")
        history = []
    traj.issue = _issue(replay, history, missing)
    steps = data.get("trajectory")
    if isinstance(steps, list):
        traj.steps = [_step(i + 1, s) for i, s in enumerate(steps)]
    elif history:
        missing.append("missing: trajectory (the steps); shown from the history instead")
        traj.steps = _steps_from_history(history)
    else:
        missing.append("missing: trajectory (the steps)")
    absent: Counter[str] = Counter(m for step in traj.steps for m in step.missing)
    for note, count in sorted(absent.items()):
        missing.append(f"{note} (in {count} of {len(traj.steps)} steps)")
    _read_info(traj, info, replay, missing, path)
    traj.attempts = None if sub else read_attempts(data.get("attempts"))
    pgs = data.get("pgs")
    if isinstance(pgs, dict) and not sub:
        traj.pgs = read_pgs(pgs, replay, _tester_conversation)
        _link_rounds(traj.steps, traj.pgs.rounds)
    elif not sub:
        mode = (replay.get("pgs") or {}).get("feedback") if isinstance(replay, dict) else None
        if mode == "none":
            traj.pgs_absent = "no PGS: this run used --feedback none (the Generator alone)"
        else:
            missing.append("missing: pgs (the Tester's properties, rounds and verdict)")
    traj.missing = missing
    return traj


def _mini_trajectory(
    data: dict[str, Any], *, path: Path | None, instance_id: str | None
) -> Trajectory:
    """A mini-swe-agent trajectory: steps rebuilt from its messages."""
    missing: list[str] = []
    info = as_dict(data.get("info"))
    if not info:
        missing.append("missing: info (exit status, submission, model stats)")
    name = path.name.removesuffix(".json").removesuffix(".traj") if path else "trajectory"
    traj = Trajectory(
        path=path,
        instance_id=instance_id or str(data.get("instance_id") or info.get("instance_id") or name),
        writer="mini-swe-agent",
    )
    messages = data["messages"]
    traj.issue = _issue({}, messages, missing)
    for n, reply in enumerate(recorded_replies(data)):
        if reply.submitted:
            observation = "(submitted: the output is the patch)"
        elif reply.ran:
            observation = reply.output or ""
        else:  # refused: what the agent answered
            following = messages[int(reply.where[9:-1]) + 1]
            observation = as_text(following.get("content")) if isinstance(following, dict) else ""
        step = Step(
            index=n + 1,
            thought=reply.content,
            action=reply.command or "" if reply.ran else "",
            observation=observation,
            response=reply.content,
            exit_code=reply.exit_code,
        )
        step.estimated_tokens = (len(reply.content) + len(observation) + 3) // 4
        traj.steps.append(step)
    missing.append("missing: execution_time (mini-swe-agent does not record it)")
    _read_info(traj, info, {}, missing, path)
    config = as_dict(info.get("config"))
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


def _tester_conversation(data: dict[str, Any], key: str) -> Trajectory:
    """A Tester turn's conversation, stored inside the trajectory under ``key``."""
    return trajectory_from_dict(data, instance_id=key, sub=True)


def _link_rounds(steps: list[Step], rounds: list[Round]) -> None:
    """Pair the submissions, in order, with the rounds that checked them."""
    submits = [s for s in steps if s.tool == "submit" or s.action.strip().split(" ")[0] == "submit"]
    for step, rnd in zip(submits, rounds, strict=False):
        step.round, rnd.step = rnd.number, step.index


def _writer(data: dict[str, Any], info: dict[str, Any], replay: dict[str, Any]) -> str:
    if "pgs" in data or {"sandbox", "tools"} <= set(replay):
        return "pgs"
    swe_keys = {"swe_agent_version", "swe_agent_hash", "edited_files30"}
    if (
        "environment" in data
        or swe_keys & set(info)
        or {"env", "problem_statement"} & set(replay)
        or isinstance(data.get("replay_config"), str)
    ):
        return "swe-agent"
    return "unknown"


def _instance_id(info: dict[str, Any], replay: dict[str, Any], path: Path | None) -> str:
    problem = as_dict(replay.get("problem_statement"))
    task = as_dict(replay.get("task"))
    for candidate in (info.get("instance_id"), task.get("instance_id"), problem.get("id")):
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


def _step(index: int, raw: Any) -> Step:
    if not isinstance(raw, dict):
        return Step(index=index, missing=["missing: the step itself (not a JSON object)"])
    step = Step(
        index=index,
        thought=as_text(raw.get("thought")),
        action=as_text(raw.get("action")),
        observation=as_text(raw.get("observation")),
        response=as_text(raw.get("response")),
        execution_time=as_float(raw.get("execution_time")),
        tool=str(raw["tool"]) if raw.get("tool") else None,
        exit_code=as_int(raw.get("exit_code")),
    )
    state = raw.get("state")
    parsed = as_dict(state)
    if parsed:
        step.state = {str(k): as_text(v) for k, v in parsed.items()}
    elif isinstance(state, str) and state.strip():
        step.state = {"state": state.strip()}
    extra = as_dict(raw.get("extra_info"))
    step.usage = (
        read_usage(raw.get("usage"))
        or read_usage(raw.get("model_stats"))
        or read_usage({k: raw[k] for k in ("tokens_sent", "tokens_received", "cost") if k in raw})
        or read_usage(extra.get("usage"))
        or read_usage(extra.get("model_stats"))
    )
    said = len(step.response or step.thought) + len(step.action) + len(step.observation)
    step.estimated_tokens = (said + 3) // 4
    for key in STEP_KEYS:
        if key not in raw:
            step.missing.append(f"missing: {key}")
    return step


def _steps_from_history(history: list[Any]) -> list[Step]:
    """Steps rebuilt from a conversation: each assistant message and the reply that follows."""
    steps: list[Step] = []
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
        step = Step(
            index=len(steps) + 1,
            thought=as_text(message.get("thought")) or content,
            action=action,
            observation=observation,
            response=content,
            missing=["missing: execution_time"],
        )
        step.estimated_tokens = (len(content) + len(action) + len(observation) + 3) // 4
        steps.append(step)
    return steps


def _read_info(
    traj: Trajectory,
    info: dict[str, Any],
    replay: dict[str, Any],
    missing: list[str],
    path: Path | None,
) -> None:
    status = info.get("exit_status")
    if status is None:
        missing.append("missing: info.exit_status (how the run ended)")
    else:
        traj.exit_status = str(status)
        for name in re.findall(r"exit_(\w+)", traj.exit_status):
            if name in LIMITS:
                traj.limits_hit.append(LIMITS[name])
        if traj.limits_hit and info.get("limit_message"):
            traj.limits_hit[-1] += f": {info['limit_message']}"
    if info.get("error"):
        traj.error = str(info["error"])
    if "submission" in info:
        traj.submission = parse_diff(as_text(info.get("submission")))
    else:
        beside = path.with_suffix(".patch") if path is not None else None
        if beside is not None and beside.is_file():
            traj.submission = parse_diff(beside.read_text(encoding="utf-8", errors="replace"))
            missing.append(f"missing: info.submission (shown: {beside.name} beside the file)")
        else:
            missing.append("missing: info.submission (the final patch)")
    usage = read_usage(info.get("model_stats"))
    if usage is None:
        missing.append("missing: info.model_stats (tokens and cost)")
    else:
        traj.usage = usage
    traj.duration = as_float(info.get("duration"))
    agent = as_dict(replay.get("agent"))
    model = as_dict(replay.get("model")) or as_dict(agent.get("model"))
    traj.model_name = str(model["name"]) if model.get("name") else None
    limits = as_dict(info.get("limits"))
    steps = limits.get("steps", agent.get("step_limit"))
    seconds = limits.get("seconds", agent.get("time_limit"))
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
