"""Other agents' trajectories, read in one place: as a :class:`~agent.record.trajectory.RunRecord`
saying what they lacked (:func:`convert`), and as the model replies a recorded run holds
(:func:`trajectory_replies`: what the replay model answers with, and what ``pgs replay`` and the
inspector compare reply by reply), with the command mini-swe-agent ran for each
(:func:`mini_command`).

- pgs (``trajectory_format`` ``pgs-<n>``, or a ``pgs`` key, or a ``replay_config`` with
  ``sandbox`` and ``tools``): read as it is;
- SWE-agent 0.x and 1.x: the same layout (``trajectory``, ``history``, ``info``,
  ``replay_config``), with 1.x's ``replay_config`` a JSON string and 0.x's step ``state`` one
  too; an older or partial file loads with what it has;
- mini-swe-agent 1.x (``mini-swe-agent-1``) and 2.x (``-1.1``): ``info`` and ``messages``; the
  messages become the ``history`` and each assistant message a step (its reply, the command
  it ran as its ``extra.actions``, tool call or bash block say, the next message as the
  observation with its exit code).

Nothing in :func:`convert` raises on a damaged file that is still a JSON object: every part
that is absent, or present but unreadable (a value of the wrong type), becomes a sentence
``"missing: <what>"`` in :attr:`RunRecord.missing` and the record goes without it. The replies
of a file that is no recording (:func:`trajectory_kind`) raise ValueError.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import ValidationError

from agent.record.pgs import CONVERSATION_KEY, PGSRecord
from agent.record.steps import Info
from agent.record.trajectory import RunRecord, Writer

#: What the most important parts hold, named in their missing notes.
PARTS = {
    "info": "info (exit status, submission, model stats)",
    "history": "history (the conversation)",
    "trajectory": "trajectory (the steps)",
    "replay_config": "replay_config (the run's configuration)",
}
_RETURNCODE = re.compile(r"\A<returncode>(-?\d+)</returncode>")
_DROPPED_STEP = re.compile(r"missing: trajectory\.(\d+) \(unreadable")
#: The action of a mini-swe-agent text reply, as its parsers read it: 1.x's ```bash block,
#: 2.x's ```mswea_bash_command (the body up to a line break and ```; exactly one).
_MINI_BLOCKS = (
    re.compile(r"```bash\s*\n(.*?)\n```", re.S),
    re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.S),
)
#: Keys only SWE-agent writes in ``info``.
_SWE_AGENT_INFO = {"swe_agent_version", "swe_agent_hash", "edited_files30"}


#: A trajectory of any writer has at least one of these keys (or mini-swe-agent's ``messages``).
TRAJECTORY_KEYS = ("trajectory", "history", "info")


class NotATrajectoryError(ValueError):
    """Parsed JSON that is no trajectory: ``found`` names what it holds instead."""

    def __init__(self, found: str) -> None:
        super().__init__(f"not a trajectory (found: {found})")
        self.found = found


def record_of(data: Any) -> RunRecord:
    """Any writer's parsed trajectory (pgs, SWE-agent, mini-swe-agent) as a record, with what
    it lacked in :attr:`RunRecord.missing` (:func:`convert`); :class:`NotATrajectoryError` for
    JSON that has none of :data:`TRAJECTORY_KEYS`."""
    if not isinstance(data, dict) or not any(key in data for key in (*TRAJECTORY_KEYS, "messages")):
        found = ", ".join(sorted(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise NotATrajectoryError(found or "nothing")
    return convert(data)


def writer_of(data: dict[str, Any]) -> Writer:
    """Which agent wrote ``data``'s layout."""
    version = data.get("trajectory_format")
    if isinstance(version, str) and version.startswith("mini-swe-agent"):
        return "mini-swe-agent"
    if isinstance(data.get("messages"), list) and "history" not in data:
        return "mini-swe-agent"
    replay = data.get("replay_config")
    replay_keys = set(replay) if isinstance(replay, dict) else set()
    if isinstance(version, str) and version.startswith("pgs-"):
        return "pgs"
    if "pgs" in data or {"sandbox", "tools"} <= replay_keys:
        return "pgs"
    info = data.get("info")
    info_keys = set(info) if isinstance(info, dict) else set()
    if (
        "environment" in data
        or _SWE_AGENT_INFO & info_keys
        or {"env", "problem_statement"} & replay_keys
        or isinstance(replay, str)
    ):
        return "swe-agent"
    return "unknown"


def convert(data: dict[str, Any]) -> RunRecord:
    """``data`` (a parsed trajectory of any writer) as a record; see the module doc."""
    writer = writer_of(data)
    missing: list[str] = []
    data = _from_mini(data, missing) if writer == "mini-swe-agent" else _from_swe_agent(data)
    for key, what in PARTS.items():
        if key not in data and not (key == "replay_config" and writer == "mini-swe-agent"):
            missing.append(f"missing: {what}")
    record = _tolerant(data, missing)
    info = record.info
    if info.exit_status is None:
        missing.append("missing: info.exit_status (how the run ended)")
    if "submission" not in info.model_fields_set:
        missing.append("missing: info.submission (the final patch)")
    if info.model_stats is None and not any("info.model_stats" in m for m in missing):
        missing.append("missing: info.model_stats (tokens and cost)")
    record.writer, record.missing = writer, missing
    return record


