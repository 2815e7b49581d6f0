"""Scripts: what the scripted server and the replay model answer with.

A script is one of:

- a list of steps, or a YAML/JSON file holding one (or a mapping `{model: NAME, steps: [...]}`,
  with `repo_path: /repo` when the replies name the repository's path, see below); steps are
  consumed in order. A step is a reply
  `{content: "...", tool_calls: [{name: ..., arguments: {...}}]}` (arguments may also be a raw
  string, sent verbatim) or an HTTP error to inject
  `{error: 429, retry_after: 0, message: ..., code: ...}`, or a raw body to answer with
  verbatim `{raw: "<html>...", status: 200, content_type: text/html}` (a malformed answer, as a
  misconfigured proxy or a broken server sends). When the steps run out the answer is an error
  "script exhausted after N replies";
- a policy: a callable `policy(request_json) -> step | None`, given directly or loaded from
  `module:function`, `file.py` (its function `policy`) or `file.py:function`; it is given the
  chat completion request body (`model`, `messages`, `tools`);
- a recorded run: the assistant messages (content and tool calls) become the steps, so the run
  can be replayed. Read from a SWE-agent or pgs `.traj` (its `history`, demonstrations and other
  agents' messages left out) and from a mini-swe-agent trajectory (`messages`;
  `trajectory_format` `mini-swe-agent-1`, or `mini-swe-agent-1.1` of mini-swe-agent 2.x, whose
  messages are the model's own: chat completions with `tool_calls`, or a Responses API `output`
  list). A file is a recording when it is named `*.traj` or `*.traj.json`, or when its mapping
  has `history` or `messages`; its replies are read by :mod:`agent.record.foreign`, the one
  reader of other agents' files (:func:`~agent.record.foreign.trajectory_replies`, exported
  here too).

A recorded session names the repository where it was recorded (`/repo` in a Docker sandbox). A
script whose mapping says so (`repo_path`) can be replayed where the repository is elsewhere (the
local sandbox's copy): after `Script.serve_repo_at(path)` every reply names `path` in its place,
in its text and its tool calls' arguments (:func:`moved_reply`).

Usage is counted deterministically: `count_tokens(text) = ceil(len(text) / 4)`. Prompt tokens
are the sum over request messages of `message_tokens` (the count of their text content plus
each tool call's name and arguments); completion tokens the same for the reply.

A script that cannot be loaded raises `ScriptError`, naming the file, the step and the field.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ScriptError
from agent.record.foreign import (
    message_text,
    recorded_model_name,
    trajectory_kind,
    trajectory_replies,
)

__all__ = [
    "ErrorReply",
    "Policy",
    "RawReply",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptSource",
    "ScriptedToolCall",
    "Step",
    "count_tokens",
    "load_script",
    "message_tokens",
    "moved_reply",
    "parse_step",
    "reply_message",
    "trajectory_kind",
    "trajectory_replies",
]


class ScriptedToolCall(BaseModel):
    """One tool call the server answers with."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="A JSON object, or a raw string sent verbatim."
    )


class Reply(BaseModel):
    """A successful completion."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)


class ErrorReply(BaseModel):
    """An HTTP error to inject (for retry, auth and context-overflow tests)."""

    model_config = ConfigDict(extra="forbid")

    error: int = Field(ge=400, le=599, description="HTTP status code.")
    message: str | None = None
    code: str | None = Field(
        default=None, description='OpenAI error code, e.g. "context_length_exceeded".'
    )
    retry_after: float | None = Field(
        default=None, ge=0, description="Retry-After header, in seconds."
    )


class RawReply(BaseModel):
    """A body sent verbatim (for tests of malformed answers: HTML, truncated JSON, ...)."""

    model_config = ConfigDict(extra="forbid")

    raw: str = Field(description="The body, sent as it is.")
    status: int = Field(default=200, ge=100, le=599, description="HTTP status code.")
    content_type: str = Field(default="application/json", description="Content-Type header.")


Step = Reply | ErrorReply | RawReply
Policy = Callable[[dict[str, Any]], Any]


def parse_step(raw: Any, where: str = "step") -> Step:
    """Validate one step; a bad one raises ScriptError naming `where` and the field."""
    if isinstance(raw, Reply | ErrorReply | RawReply):
        return raw
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected a mapping, got {type(raw).__name__}")
    kind: type[Reply] | type[ErrorReply] | type[RawReply] = (
        ErrorReply if "error" in raw else RawReply if "raw" in raw else Reply
    )
    try:
        return kind.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        fieldname = ".".join(str(part) for part in first["loc"]) or "(step)"
        raise ScriptError(f"{where}: field {fieldname!r}: {first['msg']}") from None


class Script:
    """Steps served in order, or a policy asked for each request. Thread-safe."""

    def __init__(
        self,
        steps: list[Step] | None = None,
        policy: Policy | None = None,
        model: str | None = None,
        repo_path: str | None = None,
    ) -> None:
        if (steps is None) == (policy is None):
            raise ValueError("give exactly one of steps or policy")
        self.steps = steps
        self.policy = policy
        self.model = model
        #: The repository's path the replies name (where they were recorded), if they do.
        self.repo_path = repo_path
        self._moved_to: str | None = None
        self._next = 0
        self._lock = threading.Lock()

    def serve_repo_at(self, path: str) -> None:
        """From now on, replies name ``path`` where they name :attr:`repo_path` (the repository
        is there in the sandbox the session is replayed in)."""
        if self.repo_path is None:
            raise ScriptError("the script names no repo_path: its replies cannot be moved")
        self._moved_to = None if path == self.repo_path else path

    def next_step(self, request: dict[str, Any]) -> Step | str:
        """The step for this request, or the 400 message explaining why there is none."""
        if self.policy is not None:
            try:
                raw = self.policy(request)
            except Exception as exc:  # the user's policy: report, do not kill the server
                return f"script policy raised {type(exc).__name__}: {exc}"
            if raw is None:
                return "script policy returned no step"
            try:
                return parse_step(raw, "policy step")
            except ScriptError as exc:
                return str(exc)
        assert self.steps is not None
        with self._lock:
            if self._next >= len(self.steps):
                return (
                    f"script exhausted after {len(self.steps)} replies: add steps to the script "
                    "or stop the agent earlier"
                )
            step = self.steps[self._next]
            self._next += 1
        if isinstance(step, Reply) and self._moved_to is not None and self.repo_path:
            return moved_reply(step, self.repo_path, self._moved_to)
        return step


def moved_reply(reply: Reply, old: str, new: str) -> Reply:
    """``reply`` with the path ``old`` (a whole path component sequence: ``/repo``, ``/repo/x``,
    never ``/repository``) replaced by ``new``, in its text and its tool calls' arguments."""
    pattern = re.compile(r"(?<![\w.~/-])" + re.escape(old.rstrip("/")) + r"(?![\w~-]|\.\w)")

    def move(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda _: new, value)
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        if isinstance(value, list):
            return [move(item) for item in value]
        return value

    calls = [
        call.model_copy(update={"arguments": move(call.arguments)}) for call in reply.tool_calls
    ]
    return reply.model_copy(update={"content": move(reply.content), "tool_calls": calls})


