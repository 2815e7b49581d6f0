"""Counting tokens: the model's own tokenizer when it can be had, else :class:`SimpleCounter`.

:func:`get_counter` picks one: tiktoken for OpenAI names, a vLLM server's ``/tokenize``,
else the fallback. Feedback uses the count to pick the failing input with the fewest tokens
(:func:`agent.pgs.feedback.select_failure`); ``pgs report`` counts feedback messages with
:class:`SimpleCounter` whatever the model, so runs compare.

The token-count rule of :class:`SimpleCounter`, the documented fallback: the number of matches
of the regular expression ``\\w+|[^\\w\\s]`` — a run of letters, digits and underscores (an
identifier or a number) counts as one token, every other non-space character (punctuation,
brackets, operators, quotes) counts as one, whitespace counts as nothing. ``xs=[0, 0]`` is
``xs`` ``=`` ``[`` ``0`` ``,`` ``0`` ``]``: 7 tokens.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Literal, Protocol

from agent.models import OPENAI_DEFAULT_BASE_URL, ModelConfig

logger = logging.getLogger(__name__)

TokenizerName = Literal["auto", "tiktoken", "vllm", "simple"]


class TokenizerUnavailable(RuntimeError):
    """A tokenizer cannot be loaded or stopped answering; the caller falls back to simple."""


class TokenCounter(Protocol):
    """Counts tokens of a text the way one model (or the fallback rule) does."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


_SIMPLE_TOKEN = re.compile(r"\w+|[^\w\s]")


class SimpleCounter:
    """The deterministic fallback: matches of ``\\w+|[^\\w\\s]`` (see the module docstring)."""

    name = "simple"

    def count(self, text: str) -> int:
        return sum(1 for _ in _SIMPLE_TOKEN.finditer(text))


class TiktokenCounter:
    """OpenAI models through the optional ``tiktoken`` package.

    Raises :class:`TokenizerUnavailable` when the package is missing or its encoding cannot be
    loaded (tiktoken downloads the BPE file on first use, which fails offline).
    """

    def __init__(self, model: str) -> None:
        try:
            import tiktoken
        except ImportError:
            raise TokenizerUnavailable("the tiktoken package is not installed") from None
        bare = model.rsplit("/", 1)[-1]
        try:
            try:
                self._encoding = tiktoken.encoding_for_model(bare)
            except KeyError:  # a newer name than this tiktoken knows: the current encoding
                self._encoding = tiktoken.get_encoding("o200k_base")
        except Exception as exc:  # network, cache or file errors: all mean "not here"
            raise TokenizerUnavailable(
                f"tiktoken cannot load an encoding for {model!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.name = f"tiktoken:{self._encoding.name}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


class VllmCounter:
    """A vLLM server's tokenizer: POST ``<base_url without /v1>/tokenize``.

    The request is ``{"model", "prompt", "add_special_tokens": false}``; the answer's ``count``
    is used, else the length of its ``tokens``. Any failure raises :class:`TokenizerUnavailable`.
    """

    def __init__(self, base_url: str, model: str, timeout: float = 10.0) -> None:
        self.url = tokenize_url(base_url)
        self.model = model
        self.timeout = timeout
        self.name = f"vllm:{model}"

    def count(self, text: str) -> int:
        body = json.dumps({"model": self.model, "prompt": text, "add_special_tokens": False})
        request = urllib.request.Request(
            self.url,
            data=body.encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TokenizerUnavailable(f"{self.url} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, bad JSON
            raise TokenizerUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from None
        if isinstance(answer, dict):
            if isinstance(answer.get("count"), int):
                return int(answer["count"])
            if isinstance(answer.get("tokens"), list):
                return len(answer["tokens"])
        raise TokenizerUnavailable(f"{self.url} answered neither 'count' nor 'tokens'")


def tokenize_url(base_url: str) -> str:
    """``http://host:8000/v1`` → ``http://host:8000/tokenize`` (vLLM serves it at the root)."""
    root = base_url.rstrip("/")
    root = root.removesuffix("/v1")
    return f"{root}/tokenize"


_OPENAI_NAME = re.compile(r"^(gpt-|o\d|chatgpt-|text-embedding-)")
_probe_lock = threading.Lock()
#: (tokenize URL, model) → whether the server answered: probed once per process.
_vllm_probes: dict[tuple[str, str], bool] = {}
#: model name → the tiktoken counter, or the reason it is unavailable: loaded once per process.
_tiktoken_cache: dict[str, TiktokenCounter | str] = {}


def _tiktoken(model: str) -> TiktokenCounter:
    with _probe_lock:
        cached = _tiktoken_cache.get(model)
        if cached is None:
            try:
                cached = TiktokenCounter(model)
            except TokenizerUnavailable as exc:
                cached = str(exc)
            _tiktoken_cache[model] = cached
    if isinstance(cached, str):
        raise TokenizerUnavailable(cached)
    return cached


def _vllm(base_url: str, model: str) -> VllmCounter:
    counter = VllmCounter(base_url, model, timeout=3.0)
    key = (counter.url, model)
    with _probe_lock:
        answered = _vllm_probes.get(key)
        if answered is None:
            try:
                counter.count("ping")
                answered = True
            except TokenizerUnavailable as exc:
                logger.debug("no tokenize endpoint: %s", exc)
                answered = False
            _vllm_probes[key] = answered
    if not answered:
        raise TokenizerUnavailable(f"{counter.url} does not answer tokenize requests")
    return VllmCounter(base_url, model)


def get_counter(
    model_config: ModelConfig | None, tokenizer: TokenizerName | None = None
) -> TokenCounter:
    """The token counter for a model; never raises.

    ``tokenizer`` None → the config's ``tokenizer`` setting when it has one, else ``"auto"``.
    ``"auto"``: tiktoken for OpenAI names (gpt-*, o1/o3/o4…), else the server's tokenize
    endpoint when it answers (probed once per URL and model), else :class:`SimpleCounter`.
    ``"tiktoken"``/``"vllm"`` use that one or fall back to simple with a warning.
    """
    choice: str = tokenizer or getattr(model_config, "tokenizer", None) or "auto"
    if model_config is None or choice == "simple" or model_config.name == "human":
        return SimpleCounter()
    name = model_config.name
    base_url = model_config.resolved_base_url()
    tries: list[Callable[[], TokenCounter]]
    if choice == "tiktoken":
        tries = [lambda: _tiktoken(name)]
    elif choice == "vllm":
        tries = [lambda: _vllm(base_url, name)]
    else:  # auto; an OpenAI-like name served by vLLM (gpt-oss) gets the endpoint next
        tries = []
        if _OPENAI_NAME.match(name.rsplit("/", 1)[-1]):
            tries.append(lambda: _tiktoken(name))
        if base_url.rstrip("/") != OPENAI_DEFAULT_BASE_URL:  # the OpenAI API has no tokenize
            tries.append(lambda: _vllm(base_url, name))
    reasons: list[str] = []
    for attempt in tries:
        try:
            return attempt()
        except TokenizerUnavailable as exc:
            reasons.append(str(exc))
    if reasons:
        log = logger.warning if choice != "auto" else logger.info
        log("counting tokens with the simple rule: %s", "; ".join(reasons))
    return SimpleCounter()