def info_of(data: dict[str, Any]) -> Info | None:
    """A trajectory's ``info`` (any writer's) as it reads, a value that does not read left out
    (``model_fields_set`` says what the file held); None when it has no ``info`` object."""
    found = data.get("info")
    if not isinstance(found, dict):
        return None
    return _tolerant({"info": found}, []).info


def read_pgs_record(data: dict[str, Any]) -> tuple[PGSRecord, list[str]]:
    """A ``pgs`` record as it reads: every value that does not is dropped and named (``missing:
    pgs.<where> (unreadable: ...)``)."""
    missing: list[str] = []
    record = _tolerant({"pgs": data}, missing)
    return record.pgs_record, missing


def conversations(pgs: PGSRecord) -> dict[str, RunRecord]:
    """The Tester's conversations stored in a ``pgs`` record (``tester``, ``tester_2``, ...),
    each as a record of its own (:func:`convert`: what it lacks in its ``missing``)."""
    return {
        key: convert(value)
        for key, value in (pgs.model_extra or {}).items()
        if CONVERSATION_KEY.fullmatch(key) and isinstance(value, dict)
    }


def _tolerant(data: dict[str, Any], missing: list[str]) -> RunRecord:
    """``data`` as a record, every value that does not read dropped and named in ``missing``."""
    data = json.loads(json.dumps(data, default=str))  # a copy that may be cut
    for _ in range(1000):  # each pass drops at least one value
        try:
            return RunRecord.load(data)
        except ValidationError as e:
            error = e.errors()[0]  # one at a time: a union's branches name one place twice
            where = _drop(data, list(error["loc"]))
            if where is None:
                break
            missing.append(f"missing: {where} (unreadable: {error['msg']})")
    missing.append("missing: everything (the file does not read as a trajectory)")
    return RunRecord()


def _drop(data: Any, loc: list[Any]) -> str | None:
    """Remove the deepest value on the path ``loc`` that is there (a validation error's place,
    whose last parts may name a union's branch); where it was, or None."""
    parent: Any = None
    key: Any = None
    target = data
    path: list[str] = []
    for part in loc:
        found = (isinstance(target, dict) and part in target) or (
            isinstance(target, list) and isinstance(part, int) and 0 <= part < len(target)
        )
        if not found:
            break
        parent, key, target = target, part, target[part]
        path.append(str(part))
    if parent is None:
        return None
    del parent[key]
    return ".".join(path)


def _from_swe_agent(data: dict[str, Any]) -> dict[str, Any]:
    """SWE-agent's strings of JSON (1.x's ``replay_config``, 0.x's step ``state``) parsed."""
    out = dict(data)
    replay = out.get("replay_config")
    if isinstance(replay, str):
        out["replay_config"] = _json_object(replay) or {"text": replay}
    steps = out.get("trajectory")
    if isinstance(steps, list):
        out["trajectory"] = [_swe_agent_step(s) for s in steps]
    return out


def dropped_steps(missing: list[str]) -> list[int]:
    """Where in the file's ``trajectory`` (0-based) the steps were that did not read at all (no
    JSON object), from a record's ``missing``: each was dropped in turn, the later ones named at
    their place in the shortened list."""
    found: list[int] = []
    for note in missing:
        step = _DROPPED_STEP.match(note)
        if step:
            found.append(int(step.group(1)) + len(found))
    return found


