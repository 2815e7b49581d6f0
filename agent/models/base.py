"""The model seam's shared parts: configuration, usage records and the `Model` protocol.

A `Model` answers `query(messages, tools)` with a `ModelResponse` and keeps `ModelStats`
(SWE-agent's `model_stats` names). Implementations live beside this module (`openai`, `human`,
`replay`); `agent.models.get_model` picks one.

Errors never escape as another library's exceptions: each implementation translates its own
into these (defined in :mod:`agent.errors`), and each message is one sentence that says what
to do::

    ModelError(RuntimeError)              exit_status "exit_api" unless noted
    ├── AuthenticationFailed              401/403: the API key was refused
    ├── ModelNotFound                     404: the model is not served at that URL
    ├── Unreachable                       connection refused, DNS or timeout, after retries
    ├── RateLimited                       429, still after all retries
    ├── ServerError                       5xx, still after all retries
    ├── MalformedResponse                 an answer that is no chat completion (HTML, truncated
    │                                     JSON, no message, non-numeric usage), after retries
    ├── BadRequest                        any other 4xx (never retried)
    │   └── ContextWindowExceeded         the conversation is too long ("exit_context")
    ├── CostLimitExceeded                 a cost or call limit was reached ("exit_cost");
    │                                     raised BEFORE the call, `.limit` names the limit
    ├── UnknownPrice                      a cost limit is on but the model has no price:
    │                                     raised before the run starts (`require_price`)
    └── ModelClassError                   `model_class` names no usable class (registry)
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from agent.errors import CostLimitExceeded, UnknownPrice
from agent.models.prices import LITELLM_MISSING, litellm_installed, litellm_price
from agent.record.trajectory import ModelStats

__all__ = [
    "DEFAULT_PRICES",
    "OPENAI_DEFAULT_BASE_URL",
    "BaseURL",
    "GlobalStats",
    "Model",
    "ModelConfig",
    "ModelResponse",
    "ModelStats",
    "PriceSource",
    "Pricing",
    "RetryConfig",
    "ToolCall",
    "check_limits",
    "check_url",
    "is_context_overflow",
    "is_transient_status",
    "priced_stats",
    "record_usage",
    "require_price",
]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

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


_SCHEME = re.compile(r"^https?://[^/\s]", re.IGNORECASE)


def check_url(url: str) -> None:
    """Raise ValueError, saying what to write, for a base URL that is not http(s)://HOST...
    (`localhost:8000` → `http://localhost:8000`: httpx would take `localhost` for a scheme)."""
    if not _SCHEME.match(url.strip()):
        bare = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://", "", url.strip()).lstrip("/")
        raise ValueError(
            f"{url!r} has no http:// or https:// scheme: write http://{bare} (or https://{bare})"
        )


def _checked_url(value: str) -> str:
    try:
        check_url(value)
    except ValueError as exc:  # a custom error: pydantic would prefix "Value error, "
        raise PydanticCustomError("url_scheme", str(exc)) from None
    return value


#: A base URL, refused at parse time without its scheme (`check_url`).
BaseURL = Annotated[str, AfterValidator(_checked_url)]

_MODEL_CLASS = re.compile(r"^\w+$|^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


class ModelConfig(BaseModel):
    """Which model to call, where, and how much it may cost."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description='Model name sent to the server; "human" reads stdin, "replay" answers '
        "in-process from model.script; provider/model (anthropic/claude-sonnet-4-5) goes "
        "through litellm."
    )
    base_url: BaseURL | None = Field(
        default=None,
        description="Server base URL with its scheme (http://localhost:8000/v1); None → "
        "$OPENAI_BASE_URL → the OpenAI API. The saved config records the URL used.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable holding the key (the key is never "
        "stored); unset: no key is sent (local servers need none), and the OpenAI API or a "
        "provider's own is refused before the run starts.",
    )
    check_endpoint: bool = Field(
        default=True,
        description="Before any image or sandbox work, ask the server whether it answers and "
        "takes the key (GET /models, one try of a few seconds; a 404 counts as reachable). "
        "false: skip it, for a server that comes up later.",
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
        description="Model name → (input, output) USD per 1M tokens, over DEFAULT_PRICES and "
        "litellm's cost map. A model without a price is refused while a cost limit is on.",
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
    model_class: str | None = Field(
        default=None,
        description="The model implementation, over the choice made by name: a built-in "
        "(openai, litellm, human, replay) or an import path package.module:Class, constructed "
        "as Class(config, global_stats). litellm (pip install 'pgs-agent[litellm]') is chosen "
        "by a provider prefix too: anthropic/..., gemini/..., bedrock/...",
    )
    script: str | None = Field(
        default=None,
        description="For the replay model: the script it answers from, as for serve-script: "
        "steps (.yaml/.json), a policy (file.py, module:function) or a .traj to replay.",
    )

    @field_validator("model_class")
    @classmethod
    def _import_path_shape(cls, value: str | None) -> str | None:
        if value is not None and not _MODEL_CLASS.match(value):
            raise ValueError(
                f"{value!r} is neither a built-in model name nor an import path: write "
                "package.module:Class"
            )
        return value

    def resolved_base_url(self) -> str:
        """The base URL actually used."""
        return (
            self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
        ).rstrip("/")

    def base_url_source(self) -> str:
        """Where `resolved_base_url` comes from, as a user would change it."""
        if self.base_url:
            return "--base-url"
        return "OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else "the default"

    def price(self) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for this model, or None when unknown."""
        pricing = self.pricing()
        return None if pricing is None else pricing.per_million

    def pricing(self) -> Pricing | None:
        """This model's price and where it comes from: `prices` ("config") over DEFAULT_PRICES
        ("table"), then litellm's cost map when litellm is installed ("litellm"); None when
        none of them knows the model."""
        for candidate in _name_variants(self.name):
            if candidate in self.prices:
                return Pricing(tuple(self.prices[candidate]), "config")  # type: ignore[arg-type]
            if candidate in DEFAULT_PRICES:
                return Pricing(DEFAULT_PRICES[candidate], "table")
        found = litellm_price(self.name)
        return None if found is None else Pricing(found, "litellm")

    def cost_limits(self) -> list[str]:
        """The cost limits in force (`per_instance_cost_limit`, `total_cost_limit`)."""
        return [
            name for name in ("per_instance_cost_limit", "total_cost_limit") if getattr(self, name)
        ]


PriceSource = Literal["config", "table", "litellm"]


@dataclass(frozen=True)
class Pricing:
    """A model's price, (input, output) USD per 1M tokens, and where it was found: the model
    config's `prices` ("config"), pgs's DEFAULT_PRICES ("table") or litellm's cost map."""

    per_million: tuple[float, float]
    source: PriceSource

    def cost(self, sent: int, received: int) -> float:
        return (sent * self.per_million[0] + received * self.per_million[1]) / 1_000_000


def require_price(config: ModelConfig, *, who: str = "model") -> Pricing | None:
    """The model's pricing; None (cost counted as 0) only when no cost limit is on. Raises
    UnknownPrice, one line saying how to fix it, when a cost limit is on and no price is known:
    the limit would silently never be reached."""
    pricing = config.pricing()
    limits = config.cost_limits()
    if pricing is not None or not limits:
        return pricing
    where = "model.prices or pgs's table" + (
        ", nor in litellm's cost map"
        if litellm_installed()
        else f" ({LITELLM_MISSING} adds litellm's cost map of thousands of models)"
    )
    spent = " and ".join(f"{limit} of {getattr(config, limit):g} USD" for limit in limits)
    off = " ".join(f"--model.{limit.replace('_', '-')} 0" for limit in limits)
    example = json.dumps({config.name: [1.0, 2.0]})
    message = (
        f"no price known for the {who} {config.name!r} (not in {where}), so the {spent} "
        f"cannot hold: give its price in USD per 1M tokens (input, output) with "
        f"--model.prices '{example}' (or model.prices in --config), or run without cost "
        f"limits with {off}"
    )
    raise UnknownPrice(message)


def _name_variants(name: str) -> list[str]:
    """`openai/gpt-4o-2024-08-06` is priced as `gpt-4o` when no exact entry exists."""
    bare = name.rsplit("/", 1)[-1]
    undated = re.sub(r"-\d{4}-\d{2}-\d{2}$", "", bare)
    return list(dict.fromkeys([name, bare, undated]))


# --------------------------------------------------------------------------- results


def priced_stats(pricing: Pricing | None) -> ModelStats:
    """Empty stats (:class:`agent.record.trajectory.ModelStats`) that name the price they are
    counted with."""
    if pricing is None:
        return ModelStats(price_source="unpriced")
    return ModelStats(price_source=pricing.source, price=pricing.per_million)


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


# --------------------------------------------------------------------------- accounting


def check_limits(config: ModelConfig, stats: ModelStats, global_stats: GlobalStats) -> None:
    """Raise CostLimitExceeded when the next call would start past a limit of `config`."""
    if config.per_instance_cost_limit and stats.instance_cost >= config.per_instance_cost_limit:
        raise CostLimitExceeded(
            "per_instance_cost_limit", config.per_instance_cost_limit, stats.instance_cost
        )
    if config.total_cost_limit and global_stats.total_cost >= config.total_cost_limit:
        raise CostLimitExceeded(
            "total_cost_limit", config.total_cost_limit, global_stats.total_cost
        )
    if config.per_instance_call_limit and stats.api_calls >= config.per_instance_call_limit:
        raise CostLimitExceeded(
            "per_instance_call_limit", config.per_instance_call_limit, stats.api_calls
        )


def record_usage(stats: ModelStats, global_stats: GlobalStats, response: ModelResponse) -> None:
    """Count one answered call in the instance's and the batch's stats."""
    stats.instance_cost += response.cost
    stats.tokens_sent += response.tokens_sent
    stats.tokens_received += response.tokens_received
    stats.api_calls += 1
    global_stats.add(response.cost)


# --------------------------------------------------------------------------- error kinds

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|window)|maximum context|too many tokens|prompt is too long|"
    r"reduce the length",
    re.IGNORECASE,
)


def is_transient_status(status: int) -> bool:
    """An HTTP status worth retrying: 408, 409, 429 or any 5xx."""
    return status in (408, 409, 429) or status >= 500


def is_context_overflow(code: str | None, message: str) -> bool:
    """A 4xx that says the conversation no longer fits the context window."""
    return code == "context_length_exceeded" or bool(_CONTEXT_OVERFLOW.search(message))
