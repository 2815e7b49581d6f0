"""`LiteLLMModel`: any provider litellm speaks to (Anthropic, Gemini, Bedrock, Mistral, ...),
with the retries, errors and usage accounting of `OpenAIModel`.

Needs the optional extra `pgs-agent[litellm]`; without it, choosing this model is a
`ModelClassError` that says what to install. Chosen by `model_class: litellm` or a name with a
provider prefix of `agent.models.LITELLM_PREFIXES` (`anthropic/claude-sonnet-4-5-20250929`).
`openai/NAME` with `base_url` reaches any OpenAI-compatible server through litellm.

What it shares with `OpenAIModel` (it is one): the price (`model.prices`, DEFAULT_PRICES,
litellm's cost map; none while a cost limit is on is `UnknownPrice` before the first call),
the cost counted from the tokens the answer reports, the limits checked before each call, our
retries (litellm's and the client's own are off), errors translated into the tree of
`agent.models.base` and the answer checked field by field. litellm's exceptions subclass
`openai`'s, so most are translated by `OpenAIModel`'s rules; the rest by their `status_code`.

Keys: the variable named by `model.api_key_env` when it is set in the config; otherwise
litellm reads its provider's own (ANTHROPIC_API_KEY, GEMINI_API_KEY, ...). No placeholder is
sent to a provider: `preflight` (before any image or sandbox work) refuses a run whose key
variable is unset, naming it. Only an OpenAI-compatible server of one's own (`base_url`),
reached without a key, gets `NO_KEY`, a value no provider could take for a key (litellm's
OpenAI client wants one); `preflight` checks that such a server answers. litellm is imported
with `LITELLM_LOCAL_MODEL_COST_MAP=True`, so it never fetches its cost map; its telemetry and
its "give feedback" lines are off.
"""

from __future__ import annotations

import os
import re
from typing import Any

from agent.errors import AuthenticationFailed, ContextWindowExceeded, ModelClassError, ModelError
from agent.models.base import GlobalStats, ModelConfig, is_transient_status
from agent.models.openai import OpenAIModel, probe
from agent.models.prices import LITELLM_MISSING

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetched at import
try:
    import litellm  # the package: absolute imports, this module is agent.models.litellm
except ModuleNotFoundError as exc:
    if exc.name != "litellm":
        raise
    raise ModelClassError(
        f"this model needs litellm, an optional extra: {LITELLM_MISSING} (or, for an "
        "OpenAI-compatible server, --model.model-class openai)"
    ) from None

litellm.telemetry = False
litellm.suppress_debug_info = True

__all__ = ["NO_KEY", "LiteLLMModel", "provider_of"]

#: Sent as the key to an OpenAI-compatible server of one's own when no key is set: plainly
#: not a key (local servers take any), never sent to a provider's own API.
NO_KEY = "no-key-set"


def provider_of(name: str) -> str:
    """The litellm provider of a model name: its prefix (`anthropic/...`), else the one
    litellm infers (`claude-sonnet-4-5` → anthropic), else openai."""
    from agent.models import inferred_provider

    prefix, slash, _ = name.partition("/")
    if slash:
        return prefix
    return inferred_provider(name) or "openai"


