"""Models: the one seam between the agent and a language model.

A `Model` answers `query(messages, tools)` with a `ModelResponse` and keeps `ModelStats`
(SWE-agent's `model_stats` names). `get_model(config, global_stats)` picks the implementation:

- `model_class`, when set: a built-in name of `MODEL_CLASSES` or an import path
  `package.module:Class`, constructed as `Class(config, global_stats)`;
- otherwise `config.name`: `human` (`HumanModel`, replies typed on stdin), `replay`
  (`ReplayModel`, answers from `config.script` in-process), a name whose prefix is one of
  litellm's providers (`LITELLM_PREFIXES`: `anthropic/claude-...`, `gemini/...`) `LiteLLMModel`
  (the optional extra `pgs-agent[litellm]`), and so is a name without a prefix that litellm
  sends to another provider than OpenAI (`claude-sonnet-4-5` is Anthropic's:
  `inferred_provider`) unless a base URL is given (`--base-url`, `OPENAI_BASE_URL`: a server
  of one's own, whatever its models are called); anything else `OpenAIModel` (any
  OpenAI-compatible server: OpenAI, vLLM, llama.cpp, the scripted server in
  `agent.models.script_server`; `openai/...` names too).

Before a run: `check_priced` (no network) and `check_endpoint` (the model class's
`preflight`: one short request that the server answers and takes the key, so that a wrong
URL or key is one line before any image or sandbox work).

Prices: a class that bills per token says so (`needs_price = True`); it refuses to start
without a price while a cost limit is on (`UnknownPrice`), and `check_priced` says so before a
run starts. Prices come from `model.prices`, `DEFAULT_PRICES` or litellm's cost map
(`agent.models.prices`), in that order.

Modules: `base` (the errors' tree, config, usage records, the protocol; the errors are defined
in `agent.errors` and re-exported here), `openai`, `litellm`, `human`, `replay`, `prices`
(litellm's cost map), `script_format` (the script format of `script_server` and `replay`; a
recorded run's replies are read by `agent.record.foreign`), `script_server` (the HTTP server).
A `model_class` that names nothing importable raises `ModelClassError`, one sentence that says
what to fix.

Layer 6: imports only `agent.record` and `agent.errors` (nothing of sandboxes or images); the
loop and everything above it import it. Entry points: `get_model`, the `Model` protocol,
`check_priced` and `check_endpoint`.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    CostLimitExceeded,
    MalformedResponse,
    ModelClassError,
    ModelError,
    ModelNotFound,
    RateLimited,
    ServerError,
    UnknownPrice,
    Unreachable,
)
from agent.models.base import (
    DEFAULT_PRICES,
    OPENAI_DEFAULT_BASE_URL,
    GlobalStats,
    Model,
    ModelConfig,
    ModelResponse,
    ModelStats,
    Pricing,
    RetryConfig,
    ToolCall,
    require_price,
)
from agent.models.human import HumanModel
from agent.models.replay import ReplayModel

if TYPE_CHECKING:
    from agent.models.openai import OpenAIModel

__all__ = [
    "DEFAULT_PRICES",
    "LITELLM_PREFIXES",
    "MODEL_CLASSES",
    "OPENAI_DEFAULT_BASE_URL",
    "AuthenticationFailed",
    "BadRequest",
    "ContextWindowExceeded",
    "CostLimitExceeded",
    "GlobalStats",
    "HumanModel",
    "MalformedResponse",
    "Model",
    "ModelClass",
    "ModelClassError",
    "ModelConfig",
    "ModelError",
    "ModelNotFound",
    "ModelResponse",
    "ModelStats",
    "OpenAIModel",
    "Pricing",
    "RateLimited",
    "ReplayModel",
    "RetryConfig",
    "ServerError",
    "ToolCall",
    "UnknownPrice",
    "Unreachable",
    "check_endpoint",
    "check_priced",
    "family_provider",
    "get_model",
    "get_model_class",
    "inferred_provider",
    "model_kind",
    "require_price",
]


def __getattr__(name: str) -> Any:
    # OpenAIModel on first use: the openai package takes about half of `pgs`'s start-up
    # (`pgs --help`, every command that never queries a model).
    if name == "OpenAIModel":
        from agent.models.openai import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ModelClass = Callable[[ModelConfig, GlobalStats | None], Model]
"""What `get_model` constructs: `Class(config, global_stats)`."""

#: Built-in model names → import paths. `openai` is the default; `human` and `replay` are also
#: chosen by `config.name`, `litellm` by a provider prefix of it (`LITELLM_PREFIXES`).
MODEL_CLASSES: dict[str, str] = {
    "openai": "agent.models.openai:OpenAIModel",
    "litellm": "agent.models.litellm:LiteLLMModel",
    "human": "agent.models.human:HumanModel",
    "replay": "agent.models.replay:ReplayModel",
}
DEFAULT_MODEL_CLASS = "openai"

#: Name prefixes that choose `LiteLLMModel`: litellm's providers that speak no OpenAI API of
#: their own at a fixed URL. Not `openai/` (OpenAIModel serves it, as before) nor Hugging Face
#: organisations served by vLLM (`Qwen/...`, `meta-llama/...`). Any other litellm provider:
#: `model_class: litellm`.
LITELLM_PREFIXES = frozenset(
    {
        "anthropic",
        "azure",
        "azure_ai",
        "bedrock",
        "cerebras",
        "cohere",
        "databricks",
        "deepseek",
        "fireworks_ai",
        "gemini",
        "groq",
        "mistral",
        "ollama",
        "ollama_chat",
        "openrouter",
        "perplexity",
        "sambanova",
        "together_ai",
        "vertex_ai",
        "watsonx",
        "xai",
    }
)


def get_model(config: ModelConfig, global_stats: GlobalStats | None = None) -> Model:
    """The model `config` asks for (see the module doc), sharing `global_stats` for batch cost."""
    return get_model_class(config)(config, global_stats)


def get_model_class(config: ModelConfig) -> ModelClass:
    """The class `config.model_class` names, else the built-in named `config.name` (or its
    provider prefix), else `OpenAIModel`. Raises ModelClassError when the import path names
    nothing usable."""
    return _import_class(model_kind(config))


def model_kind(config: ModelConfig) -> str:
    """The built-in name or import path of the class `get_model_class` picks, unimported."""
    if config.model_class is not None:
        return config.model_class
    if config.name in MODEL_CLASSES:
        return config.name
    prefix, slash, _ = config.name.partition("/")
    if slash and prefix in LITELLM_PREFIXES:
        return "litellm"
    own_server = config.base_url or os.environ.get("OPENAI_BASE_URL")
    if not slash and not own_server and inferred_provider(config.name) is not None:
        return "litellm"
    return DEFAULT_MODEL_CLASS


#: Name families litellm sends to a provider other than OpenAI, for names it does not list
#: (a newer or older model) and where litellm is not installed: as litellm routes the
#: names of these families it does list (tests/models/test_routing.py checks it).
BARE_NAME_FAMILIES: dict[str, str] = {"claude-": "anthropic", "gemini-": "vertex_ai"}

_OPENAI_NAME = re.compile(r"^(gpt-|o\d|chatgpt-|text-|davinci|babbage|computer-use)")


def inferred_provider(name: str) -> str | None:
    """The provider a model name without a provider prefix goes to when it is not OpenAI's
    API, as litellm decides it (`litellm.get_llm_provider`, when litellm is installed), else
    by its family (`BARE_NAME_FAMILIES`); None: an OpenAI name, or one litellm does not know
    (a model of one's own server)."""
    if "/" in name or _OPENAI_NAME.match(name):
        return None
    provider = _litellm_provider(name) or family_provider(name)
    return None if provider in (None, "openai", "text-completion-openai") else provider


def family_provider(name: str) -> str | None:
    """The provider of a name's family (`BARE_NAME_FAMILIES`), or None. A versioned cloud id
    (Bedrock's `claude-...-v1:0`, Vertex's `claude-...@2024...`) is no family's: litellm
    places those it knows itself."""
    if ":" in name or "@" in name:
        return None
    return next((p for f, p in BARE_NAME_FAMILIES.items() if name.startswith(f)), None)


def _litellm_provider(name: str) -> str | None:
    from agent.models.prices import litellm_installed

    if not litellm_installed():
        return None
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetched at import
    try:
        import litellm
    except ImportError:  # a broken install: as if absent
        return None

    litellm.suppress_debug_info = True  # else a failed lookup prints litellm's provider list
    try:
        found: str = litellm.get_llm_provider(name)[1]
    except Exception:  # litellm's BadRequestError: a name it cannot place
        return None
    return found


def check_endpoint(config: ModelConfig, *, who: str = "model") -> None:
    """Before any image or sandbox work: the model's server answers and takes the key (the
    class's `preflight`, when it has one and `config.check_endpoint` is on), else one line
    naming the URL, the key's variable and the fix (AuthenticationFailed, Unreachable)."""
    if not config.check_endpoint:
        return
    preflight = getattr(get_model_class(config), "preflight", None)
    if preflight is not None:
        preflight(config, who=who)


def check_priced(config: ModelConfig, *, who: str = "model") -> Pricing | None:
    """Before a run starts: raise UnknownPrice (one line: how to give a price or turn the cost
    limits off) when `config`'s model bills per token, a cost limit is on and no price is
    known; raise ModelClassError when its class cannot be imported (litellm missing). The
    model's pricing, or None."""
    cls = get_model_class(config)
    if not getattr(cls, "needs_price", False):
        return None
    return require_price(config, who=who)


def _import_class(spec: str) -> ModelClass:
    path = MODEL_CLASSES.get(spec, spec)
    module_name, colon, class_name = path.partition(":")
    what = f"model_class {spec!r}"
    if not colon or not module_name or not class_name:
        raise ModelClassError(
            f"{what} is neither a built-in ({', '.join(MODEL_CLASSES)}) nor an import path: "
            "write package.module:Class"
        )
    try:
        module = importlib.import_module(module_name)
    except ModelClassError:  # the module's own one-line reason (a missing optional extra)
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise ModelClassError(
                f"{what}: there is no module {exc.name!r}: check the spelling, and that its "
                "package is installed or its folder is on PYTHONPATH"
            ) from None
        raise ModelClassError(f"{what}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:  # the module's own error (SyntaxError, ImportError, ...)
        raise ModelClassError(
            f"{what}: importing {module_name} failed ({type(exc).__name__}: {exc}): fix that module"
        ) from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ModelClassError(
            f"{what}: module {module_name} has no {class_name!r}: check the class name"
        )
    if not isinstance(cls, type) or not callable(getattr(cls, "query", None)):
        raise ModelClassError(
            f"{what}: {class_name} is not a model class: it needs a query(messages, tools) "
            "method and a (config, global_stats) constructor"
        )
    model_class: ModelClass = cls
    return model_class
