"""`ReplayModel`: answers from a script in-process, for fast deterministic tests of the loop.

The script is the scripted server's (`agent.models.script_format`: steps, a policy or a
`.traj`), and the answers are the ones `OpenAIModel` gets from that server, without HTTP:

- a reply step gives the same `ModelResponse`: content, tool calls (ids `call_<n>`, arguments
  parsed by `ToolCall.parse`, so malformed ones carry their error), finish reason, and tokens
  counted as the server counts them (`message_tokens` of the request messages and the reply);
  the cost is 0 unless `ModelConfig.prices` (or the default prices) price `config.name`;
- an error step raises what `OpenAIModel` raises for that HTTP status; transient ones (408,
  409, 429, 5xx) are retried up to `retries.attempts`, each retry taking the next step, with no
  wait (Retry-After is ignored: replays are instant);
- a raw step (a body the server would send verbatim) is an answer that is no chat completion:
  retried as a transient error, then `MalformedResponse`;
- a script that runs out raises `BadRequest` "script exhausted after N replies";
- the cost and call limits of the config apply as they do to `OpenAIModel`.

The served model name of a script (`model:`) is not checked. Selected by `--model replay
--model.script FILE` (or `model_class: replay`); tests may pass `script=` directly. Each
`ReplayModel` reads its own copy of a script file.
"""

from __future__ import annotations

import itertools
from typing import Any

from agent.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    MalformedResponse,
    ModelError,
    ModelNotFound,
    RateLimited,
    ScriptError,
    ServerError,
)
from agent.models.base import (
    GlobalStats,
    ModelConfig,
    ModelResponse,
    ModelStats,
    ToolCall,
    check_limits,
    is_context_overflow,
    is_transient_status,
    record_usage,
)
from agent.models.script_format import (
    ErrorReply,
    RawReply,
    Reply,
    ScriptSource,
    Step,
    load_script,
    message_tokens,
    reply_message,
)

__all__ = ["ReplayModel"]


def _is_transient(step: Step | str) -> bool:
    """Retried as `OpenAIModel` retries it: 408, 409, 429, 5xx, and a malformed answer."""
    if isinstance(step, ErrorReply):
        return is_transient_status(step.error)
    return isinstance(step, RawReply)


class ReplayModel:
    """A model that answers from a script, in-process. `.requests` holds the request bodies
    (`model`, `messages`, `tools`) it was asked, in order, as the scripted server keeps them."""

    def __init__(
        self,
        config: ModelConfig,
        global_stats: GlobalStats | None = None,
        *,
        script: ScriptSource | None = None,
    ) -> None:
        self.config = config
        self.stats = ModelStats()
        self.global_stats = global_stats if global_stats is not None else GlobalStats()
        source = script if script is not None else config.script
        if source is None:
            raise ScriptError(
                "the replay model needs a script: pass --model.script FILE (steps .yaml/.json, "
                "a policy file.py or module:function, or a .traj)"
            )
        self.script = load_script(source)
        self.where = f"replay script {config.script}" if script is None else "replay script"
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        """The script's next answer to these messages; update stats; return it."""
        check_limits(self.config, self.stats, self.global_stats)
        request: dict[str, Any] = {"model": self.config.name, "messages": list(messages)}
        if tools and self.config.function_calling:
            request["tools"] = tools
        # Transient errors are retried as OpenAIModel retries them, each retry a new step.
        attempts, attempt = self.config.retries.attempts, 1
        step = self._next_step(request)
        while _is_transient(step) and attempt < attempts:
            attempt += 1
            step = self._next_step(request)
        if not isinstance(step, Reply):
            raise self._error(step, attempts)
        response = self._response(step, request["messages"])
        record_usage(self.stats, self.global_stats, response)
        return response

    def _next_step(self, request: dict[str, Any]) -> Step | str:
        self.requests.append(request)
        return self.script.next_step(request)

    def _response(self, step: Reply, messages: list[dict[str, Any]]) -> ModelResponse:
        message = reply_message(step, self._ids)
        calls = [
            ToolCall.parse(call["id"], call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls", [])
        ]
        sent = sum(message_tokens(m) for m in messages if isinstance(m, dict))
        received = message_tokens(message)
        price = self.config.price()
        cost = 0.0 if price is None else (sent * price[0] + received * price[1]) / 1_000_000
        return ModelResponse(
            content=step.content or "",
            tool_calls=calls,
            tokens_sent=sent,
            tokens_received=received,
            cost=cost,
            finish_reason="tool_calls" if step.tool_calls else "stop",
        )

    def _error(self, step: ErrorReply | RawReply | str, attempts: int) -> ModelError:
        """The error `OpenAIModel` raises for this answer of the scripted server."""
        where = self.where
        if isinstance(step, RawReply):
            return MalformedResponse(
                f"{where} answered {attempts} time(s) with something that is not a chat "
                f"completion: {step.raw[:80]!r}"
            )
        if isinstance(step, str):  # exhausted, or the policy gave no step: the server's 400
            return BadRequest(f"{where} rejected the request: {step}")
        status, message = step.error, step.message or f"HTTP {step.error}"
        if status in (401, 403):
            return AuthenticationFailed(f"{where} refused the API key (HTTP {status}): {message}")
        if status == 404:
            return ModelNotFound(f"{where} does not serve {self.config.name!r}: {message}")
        if status == 429:
            return RateLimited(f"{where} is still rate-limiting after {attempts} attempt(s)")
        if status >= 500:
            return ServerError(
                f"{where} kept failing (HTTP {status}) after {attempts} attempt(s): {message}"
            )
        if is_context_overflow(step.code, message):
            return ContextWindowExceeded(
                f"the conversation ({self.stats.tokens_sent} tokens sent so far) no longer fits "
                f"the context window of {self.config.name!r}: {message}"
            )
        return BadRequest(f"{where} rejected the request (HTTP {status}): {message}")