def _swe_agent_step(step: Any) -> Any:
    if not isinstance(step, dict) or not isinstance(step.get("state"), str):
        return step
    state = step["state"]
    parsed = _json_object(state)
    if parsed is None and state.lstrip().startswith("{"):  # older SWE-agent: a dict's repr
        try:
            found = ast.literal_eval(state)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            found = None
        parsed = found if isinstance(found, dict) else None
    return {**step, "state": parsed if parsed is not None else {"state": state.strip()}}


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _from_mini(data: dict[str, Any], missing: list[str]) -> dict[str, Any]:
    """mini-swe-agent's messages as the history, each assistant message a step."""
    messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    out = {k: v for k, v in data.items() if k != "messages"}
    out["history"] = messages
    steps = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        content = message_text(message.get("content"))
        following = messages[i + 1] if i + 1 < len(messages) else {}
        observation = message_text(following.get("content"))
        extra = following.get("extra")
        code = extra.get("returncode") if isinstance(extra, dict) else None
        found = _RETURNCODE.match(observation)
        if code is None and found:
            code = int(found.group(1))
        steps.append(
            {
                "action": mini_command(message) or "",
                "observation": observation,
                "response": content,
                "thought": content,
                "exit_code": code if isinstance(code, int) else None,
            }
        )
    out["trajectory"] = steps
    missing.append("missing: execution_time (mini-swe-agent does not record it)")
    return out


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts with ``text`` (OpenAI's and
    litellm's shapes); anything else is no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


# -- a recording's replies ------------------------------------------------------------------------


def mini_command(message: dict[str, Any]) -> str | None:
    """The command mini-swe-agent ran for a reply: 2.x's recorded action (``extra.actions``),
    else the first tool call's ``command`` argument, else the reply's one action block (1.x's
    ```` ```bash ````, 2.x's ```` ```mswea_bash_command ````); None when it has none."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        return str(actions[0].get("command", "")).strip()
    reply = reply_of(message) or {"content": "", "tool_calls": []}
    calls = reply["tool_calls"]
    if calls:
        arguments = calls[0]["arguments"]
        if not isinstance(arguments, dict):
            arguments = _json_object(str(arguments or ""))
        if arguments is not None and "command" in arguments:
            return str(arguments["command"])
    for pattern in _MINI_BLOCKS:
        blocks = pattern.findall(reply["content"])
        if len(blocks) == 1 and blocks[0].strip():
            return str(blocks[0]).strip()
    return None


def trajectory_kind(traj: Any) -> str:
    """Who wrote a recorded run: ``mini-swe-agent`` (``messages``), else ``swe-agent`` / ``pgs``
    (``history``; pgs's has a ``pgs`` record or a config with ``sandbox`` and ``tools``).
    Raises ValueError for anything else."""
    if not isinstance(traj, dict):
        raise ValueError("expected a JSON object")
    if isinstance(traj.get("messages"), list):
        return "mini-swe-agent"
    if not isinstance(traj.get("history"), list):
        raise ValueError("no 'history' or 'messages' list")
    config = traj.get("replay_config")
    if "pgs" in traj or (isinstance(config, dict) and {"sandbox", "tools"} <= set(config)):
        return "pgs"
    return "swe-agent"


def reply_of(message: Any) -> dict[str, Any] | None:
    """A message that is a model reply as a reply step (``content``, ``tool_calls`` as ``name``
    and ``arguments``): an assistant message, or mini-swe-agent 2.x's Responses API ``output``;
    None for any other message."""
    if not isinstance(message, dict):
        return None
    if message.get("role") == "assistant":
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            calls.append({"name": function.get("name"), "arguments": function.get("arguments")})
        return {"content": message_text(message.get("content")), "tool_calls": calls}
    if isinstance(message.get("output"), list):  # mini 2.x, a Responses API reply
        items = [o for o in message["output"] if isinstance(o, dict)]
        text = "".join(message_text(o.get("content")) for o in items if o.get("type") == "message")
        calls = [
            {"name": o.get("name"), "arguments": o.get("arguments")}
            for o in items
            if o.get("type") == "function_call"
        ]
        return {"content": text, "tool_calls": calls}
    return None


def trajectory_replies(traj: Any, agent: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The model's replies of a recorded run, in order, as ``(where, step)``: ``where`` names
    the message (``history[7]``, ``messages[4]``), ``step`` is a reply step (content, tool
    calls). ``agent``: only that agent's messages (a pgs ``.traj`` holds the Tester's too)."""
    kind = trajectory_kind(traj)
    key = "messages" if kind == "mini-swe-agent" else "history"
    replies = []
    for i, message in enumerate(traj[key]):
        if not isinstance(message, dict) or message.get("is_demo"):
            continue
        if agent and message.get("agent", agent) != agent:
            continue
        raw = reply_of(message)
        if raw is not None:
            replies.append((f"{key}[{i}]", raw))
    if kind == "swe-agent" and not agent:
        replies += _unlisted_steps(traj, replies)
    return replies


def _unlisted_steps(traj: dict[str, Any], listed: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The replies a SWE-agent ``.traj`` keeps only in ``trajectory``: some 1.x runs saved the
    history before their last step (SWE-agent's own test data: the ``submit`` of
    ``6e44b9__sweagenttestrepo-1c2844.traj`` is its fifth step, its history holds four replies).
    A step's ``response`` is the reply; in a run with tool calls, an action of one word (the
    submission) was a call of that tool without arguments."""
    steps = traj.get("trajectory")
    if not isinstance(steps, list) or len(steps) <= len(listed):
        return []
    calling = any(step.get("tool_calls") for _, step in listed)
    out = []
    for n in range(len(listed), len(steps)):
        step = steps[n] if isinstance(steps[n], dict) else {}
        action = str(step.get("action") or "").strip()
        calls = []
        if calling and re.fullmatch(r"[\w-]+", action):
            calls = [{"name": action, "arguments": "{}"}]
        content = message_text(step.get("response")) or message_text(step.get("thought"))
        out.append((f"trajectory[{n}]", {"content": content, "tool_calls": calls}))
    return out


def recorded_model_name(traj: dict[str, Any]) -> str | None:
    """The model a SWE-agent or pgs run was recorded with (``replay_config.agent.model.name``)."""
    config: Any = traj.get("replay_config")
    try:
        if isinstance(config, str):
            config = json.loads(config)
        name = config["agent"]["model"]["name"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None
