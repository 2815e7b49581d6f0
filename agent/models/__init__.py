"""Models: the one seam between the agent and a language model.

A `Model` answers `query(messages, tools)` with a `ModelResponse` and keeps `ModelStats`
(SWE-agent's `model_stats` names). `get_model(config)` picks the implementation:
`OpenAIModel` talks to any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, the scripted
server in `agent.models.scripted`); `HumanModel` reads replies from stdin for debugging.

Errors from the `openai` package never escape: they are translated here, and each message is
one sentence that says what to do::

    ModelError(RuntimeError)              exit_status "exit_api" unless noted
    ├── AuthenticationFailed              401/403: the API key was refused
    ├── ModelNotFound                     404: the model is not served at that URL
    ├── Unreachable                       connection refused, DNS or timeout, after retries
    ├── RateLimited                       429, still after all retries
    ├── ServerError                       5xx, still after all retries
    ├── BadRequest                        any other 4xx (never retried)
    │   └── ContextWindowExceeded         the conversation is too long ("exit_context")
    └── CostLimitExceeded                 a cost or call limit was reached ("exit_cost");
                                          raised BEFORE the call, `.limit` names the limit

Transient failures (429, 408, 409, 5xx, connection errors, timeouts) are retried here with
tenacity, exponential backoff and `Retry-After` honoured; the `openai` client's own retries are
off (`max_retries=0`) so that every attempt is ours and counted. The API key is read from the
environment variable named by `ModelConfig.api_key_env` at call time and never stored in the
config, a trajectory, a log record or an exception message.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, Literal, Protocol

import openai
from pydantic import BaseModel, ConfigDict, Field
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential

__all__ = [
    "DEFAULT_PRICES",
    "AuthenticationFailed",
    "BadRequest",
    "ContextWindowExceeded",
    "CostLimitExceeded",
    "GlobalStats",
    "HumanModel",
    "Model",
    "ModelConfig",
    "ModelError",
    "ModelNotFound",
    "ModelResponse",
    "ModelStats",
    "OpenAIModel",
    "RateLimited",
    "RetryConfig",
    "ServerError",
    "ToolCall",
    "Unreachable",
    "get_model",
]

logger = logging.getLogger(__name__)

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
DUMMY_API_KEY = "sk-none"
"""Sent when the key variable is unset: local servers accept any key, OpenAI answers 401."""

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # USD per 1M tokens (input, output), OpenAI list prices as of 2025; override in config.
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}

# --------------------------------------------------------------------------- exceptions


class ModelError(RuntimeError):
    """A model call failed; the message says what to do."""

    exit_status: ClassVar[str] = "exit_api"


class AuthenticationFailed(ModelError):
    """The server refused the API key (HTTP 401 or 403)."""


class ModelNotFound(ModelError):
    """The server does not serve the requested model (HTTP 404)."""


class Unreachable(ModelError):
    """No answer from the server: connection refused, DNS failure or timeout."""


class RateLimited(ModelError):
    """Still rate-limited (HTTP 429) after all retries."""


class ServerError(ModelError):
    """The server kept failing (HTTP 5xx) after all retries."""


class BadRequest(ModelError):
    """The server rejected the request (HTTP 4xx); retrying would not help."""


class ContextWindowExceeded(BadRequest):
    """The conversation no longer fits the model's context window."""

    exit_status: ClassVar[str] = "exit_context"


CostLimitName = Literal["per_instance_cost_limit", "total_cost_limit", "per_instance_call_limit"]


class CostLimitExceeded(ModelError):
    """A cost or call limit was reached; raised before the call that would pass it."""

    exit_status: ClassVar[str] = "exit_cost"

    def __init__(self, limit: CostLimitName, value: float, spent: float) -> None:
        self.limit = limit
        self.value = value
        self.spent = spent
        what = "calls made" if limit == "per_instance_call_limit" else "spent"
        super().__init__(
            f"{limit} of {value:g} reached ({spent:g} {what}): "
            f"raise {limit} in the model config to continue"
        )


# --------------------------------------------------------------------------- config


