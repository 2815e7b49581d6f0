"""The model layer's choice of model: the human model, ``get_model`` by name or by a class's
import path, and the public names it pins. Replies are in test_model_replies.py, retries and
errors in test_model_errors.py (the scripted server: the real openai client over real HTTP)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

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
from agent.models import (
    GlobalStats,
    HumanModel,
    ModelConfig,
    ModelResponse,
    ModelStats,
    OpenAIModel,
    ReplayModel,
    get_model,
    get_model_class,
)
from tests.support.openai_model import USER

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.openai_model import _clean_env  # noqa: F401

# --------------------------------------------------------------------------- human, factory


def test_human_model_reads_a_fenced_block_or_a_tool_line() -> None:
    typed = io.StringIO(
        "I look around.\n```\nls -la\n```\n"
        "/tool bash {not json\n"
        'Now the editor.\n/tool str_replace_editor {"command": "view", "path": "/repo"}\n'
    )
    shown = io.StringIO()
    model = HumanModel(stdin=typed, stdout=shown)
    first = model.query([{"role": "user", "content": "the issue"}])
    assert first.content == "I look around.\n```\nls -la\n```"
    assert first.tool_calls == []
    second = model.query([{"role": "tool", "content": "README.md"}])
    assert second.content == "Now the editor."
    assert second.tool_calls[0].name == "str_replace_editor"
    assert second.tool_calls[0].arguments == {"command": "view", "path": "/repo"}
    assert "not valid JSON" in shown.getvalue()
    assert "README.md" in shown.getvalue()
    assert model.stats.api_calls == 2
    with pytest.raises(ModelError, match="stdin closed"):
        model.query([])


def test_get_model_picks_by_name() -> None:
    assert isinstance(get_model(ModelConfig(name="human")), HumanModel)
    assert isinstance(get_model(ModelConfig(name="gpt-4o-mini")), OpenAIModel)
    assert get_model_class(ModelConfig(name="replay")) is ReplayModel
    assert get_model_class(ModelConfig(name="openai")) is OpenAIModel


class EchoModel:
    """A model of a user's own, named by import path."""

    def __init__(self, config: ModelConfig, global_stats: GlobalStats | None = None) -> None:
        self.config = config
        self.global_stats = global_stats
        self.stats = ModelStats()

    def query(self, messages: list[dict[str, Any]], tools: Any = None) -> ModelResponse:
        self.stats.api_calls += 1
        return ModelResponse(content=f"echo: {messages[-1]['content']}")


NOT_A_MODEL = 42


def test_model_class_names_a_class_by_import_path() -> None:
    shared = GlobalStats()
    config = ModelConfig(name="gpt-4o", model_class=f"{__name__}:EchoModel")
    model = get_model(config, shared)
    assert type(model) is EchoModel
    assert (model.config, model.global_stats) == (config, shared)
    assert model.query(USER).content == "echo: abcdefgh"
    # A built-in name in model_class wins over the name: a priced model name, replayed.
    assert get_model_class(ModelConfig(name="gpt-4o", model_class="replay")) is ReplayModel


@pytest.mark.parametrize(
    ("model_class", "expected"),
    [
        ("no_such_package.models:Model", "there is no module 'no_such_package'"),
        ("agent.models.no_such_module:Model", "there is no module 'agent.models.no_such_module'"),
        (f"{__name__}:NoSuchModel", "has no 'NoSuchModel': check the class name"),
        (f"{__name__}:NOT_A_MODEL", "NOT_A_MODEL is not a model class"),
        (f"{__name__}:ModelConfig", "ModelConfig is not a model class"),
        ("nosuch", "is neither a built-in (openai, litellm, human, replay) nor an import path"),
    ],
)
def test_a_bad_model_class_is_one_sentence_naming_what_to_fix(
    model_class: str, expected: str
) -> None:
    with pytest.raises(ModelClassError) as caught:
        get_model(ModelConfig(name="m", model_class=model_class))
    message = str(caught.value)
    assert expected in message and model_class in message
    assert "\n" not in message


def test_a_model_module_that_fails_to_import_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_models.py").write_text("import no_such_dependency\n")
    (tmp_path / "typo_models.py").write_text("class Model(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelClassError, match=r"importing broken_models failed.*no_such_dep"):
        get_model(ModelConfig(name="m", model_class="broken_models:Model"))
    with pytest.raises(ModelClassError, match=r"importing typo_models failed \(SyntaxError"):
        get_model(ModelConfig(name="m", model_class="typo_models:Model"))


def test_a_model_class_that_is_no_import_path_fails_in_the_config() -> None:
    with pytest.raises(ValidationError, match=r"write package\.module:Class"):
        ModelConfig(name="m", model_class="agent.models.OpenAIModel")


def test_public_names_and_the_exception_tree_are_pinned() -> None:
    import agent.cli.serve
    import agent.models
    import agent.models.script_format
    import agent.models.script_server

    assert set(agent.models.__all__) == {
        *["DEFAULT_PRICES", "GlobalStats", "HumanModel", "Model", "ModelConfig"],
        *["ModelResponse", "ModelStats", "OpenAIModel", "RetryConfig", "ToolCall", "get_model"],
        *["check_endpoint", "family_provider", "inferred_provider"],
        *["ModelError", "AuthenticationFailed", "BadRequest", "ContextWindowExceeded"],
        *["CostLimitExceeded", "ModelNotFound", "RateLimited", "ServerError", "Unreachable"],
        *["MODEL_CLASSES", "ModelClass", "ModelClassError", "ReplayModel", "get_model_class"],
        *["OPENAI_DEFAULT_BASE_URL", "MalformedResponse"],
        *["LITELLM_PREFIXES", "Pricing", "UnknownPrice", "check_priced", "model_kind"],
        "require_price",
    }
    assert set(agent.models.script_server.__all__) == {
        *["ScriptError", "ScriptSource", "ScriptedServer", "add_arguments", "main", "serve"],
    }
    assert set(agent.models.script_format.__all__) == {
        *["ErrorReply", "Policy", "Reply", "Script", "ScriptError", "ScriptSource", "Step"],
        "RawReply",
        *["ScriptedToolCall", "count_tokens", "load_script", "message_tokens", "parse_step"],
        *["trajectory_kind", "trajectory_replies"],
        *["reply_message", "moved_reply"],
    }
    assert set(agent.cli.serve.__all__) == {"register", "serve_script_command"}
    assert issubclass(ModelError, RuntimeError)
    for error in (
        *[AuthenticationFailed, ModelNotFound, Unreachable, RateLimited, ServerError],
        MalformedResponse,
    ):
        assert error.__bases__ == (ModelError,)
    assert ContextWindowExceeded.__bases__ == (BadRequest,)
    assert CostLimitExceeded.__bases__ == (ModelError,)
    assert ModelClassError.__bases__ == (ModelError,)
    assert UnknownPrice.__bases__ == (ModelError,)
