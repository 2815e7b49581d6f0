"""A scripted OpenAI-compatible server: tests and replays without a hosted model.

`ScriptedServer(script)` answers `POST /v1/chat/completions` (non-streaming) and
`GET /v1/models` on 127.0.0.1 from a script, so the real `openai` client, our retries, token
usage and tool-call parsing run for real. A script is one of:

- a list of steps, or a YAML/JSON file holding one (or a mapping `{model: NAME, steps: [...]}`);
  steps are consumed in order. A step is a reply
  `{content: "...", tool_calls: [{name: ..., arguments: {...}}]}` (arguments may also be a raw
  string, sent verbatim) or an HTTP error to inject
  `{error: 429, retry_after: 0, message: ..., code: ...}`. When the steps run out the server
  answers 400 "script exhausted after N replies";
- a policy: a callable `policy(request_json) -> step | None`, given directly or loaded from
  `module:function`, `file.py` (its function `policy`) or `file.py:function`;
- a SWE-agent-style `.traj` file: the assistant messages of its `history` (content and tool
  calls) become the steps, so a recorded run can be replayed.

Usage is counted deterministically: `count_tokens(text) = ceil(len(text) / 4)`. Prompt tokens
are the sum over request messages of the count of their text content plus each tool call's
name and arguments; completion tokens the same for the reply. The served model name is the
script's (or `--model`); when none is set, any requested model is accepted and echoed back,
otherwise another name gets 404 `model_not_found`. Tool call ids are `call_<n>`, unique per
server.

Command line (the lead registers it in `agent.cli`; `python -m agent.models.scripted` also works):
`serve-script SCRIPT [--port N] [--host 127.0.0.1] [--model NAME]`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "ErrorReply",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedServer",
    "ScriptedToolCall",
    "count_tokens",
    "load_script",
    "main",
    "parse_step",
    "register",
    "serve_script_command",
]

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------- script


class ScriptError(ValueError):
    """A script cannot be loaded; the message names the file, the step and the field."""


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


Step = Reply | ErrorReply
Policy = Callable[[dict[str, Any]], Any]


def parse_step(raw: Any, where: str = "step") -> Step:
    """Validate one step; a bad one raises ScriptError naming `where` and the field."""
    if isinstance(raw, Reply | ErrorReply):
        return raw
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected a mapping, got {type(raw).__name__}")
    kind: type[Reply] | type[ErrorReply] = ErrorReply if "error" in raw else Reply
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
    ) -> None:
        if (steps is None) == (policy is None):
            raise ValueError("give exactly one of steps or policy")
        self.steps = steps
        self.policy = policy
        self.model = model
        self._next = 0
        self._lock = threading.Lock()

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
            return step


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
    if path.suffix == ".traj":
        return _load_traj(path, model)
    try:
        data = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScriptError(f"{path}: not valid YAML{at}: {problem}") from None
    if isinstance(data, dict):
        unknown = set(data) - {"model", "steps"}
        if unknown or "steps" not in data:
            raise ScriptError(f"{path}: a mapping script needs 'steps' (and optional 'model')")
        model = model or data.get("model")
        data = data["steps"]
    if not isinstance(data, list):
        raise ScriptError(f"{path}: expected a list of steps, got {type(data).__name__}")
    return Script(steps=_parse_steps(data, str(path)), model=model)


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
    """Steps from the assistant messages of a trajectory's `history`."""
    try:
        traj = json.loads(path.read_text())
        history = traj["history"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ScriptError(f"{path}: not a trajectory with a 'history' list ({exc})") from None
    steps: list[Step] = []
    for i, message in enumerate(history):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if message.get("is_demo") or (agent and message.get("agent", agent) != agent):
            continue
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            calls.append({"name": function.get("name"), "arguments": function.get("arguments")})
        raw = {"content": _text(message.get("content")), "tool_calls": calls}
        steps.append(parse_step(raw, f"{path}: history[{i}]"))
    if not steps:
        raise ScriptError(f"{path}: the history holds no assistant message to replay")
    return Script(steps=steps, model=model or _traj_model_name(traj))


def _traj_model_name(traj: dict[str, Any]) -> str | None:
    config: Any = traj.get("replay_config")
    try:
        if isinstance(config, str):
            config = json.loads(config)
        name = config["agent"]["model"]["name"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


# --------------------------------------------------------------------------- usage


def count_tokens(text: str) -> int:
    """The documented deterministic token count: ceil(characters / 4)."""
    return (len(text) + 3) // 4


def _text(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _message_tokens(message: dict[str, Any]) -> int:
    total = count_tokens(_text(message.get("content")))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        total += count_tokens(str(function.get("name", "")))
        total += count_tokens(str(function.get("arguments", "")))
    return total


# --------------------------------------------------------------------------- server


class ScriptedServer:
    """Serve a script over HTTP on a background thread; use as a context manager.

    `.url` is the base URL (ending in /v1) to give an OpenAI client; `.requests` holds the
    chat-completion request bodies received, in order.
    """

    def __init__(
        self,
        script: ScriptSource,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str | None = None,
    ) -> None:
        self.script = load_script(script, model)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def model_names(self) -> list[str]:
        return [self.script.model or "scripted"]

    def start(self) -> ScriptedServer:
        # A short poll interval makes stop() (and so every test) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="scripted-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def serve_forever(self) -> None:
        """Serve on the calling thread until shutdown or Ctrl-C."""
        self._httpd.serve_forever()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- answers: (status, body, headers)

    def answer_models(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "pgs-scripted"}
            for name in self.model_names
        ]
        return 200, {"object": "list", "data": data}, {}

    def answer_chat(self, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the request body must be a JSON object with a 'messages' list")
        with self._lock:
            self.requests.append(body)
        if body.get("stream"):
            return _error(400, "the scripted server does not stream: call without stream=True")
        requested = str(body.get("model", ""))
        if self.script.model is not None and requested != self.script.model:
            return _error(
                404,
                f"The model `{requested}` does not exist; this server serves `{self.script.model}`",
                code="model_not_found",
            )
        step = self.script.next_step(body)
        if isinstance(step, str):
            return _error(400, step, code="script_exhausted")
        if isinstance(step, ErrorReply):
            headers = {}
            if step.retry_after is not None:
                headers["Retry-After"] = f"{step.retry_after:g}"
            default = _status_phrase(step.error)
            return _error(step.error, step.message or default, code=step.code, headers=headers)
        return 200, self._completion(step, requested or self.model_names[0], body), {}

    def _completion(self, step: Reply, model: str, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
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
        prompt = sum(_message_tokens(m) for m in body["messages"] if isinstance(m, dict))
        completion = _message_tokens(message)
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if step.tool_calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


def _error(
    status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return status, body, headers or {}


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and
        # delayed ACKs stall each keep-alive answer by about 40 ms.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(*server.answer_models())
            else:
                self._send(*_error(404, f"no route GET {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(*_error(404, f"no route POST {self.path}"))
                return
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._send(*_error(400, "the request body is not JSON"))
                return
            self._send(*server.answer_chat(body))

        def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s %s", self.address_string(), format % args)

    return Handler


# --------------------------------------------------------------------------- CLI


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `serve-script` to a CLI's subparsers; its handler is in `func`, returns exit code."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve-script",
        help="serve a script, policy or .traj as an OpenAI-compatible model",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("script", help="steps (.yaml/.json), policy (.py, module:func) or .traj")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default=None, help="the served model name (default: any)")
    parser.set_defaults(func=serve_script_command)
    return parser


def serve_script_command(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; a malformed script is one line on stderr and exit code 2."""
    try:
        server = ScriptedServer(args.script, host=args.host, port=args.port, model=args.model)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"serving {args.script} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.models.scripted")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve-script", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