class RetryConfig(BaseModel):
    """How transient failures (429, 5xx, connection errors, timeouts) are retried."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(
        default=5, ge=1, description="Total attempts per query, the first included."
    )
    min_wait: float = Field(default=1.0, ge=0, description="Seconds before the first retry.")
    max_wait: float = Field(
        default=60.0, ge=0, description="Upper bound on one wait, Retry-After included."
    )


class ModelConfig(BaseModel):
    """Which model to call, where, and how much it may cost."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description='Model name sent to the server; "human" reads stdin.')
    base_url: str | None = Field(
        default=None, description="Server base URL; None → $OPENAI_BASE_URL → the OpenAI API."
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable holding the key (the key is never "
        f"stored); unset → the dummy key {DUMMY_API_KEY!r}, which local servers accept.",
    )
    temperature: float | None = Field(default=0.0, description="None → not sent (server default).")
    top_p: float | None = Field(default=None, description="None → not sent.")
    max_output_tokens: int | None = Field(default=None, ge=1, description="None → not sent.")
    function_calling: bool = Field(
        default=True,
        description="True: tools are sent as OpenAI functions and the model answers with "
        "tool calls. False: text mode, tools are never sent (the prompt describes them).",
    )
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Model name → (input, output) USD per 1M tokens, merged over "
        "DEFAULT_PRICES. A model without a price costs 0 (one warning).",
    )
    retries: RetryConfig = Field(default_factory=RetryConfig)
    timeout: float = Field(default=120.0, gt=0, description="Seconds to wait for one HTTP answer.")
    per_instance_cost_limit: float = Field(
        default=3.0, ge=0, description="USD per instance; 0 = none."
    )
    total_cost_limit: float = Field(
        default=0.0, ge=0, description="USD across a batch (shared GlobalStats); 0 = none."
    )
    per_instance_call_limit: int = Field(
        default=0, ge=0, description="Calls per instance; 0 = none."
    )

    def resolved_base_url(self) -> str:
        """The base URL actually used."""
        return (
            self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
        ).rstrip("/")

    def price(self) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for this model, or None when unknown."""
        table = {**DEFAULT_PRICES, **self.prices}
        for candidate in _name_variants(self.name):
            if candidate in table:
                return table[candidate]
        return None


def _name_variants(name: str) -> list[str]:
    """`openai/gpt-4o-2024-08-06` is priced as `gpt-4o` when no exact entry exists."""
    bare = name.rsplit("/", 1)[-1]
    undated = re.sub(r"-\d{4}-\d{2}-\d{2}$", "", bare)
    return list(dict.fromkeys([name, bare, undated]))


# --------------------------------------------------------------------------- results


class ModelStats(BaseModel):
    """Per-instance usage, written to a trajectory's `info.model_stats`."""

    instance_cost: float = 0.0
    tokens_sent: int = 0
    tokens_received: int = 0
    api_calls: int = 0


class GlobalStats:
    """Cost across all instances of a batch; share one object between their models."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total_cost = 0.0
        self.api_calls = 0

    def add(self, cost: float) -> None:
        with self._lock:
            self.total_cost += cost
            self.api_calls += 1


@dataclass(frozen=True)
class ToolCall:
    """One tool call from the model. `arguments` is `raw_arguments` parsed; when that is not a
    JSON object, `arguments` is empty and `error` says why (for format-error feedback)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    error: str | None = None

    @classmethod
    def parse(cls, id: str, name: str, raw_arguments: str) -> ToolCall:
        try:
            parsed = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return cls(id, name, {}, raw_arguments, f"arguments are not valid JSON: {exc}")
        if not isinstance(parsed, dict):
            return cls(id, name, {}, raw_arguments, "arguments must be a JSON object")
        return cls(id, name, parsed, raw_arguments)