ScriptSource = Script | list[Any] | Policy | str | Path


def load_script(source: ScriptSource, model: str | None = None) -> Script:
    """A Script from steps, a policy, or a path / `module:function` (see the module doc)."""
    if isinstance(source, Script):
        if model is not None:
            source.model = model
        return source
    if isinstance(source, list):
        return Script(steps=_parse_steps(source, "script"), model=model)
    if callable(source):
        return Script(policy=source, model=model)
    return _load_from_string(str(source), model)


def _parse_steps(raw: list[Any], origin: str) -> list[Step]:
    return [parse_step(item, f"{origin}: step {i + 1}") for i, item in enumerate(raw)]


def _load_from_string(text: str, model: str | None) -> Script:
    path = Path(text)
    if path.suffix == ".py" or (":" in text and not path.exists()):
        return Script(policy=_load_policy(text), model=model)
    if not path.is_file():
        raise ScriptError(f"{text}: no such script file")
    if path.suffix == ".traj" or path.name.endswith(".traj.json"):
        return _load_traj(path, model)
    try:
        data = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScriptError(f"{path}: not valid YAML{at}: {problem}") from None
    if isinstance(data, dict) and ({"history", "messages"} & set(data)):
        return _load_traj(path, model)
    repo_path = None
    if isinstance(data, dict):
        unknown = set(data) - {"model", "steps", "repo_path"}
        if unknown or "steps" not in data:
            raise ScriptError(
                f"{path}: a mapping script needs 'steps' (and optional 'model', 'repo_path')"
            )
        model = model or data.get("model")
        repo_path = data.get("repo_path")
        if repo_path is not None and not (isinstance(repo_path, str) and repo_path[:1] == "/"):
            raise ScriptError(f"{path}: 'repo_path' must be an absolute path, like /repo")
        data = data["steps"]
    if not isinstance(data, list):
        raise ScriptError(f"{path}: expected a list of steps, got {type(data).__name__}")
    return Script(steps=_parse_steps(data, str(path)), model=model, repo_path=repo_path)


def _load_policy(spec: str) -> Policy:
    target, _, func = spec.rpartition(":") if spec.count(":") == 1 else (spec, "", "")
    func = func or "policy"
    try:
        if target.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
            if module_spec is None or module_spec.loader is None or not Path(target).is_file():
                raise ScriptError(f"{target}: no such policy file")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ScriptError:
        raise
    except Exception as exc:
        raise ScriptError(f"{spec}: cannot load the policy: {type(exc).__name__}: {exc}") from None
    policy = getattr(module, func, None)
    if not callable(policy):
        raise ScriptError(f"{spec}: no function {func!r} in {target}")
    return policy


def _load_traj(path: Path, model: str | None, agent: str | None = None) -> Script:
    """Steps from the assistant messages of a recorded run (:func:`trajectory_replies`)."""
    try:
        traj = json.loads(path.read_text())
        replies = trajectory_replies(traj, agent)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ScriptError(
            f"{path}: not a trajectory with a 'history' or 'messages' list ({exc})"
        ) from None
    steps = [parse_step(raw, f"{path}: {where}") for where, raw in replies]
    if not steps:
        raise ScriptError(f"{path}: the trajectory holds no assistant message to replay")
    return Script(steps=steps, model=model or recorded_model_name(traj))


# --------------------------------------------------------------------------- usage


def count_tokens(text: str) -> int:
    """The documented deterministic token count: ceil(characters / 4)."""
    return (len(text) + 3) // 4


def message_tokens(message: dict[str, Any]) -> int:
    """Tokens of one chat message: its text content plus each tool call's name and arguments."""
    total = count_tokens(message_text(message.get("content")))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        total += count_tokens(str(function.get("name", "")))
        total += count_tokens(str(function.get("arguments", "")))
    return total


def reply_message(step: Reply, call_ids: Iterator[int]) -> dict[str, Any]:
    """The assistant message (OpenAI format) a reply step answers with; tool call ids are
    `call_<n>`, n drawn from `call_ids`. Arguments given as a mapping are sent as JSON."""
    message: dict[str, Any] = {"role": "assistant", "content": step.content}
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{next(call_ids)}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments),
                },
            }
            for call in step.tool_calls
        ]
    return message
