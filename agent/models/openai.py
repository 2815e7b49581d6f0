"""`OpenAIModel`: any OpenAI-compatible chat completions endpoint (OpenAI, vLLM, llama.cpp, the
scripted server in `agent.models.script_server`).

Errors from the `openai` package never escape: they are translated here into the tree drawn in
`agent.models.base`. Transient failures (429, 408, 409, 5xx, connection errors, timeouts, and
an answer that is no chat completion: an HTML page, truncated JSON, a choice without a message,
non-numeric usage) are retried here with tenacity, exponential backoff and `Retry-After`
honoured; the `openai` client's own retries are off (`max_retries=0`) so that every attempt is
ours and counted. The cost of an answer is its reported tokens at the model's price
(`ModelConfig.pricing`); without a price the model refuses to start while a cost limit is on
(`UnknownPrice`). The API key is read from the environment variable named by
`ModelConfig.api_key_env` at call time and never stored in the config, a trajectory, a log
record or an exception message.

No placeholder key is ever sent: with the variable unset, requests carry no `Authorization`
header (vLLM, llama.cpp, Ollama and the scripted server need none), and the OpenAI API itself
(`KEY_REQUIRED_HOSTS`) is refused before the first request. `OpenAIModel.preflight` (run by
`agent.models.check_endpoint` before any image or sandbox work) asks `GET {base_url}/models`
once, with a short timeout: connection refused, a name that does not resolve or no answer is
`Unreachable` ("is the server running at URL?"), 401/403 `AuthenticationFailed` ("set
OPENAI_API_KEY ..."); any other answer, a 404 of a server without `/models` included, counts
as reachable.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from typing import Any, ClassVar

import openai  # the package: absolute imports, this module is agent.models.openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential

from agent.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    InputError,
    MalformedResponse,
    ModelError,
    ModelNotFound,
    RateLimited,
    ServerError,
    Unreachable,
)
from agent.models.base import (
    GlobalStats,
    ModelConfig,
    ModelResponse,
    Pricing,
    ToolCall,
    check_limits,
    check_url,
    is_context_overflow,
    is_transient_status,
    priced_stats,
    record_usage,
    require_price,
)

__all__ = ["KEY_REQUIRED_HOSTS", "PREFLIGHT_TIMEOUT", "OpenAIModel", "probe"]

logger = logging.getLogger(__name__)

#: Hosts that always need a key: a request without one is refused before it is sent.
KEY_REQUIRED_HOSTS = frozenset({"api.openai.com"})
#: Seconds the pre-run request may take (one try: it only asks whether the server is there).
PREFLIGHT_TIMEOUT = 10.0
#: What the client is constructed with when no key is set: it wants one, but every request
#: omits the Authorization header (`_auth_headers`), so this is never sent.
_UNSENT = "unset"


def _auth_headers(key: str | None) -> dict[str, Any]:
    """Per-request headers: none with a key; without one, the Authorization header omitted."""
    return {} if key else {"Authorization": openai.Omit()}


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).hostname or ""


def _connection_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words (httpx's cause, read for its errno text)."""
    text = f"{exc} {exc.__cause__ or ''}"
    if re.search(r"Name or service not known|nodename nor servname|getaddrinfo|No address", text):
        return "the host name does not resolve"
    if "refused" in text.lower():
        return "connection refused"
    cause = exc.__cause__
    first = str(cause).strip().splitlines()[0] if cause and str(cause).strip() else ""
    return first[:120] or type(exc).__name__


def probe(url: str, key: str | None, *, what: str, fix: str) -> int:
    """`GET {url}/models` once (`PREFLIGHT_TIMEOUT`, no retries); the HTTP status of the
    answer (200 included). No answer raises Unreachable, one line naming `url` and `fix`;
    `what` names the server ("the model's server")."""
    client = openai.OpenAI(
        api_key=key or _UNSENT, base_url=url, timeout=PREFLIGHT_TIMEOUT, max_retries=0
    )
    try:
        client.models.list(extra_headers=_auth_headers(key))
    except openai.APITimeoutError:
        raise Unreachable(
            f"no answer from {what} at {url} within {PREFLIGHT_TIMEOUT:g}s: is the server "
            f"running at {url}? {fix}"
        ) from None
    except openai.APIConnectionError as exc:
        raise Unreachable(
            f"cannot reach {what} at {url} ({_connection_reason(exc)}): is the server running "
            f"at {url}? {fix}"
        ) from None
    except openai.APIStatusError as exc:
        return exc.status_code
    except (ValueError, TypeError, openai.OpenAIError):  # an answer, if not a model list
        return 200
    finally:
        client.close()
    return 200