@dataclass(frozen=True)
class ModelResponse:
    """One answer: text content, tool calls, token usage and cost in USD."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens_sent: int = 0
    tokens_received: int = 0
    cost: float = 0.0
    finish_reason: str | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI format)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.raw_arguments},
                }
                for call in self.tool_calls
            ]
        return msg


class Model(Protocol):
    """What the loop needs from a model."""

    stats: ModelStats

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse: ...


# --------------------------------------------------------------------------- OpenAI


_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|window)|maximum context|too many tokens|prompt is too long|"
    r"reduce the length",
    re.IGNORECASE,
)
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
_warned_unpriced: set[str] = set()
_warned_lock = threading.Lock()


def _warn_unpriced_once(name: str) -> None:
    with _warned_lock:
        if name in _warned_unpriced:
            return
        _warned_unpriced.add(name)
    logger.warning(
        "no price known for model %r: its cost counts as 0 and cost limits do not apply; "
        "add it to the model config's prices",
        name,
    )


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds asked for by a `Retry-After(-ms)` header, when it is a number."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            continue  # an HTTP date: not worth parsing, fall back to backoff
    return None


class OpenAIModel:
    """A model behind any OpenAI-compatible chat completions endpoint."""

    def __init__(self, config: ModelConfig, global_stats: GlobalStats | None = None) -> None:
        self.config = config
        self.stats = ModelStats()
        self.global_stats = global_stats if global_stats is not None else GlobalStats()
        self.base_url = config.resolved_base_url()
        self._key_is_set = bool(os.environ.get(config.api_key_env))
        self._client = openai.OpenAI(
            api_key=os.environ.get(config.api_key_env) or DUMMY_API_KEY,
            base_url=self.base_url,
            timeout=config.timeout,
            max_retries=0,  # retries are ours (tenacity), so they are counted and logged
        )
        self._backoff = wait_exponential(
            multiplier=config.retries.min_wait or 1.0,
            min=config.retries.min_wait,
            max=config.retries.max_wait,
        )

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        """Ask the model once (retrying transient failures); update stats; return its answer."""
        self._check_limits()
        try:
            completion = self._retrying()(self._create, messages, tools)
        except openai.OpenAIError as exc:
            raise self._translate(exc) from _chain(exc)
        response = self._parse(completion)
        self.stats.instance_cost += response.cost
        self.stats.tokens_sent += response.tokens_sent
        self.stats.tokens_received += response.tokens_received
        self.stats.api_calls += 1
        self.global_stats.add(response.cost)
        return response

    def _check_limits(self) -> None:
        cfg = self.config
        if cfg.per_instance_cost_limit and self.stats.instance_cost >= cfg.per_instance_cost_limit:
            raise CostLimitExceeded(
                "per_instance_cost_limit", cfg.per_instance_cost_limit, self.stats.instance_cost
            )
        if cfg.total_cost_limit and self.global_stats.total_cost >= cfg.total_cost_limit:
            raise CostLimitExceeded(
                "total_cost_limit", cfg.total_cost_limit, self.global_stats.total_cost
            )
        if cfg.per_instance_call_limit and self.stats.api_calls >= cfg.per_instance_call_limit:
            raise CostLimitExceeded(
                "per_instance_call_limit", cfg.per_instance_call_limit, self.stats.api_calls
            )

    def _retrying(self) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(self.config.retries.attempts),
            wait=self._wait,
            retry=retry_if_exception(_is_transient),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = _retry_after(exc)
        if asked is not None:
            return min(asked, self.config.retries.max_wait)
        return float(self._backoff(state))

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        status = getattr(exc, "status_code", None) or type(exc).__name__
        logger.warning(
            "model call to %s failed (%s), attempt %d of %d; retrying in %.2fs",
            self.base_url,
            status,
            state.attempt_number,
            self.config.retries.attempts,
            wait,
        )

    def _create(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.name, "messages": messages}
        reasoning = bool(_REASONING_MODEL.match(cfg.name.rsplit("/", 1)[-1]))
        if not reasoning:  # reasoning models refuse sampling parameters
            if cfg.temperature is not None:
                kwargs["temperature"] = cfg.temperature
            if cfg.top_p is not None:
                kwargs["top_p"] = cfg.top_p
        if cfg.max_output_tokens is not None:
            key = "max_completion_tokens" if reasoning else "max_tokens"
            kwargs[key] = cfg.max_output_tokens
        if tools and cfg.function_calling:
            kwargs["tools"] = tools
        return self._client.chat.completions.create(**kwargs)

    def _parse(self, completion: Any) -> ModelResponse:
        if not completion.choices:
            raise ModelError(f"{self.base_url} answered with no choices: check the server")
        choice = completion.choices[0]
        calls = []
        for tc in choice.message.tool_calls or []:
            if tc.type == "function":
                calls.append(ToolCall.parse(tc.id, tc.function.name, tc.function.arguments))
            else:  # a custom (free-text) tool call
                calls.append(ToolCall.parse(tc.id, tc.custom.name, tc.custom.input))
        usage = completion.usage
        sent = usage.prompt_tokens if usage else 0
        received = usage.completion_tokens if usage else 0
        price = self.config.price()
        if price is None:
            _warn_unpriced_once(self.config.name)
            cost = 0.0
        else:
            cost = (sent * price[0] + received * price[1]) / 1_000_000
        return ModelResponse(
            content=choice.message.content or "",
            tool_calls=calls,
            tokens_sent=sent,
            tokens_received=received,
            cost=cost,
            finish_reason=choice.finish_reason,
        )

    def _translate(self, exc: openai.OpenAIError) -> ModelError:
        url, name, attempts = self.base_url, self.config.name, self.config.retries.attempts
        if isinstance(exc, openai.APITimeoutError):
            return Unreachable(
                f"no answer from {url} within {self.config.timeout:g}s after {attempts} "
                "attempt(s): check the server or raise the model timeout"
            )
        if isinstance(exc, openai.APIConnectionError):
            return Unreachable(
                f"cannot reach {url} after {attempts} attempt(s): check --base-url and that "
                "the server is running"
            )
        if not isinstance(exc, openai.APIStatusError):
            return ModelError(f"model call to {url} failed ({type(exc).__name__}): {exc}")
        status = exc.status_code
        if status in (401, 403):
            unset = "" if self._key_is_set else " (it is unset)"
            return AuthenticationFailed(
                f"the API key was refused by {url} (HTTP {status}): set "
                f"{self.config.api_key_env}{unset} to a valid key for this server"
            )
        if status == 404:
            return ModelNotFound(f"model {name!r} is not served at {url}: {self._served_hint()}")
        if status == 429:
            return RateLimited(
                f"{url} is still rate-limiting after {attempts} attempt(s): wait, lower the "
                "concurrency, or raise retries.attempts"
            )
        if status >= 500:
            return ServerError(
                f"{url} kept failing (HTTP {status}) after {attempts} attempt(s): "
                f"{_server_message(exc)}; check the server logs and retry later"
            )
        message = _server_message(exc)
        if exc.code == "context_length_exceeded" or _CONTEXT_OVERFLOW.search(message):
            return ContextWindowExceeded(
                f"the conversation ({self.stats.tokens_sent} tokens sent so far) no longer fits "
                f"the context window of {name!r}: use a model with a longer context or shorter "
                "observations"
            )
        return BadRequest(f"{url} rejected the request (HTTP {status}): {message}")

    def _served_hint(self) -> str:
        """Name the served models when the server can list them (one short request)."""
        try:
            served = [m.id for m in self._client.models.list(timeout=5.0)]
        except openai.OpenAIError:
            served = []
        if served:
            return "pass one of the served models with --model: " + ", ".join(served[:10])
        return f"list the served models with `curl {self.base_url}/models`"


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return exc.message


def _chain(exc: openai.OpenAIError) -> openai.OpenAIError | None:
    # A 401/403 body may echo (part of) the key, as OpenAI does: do not chain it.
    if isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403):
        return None
    return exc


# --------------------------------------------------------------------------- human


_TOOL_LINE = re.compile(r"^/tool\s+(\S+)\s*(.*)$")


class HumanModel:
    """Replies typed on stdin, for debugging a loop without a model.

    Type a thought (any lines) then either a fenced block (``` ... ```), which ends the reply,
    or a line `/tool NAME {json arguments}`, which ends the reply as one tool call.
    """

    def __init__(
        self,
        config: ModelConfig | None = None,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ) -> None:
        self.config = config
        self.stats = ModelStats()
        self._in = stdin if stdin is not None else sys.stdin
        self._out = stdout if stdout is not None else sys.stdout

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        if messages:
            last = messages[-1]
            print(f"--- {last.get('role', '?')} ---\n{last.get('content') or ''}", file=self._out)
        print("--- your reply (thought, then ```block``` or /tool NAME {json}) ---", file=self._out)
        response = self._read_reply()
        self.stats.api_calls += 1
        return response

    def _read_reply(self) -> ModelResponse:
        lines: list[str] = []
        in_block = False
        while True:
            line = self._in.readline()
            if not line:
                raise ModelError("stdin closed before a complete reply: type a reply or stop")
            text = line.rstrip("\n")
            match = None if in_block else _TOOL_LINE.match(text)
            if match:
                call = ToolCall.parse(f"call_human_{self.stats.api_calls}", *match.groups())
                if call.error:
                    print(f"{call.error}; type the /tool line again", file=self._out)
                    continue
                return ModelResponse(content="\n".join(lines), tool_calls=[call])
            lines.append(text)
            if text.lstrip().startswith("```"):
                if in_block:
                    return ModelResponse(content="\n".join(lines))
                in_block = True


# --------------------------------------------------------------------------- factory


def get_model(config: ModelConfig, global_stats: GlobalStats | None = None) -> Model:
    """The model for `config.name`: "human" reads stdin, anything else is OpenAI-compatible."""
    if config.name == "human":
        return HumanModel(config)
    return OpenAIModel(config, global_stats)