class LiteLLMModel(OpenAIModel):
    """A model of any provider litellm knows, named as litellm names it (`provider/model`)."""

    def __init__(self, config: ModelConfig, global_stats: GlobalStats | None = None) -> None:
        provider = provider_of(config.name)
        where = (config.base_url or "").rstrip("/") or f"{provider}'s API"
        self._init_accounting(config, global_stats, where)
        self._provider = provider
        self._own_key = "api_key_env" in config.model_fields_set
        if not self._own_key:
            self._key_is_set = bool(
                litellm.validate_environment(config.name).get("keys_in_environment")
            )

    def _check_key(self) -> None:
        """The provider's key is litellm's to find (`preflight` said whether it is set)."""

    def _create(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        kwargs = self._request(messages, tools)
        kwargs.update(timeout=self.config.timeout, num_retries=0, max_retries=0)
        if self.config.base_url:
            kwargs["api_base"] = self.config.base_url
        key = self._api_key()
        if key is not None:
            kwargs["api_key"] = key
        return litellm.completion(**kwargs, drop_params=True)

    def _api_key(self) -> str | None:
        """The key to send, or None to let litellm read its provider's variable."""
        own_server = self._provider == "openai" and self.config.base_url
        if self._own_key:
            key = os.environ.get(self.config.api_key_env)
            return key or (NO_KEY if own_server else None)
        if own_server:  # an OpenAI-compatible server of one's own: local ones take any key
            return os.environ.get("OPENAI_API_KEY") or NO_KEY
        return None

    @classmethod
    def preflight(cls, config: ModelConfig, *, who: str = "model") -> None:
        """Before any image or sandbox work: a server of one's own (`base_url`) answers
        (`agent.models.openai.probe`: any HTTP answer will do, its key scheme is the
        provider's); a provider's own API has its key variable set, else AuthenticationFailed
        naming the variable. (The key itself is first tried by the run's first call.)"""
        provider = provider_of(config.name)
        whose = "" if who == "model" else f" for the {who}"
        if config.base_url:
            url = config.base_url.rstrip("/")
            what = "the model's server" if who == "model" else f"the {who}'s server"
            probe(url, None, what=what, fix="start it, or fix --base-url")
            return
        if "api_key_env" in config.model_fields_set:
            var = config.api_key_env
            missing = [] if os.environ.get(var) else [var]
        else:
            found = litellm.validate_environment(config.name)
            missing = [] if found.get("keys_in_environment") else found.get("missing_keys") or []
        if not missing:
            return
        also = ""
        if provider == "vertex_ai" and config.name.startswith("gemini"):
            also = f" (or, for Google AI Studio's GEMINI_API_KEY, name it gemini/{config.name})"
        raise AuthenticationFailed(
            f"no API key{whose} for {provider} ({config.name}): set {' and '.join(missing)}{also}"
        )

    def _key_name(self) -> str:
        if self._own_key:
            return self.config.api_key_env
        missing = litellm.validate_environment(self.config.name).get("missing_keys") or []
        return " or ".join(missing) or f"{self._provider}'s API key variable (see litellm)"

    def _is_transient(self, exc: BaseException) -> bool:
        if super()._is_transient(exc):
            return True
        status = getattr(exc, "status_code", None)
        return (
            isinstance(exc, litellm.APIError)
            and isinstance(status, int)
            and (is_transient_status(status))
        )

    def _status(self, exc: Any) -> int | None:
        status = super()._status(exc)
        if status is None and isinstance(exc, litellm.APIError):
            found = getattr(exc, "status_code", None)
            status = found if isinstance(found, int) else None
        return status

    def _translate(self, exc: Any) -> ModelError:
        if isinstance(exc, litellm.ContextWindowExceededError):
            return ContextWindowExceeded(
                f"the conversation ({self.stats.tokens_sent} tokens sent so far) no longer fits "
                f"the context window of {self.config.name!r}: use a model with a longer context "
                "or shorter observations"
            )
        translated = super()._translate(exc)
        if type(translated) is ModelError:  # no status: litellm's own words, first line
            return ModelError(f"model call to {self.base_url} failed: {_first_line(exc)}")
        # litellm's messages end with advice to its own users ("Handle with `litellm.X`.").
        return type(translated)(_HANDLE_WITH.sub("", str(translated)))

    def _served_hint(self) -> str:
        return f"check the name (litellm's form: provider/model) and {self._provider}'s model list"


_HANDLE_WITH = re.compile(r"\s*Handle with `litellm\.\w+`\.?")


def _first_line(exc: BaseException) -> str:
    text = _HANDLE_WITH.sub("", str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__