_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, MalformedResponse | openai.APIConnectionError):  # includes timeouts
        return True
    if isinstance(exc, openai.APIStatusError):
        return is_transient_status(exc.status_code)
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

    #: It bills per token: without a price, a cost limit could never be reached, so the model
    #: refuses to start (`require_price`); `agent.models.check_priced` asks this before a run.
    needs_price: ClassVar[bool] = True

    def __init__(self, config: ModelConfig, global_stats: GlobalStats | None = None) -> None:
        self._init_accounting(config, global_stats, config.resolved_base_url())
        key = os.environ.get(config.api_key_env)
        self._headers = _auth_headers(key)
        self._client = openai.OpenAI(
            api_key=key or _UNSENT,
            base_url=self.base_url,
            timeout=config.timeout,
            max_retries=0,  # retries are ours (tenacity), so they are counted and logged
        )

    @classmethod
    def preflight(cls, config: ModelConfig, *, who: str = "model") -> None:
        """Before any image or sandbox work: the server at the base URL answers (`probe`)
        and does not refuse the key; else AuthenticationFailed or Unreachable, one line that
        names the URL, the key's variable and the fix. A bad `OPENAI_BASE_URL` is an
        InputError."""
        url = config.resolved_base_url()
        source = config.base_url_source()
        try:
            check_url(url)
        except ValueError as exc:
            raise InputError(f"{source}: {exc}") from None
        key = os.environ.get(config.api_key_env)
        _require_key(config, url, key, who=who)
        if source == "the default":
            fix = "check the network, or pass --base-url for a server of your own"
        else:
            fix = f"start it, or fix {source}"
        what = "the model's server" if who == "model" else f"the {who}'s server"
        status = probe(url, key, what=what, fix=fix)
        if status in (401, 403):
            var = config.api_key_env
            unset = "" if key else " (it is unset: no key was sent)"
            raise AuthenticationFailed(
                f"{url} refused the API key of {var}{unset} (HTTP {status}): set {var} to a "
                f"valid key for this server"
            )

    def _init_accounting(
        self, config: ModelConfig, global_stats: GlobalStats | None, base_url: str
    ) -> None:
        """What every HTTP model shares: its price (or UnknownPrice), stats, retry backoff."""
        self.config = config
        self.pricing: Pricing | None = require_price(config)
        self.stats = priced_stats(self.pricing)
        self.global_stats = global_stats if global_stats is not None else GlobalStats()
        self.base_url = base_url
        self._key_is_set = bool(os.environ.get(config.api_key_env))
        self._backoff = wait_exponential(
            multiplier=config.retries.min_wait or 1.0,
            min=config.retries.min_wait,
            max=config.retries.max_wait,
        )

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        """Ask the model once (retrying transient failures); update stats; return its answer."""
        check_limits(self.config, self.stats, self.global_stats)
        self._check_key()
        try:
            response = self._retrying()(self._attempt, messages, tools)
        except openai.OpenAIError as exc:
            raise self._translate(exc) from _chain(exc)
        except MalformedResponse as exc:
            raise MalformedResponse(
                f"{self.base_url} answered {self.config.retries.attempts} time(s) with something "
                f"that is not a chat completion (last: {exc}): check that --base-url is an "
                "OpenAI-compatible API (it usually ends in /v1) and the server's logs"
            ) from None
        record_usage(self.stats, self.global_stats, response)
        return response

    def _check_key(self) -> None:
        """Nothing is sent without a key where one is always needed (`_require_key`)."""
        _require_key(self.config, self.base_url, os.environ.get(self.config.api_key_env))

    def _retrying(self) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(self.config.retries.attempts),
            wait=self._wait,
            retry=retry_if_exception(self._is_transient),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _is_transient(self, exc: BaseException) -> bool:
        return _is_transient(exc)

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
        if isinstance(exc, MalformedResponse):
            status = str(exc)
        logger.warning(
            "model call to %s failed (%s), attempt %d of %d; retrying in %.2fs",
            self.base_url,
            status,
            state.attempt_number,
            self.config.retries.attempts,
            wait,
        )

    def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> ModelResponse:
        """One call and its answer read; an answer that is no chat completion raises
        MalformedResponse (retried) saying what was wrong with it."""
        try:
            completion = self._create(messages, tools)
        except ValueError as exc:  # the body is not JSON (json.JSONDecodeError, bad UTF-8)
            raise MalformedResponse(f"a body that is not JSON: {exc}") from None
        try:
            return self._parse(completion)
        except (AttributeError, TypeError, ValueError) as exc:  # fields of the wrong type
            raise MalformedResponse(f"{type(exc).__name__}: {exc}") from None

    def _create(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        kwargs = self._request(messages, tools)
        return self._client.chat.completions.create(**kwargs, extra_headers=self._headers)

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        """The chat completion request's fields (OpenAI's names)."""
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
        return kwargs

    def _parse(self, completion: Any) -> ModelResponse:
        # The client builds its models without validating them: check every field read here.
        if isinstance(completion, str):  # a body that is not JSON (an HTML page)
            raise MalformedResponse(f"a body that is not JSON: {completion[:80]!r}")
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise MalformedResponse("a choice without a message")
        if not isinstance(message.content, str | None):
            raise MalformedResponse("a message whose content is not text")
        calls = []
        for tc in message.tool_calls or []:
            if tc.type == "function":
                name, arguments = tc.function.name, tc.function.arguments
            else:  # a custom (free-text) tool call
                name, arguments = tc.custom.name, tc.custom.input
            if not isinstance(name, str) or not isinstance(arguments, str):
                raise MalformedResponse("a tool call without a name or arguments")
            calls.append(ToolCall.parse(str(tc.id), name, arguments))
        usage = completion.usage
        sent = _token_count(usage.prompt_tokens if usage else 0)
        received = _token_count(usage.completion_tokens if usage else 0)
        cost = 0.0 if self.pricing is None else self.pricing.cost(sent, received)
        return ModelResponse(
            content=message.content or "",
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
        status = self._status(exc)
        if status is None:
            return ModelError(f"model call to {url} failed ({type(exc).__name__}): {exc}")
        if status in (401, 403):
            unset = "" if self._key_is_set else " (it is unset)"
            return AuthenticationFailed(
                f"the API key was refused by {url} (HTTP {status}): set "
                f"{self._key_name()}{unset} to a valid key for this server"
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
        if is_context_overflow(getattr(exc, "code", None), message):
            return ContextWindowExceeded(
                f"the conversation ({self.stats.tokens_sent} tokens sent so far) no longer fits "
                f"the context window of {name!r}: use a model with a longer context or shorter "
                "observations"
            )
        return BadRequest(f"{url} rejected the request (HTTP {status}): {message}")

    def _key_name(self) -> str:
        """The environment variable the key is read from, as a user would set it."""
        return self.config.api_key_env

    def _status(self, exc: openai.OpenAIError) -> int | None:
        """The HTTP status an error carries, when it is an answer of the server."""
        return exc.status_code if isinstance(exc, openai.APIStatusError) else None

    def _served_hint(self) -> str:
        """Name the served models when the server can list them (one short request)."""
        try:
            listed = self._client.models.list(timeout=5.0, extra_headers=self._headers)
            served = [m.id for m in listed]
        except openai.OpenAIError:
            served = []
        if served:
            return "pass one of the served models with --model: " + ", ".join(served[:10])
        return f"list the served models with `curl {self.base_url}/models`"


def _require_key(config: ModelConfig, url: str, key: str | None, *, who: str = "model") -> None:
    """AuthenticationFailed, before any request, when `url` is one that always needs a key
    (`KEY_REQUIRED_HOSTS`) and none is set: nothing else would be sent but a refused request."""
    if key or _host(url) not in KEY_REQUIRED_HOSTS:
        return
    whose = "" if who == "model" else f" for the {who}"
    raise AuthenticationFailed(
        f"no API key{whose} for {url}: set {config.api_key_env} to your OpenAI key (or pass "
        "--base-url for a server of your own, which needs none)"
    )


def _token_count(value: Any) -> int:
    """A usage field as a count: absent is 0 (some servers leave one out), a number that is no
    count (text, negative) makes the answer malformed."""
    if value is None:
        return 0
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e12:
        return int(value)
    raise MalformedResponse(f"non-numeric usage ({value!r})")


def _server_message(exc: openai.OpenAIError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(getattr(exc, "message", exc))


def _chain(exc: openai.OpenAIError) -> openai.OpenAIError | None:
    # A 401/403 body may echo (part of) the key, as OpenAI does: do not chain it.
    if isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403):
        return None
    return exc
