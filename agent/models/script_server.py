"""A scripted OpenAI-compatible server: tests and replays without a hosted model.

`ScriptedServer(script)` answers `POST /v1/chat/completions` (non-streaming) and
`GET /v1/models` on 127.0.0.1 from a script (steps, a policy or a `.traj`; the format and the
token counting are in `agent.models.script_format`), so the real `openai` client, our retries, token
usage and tool-call parsing run for real. When the steps run out the server answers 400
"script exhausted after N replies". The served model name is the script's (or `--model`); when
none is set, any requested model is accepted and echoed back, otherwise another name gets 404
`model_not_found`. Tool call ids are `call_<n>`, unique per server.

Command line: `pgs serve-script SCRIPT [--port N] [--host 127.0.0.1] [--model NAME]`
(`agent.cli.serve`), or `python -m agent.models.script_server SCRIPT [...]`. For unit tests without
HTTP, `agent.models.replay.ReplayModel` answers from the same scripts in-process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agent.errors import ScriptError
from agent.models.script_format import (
    ErrorReply,
    RawReply,
    Reply,
    ScriptSource,
    load_script,
    message_tokens,
    reply_message,
)

# ScriptSource and ScriptError are the server's own interface: what it takes, what it raises.
__all__ = ["ScriptError", "ScriptSource", "ScriptedServer", "add_arguments", "main", "serve"]

logger = logging.getLogger(__name__)


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
        self._httpd = _QuietServer((host, port), _handler_for(self))
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

    def answer_chat(self, body: Any) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
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
        if isinstance(step, RawReply):
            return step.status, step.raw.encode(), {"Content-Type": step.content_type}
        return 200, self._completion(step, requested or self.model_names[0], body), {}

    def _completion(self, step: Reply, model: str, body: dict[str, Any]) -> dict[str, Any]:
        message = reply_message(step, self._ids)
        prompt = sum(message_tokens(m) for m in body["messages"] if isinstance(m, dict))
        completion = message_tokens(message)
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


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up before its answer is written (a run that stops, a timeout) is
    the client's business: one debug line, not socketserver's traceback on stderr, which lands
    in the middle of the output of whatever shares the process or the terminal."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            logger.debug("%s hung up before its answer: %s", client_address, error)
        else:
            logger.exception("answering %s failed", client_address)


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

        def _send(self, status: int, body: dict[str, Any] | bytes, headers: dict[str, str]) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            headers = {"Content-Type": "application/json", **headers}
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s %s", self.address_string(), format % args)

    return Handler


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `serve-script` (shared by `agent.cli.serve` and `main`)."""
    parser.add_argument("script", help="steps (.yaml/.json), policy (.py, module:func) or .traj")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default=None, help="the served model name (default: any)")


def serve(script: str, host: str = "127.0.0.1", port: int = 0, model: str | None = None) -> int:
    """Serve until Ctrl-C; a malformed script is one line on stderr and exit code 2."""
    try:
        server = ScriptedServer(script, host=host, port=port, model=model)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"serving {script} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent.models.script_server", description=(__doc__ or "").split("\n\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    return serve(args.script, host=args.host, port=args.port, model=args.model)


if __name__ == "__main__":
    sys.exit(main())
