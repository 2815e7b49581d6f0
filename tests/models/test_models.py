"""The model layer against the scripted server: the real openai client over real HTTP."""

from __future__ import annotations

import io
import json
import logging
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
    DEFAULT_PRICES,
    GlobalStats,
    HumanModel,
    ModelConfig,
    ModelResponse,
    ModelStats,
    OpenAIModel,
    ReplayModel,
    RetryConfig,
    get_model,
    get_model_class,
)
from agent.models.script_server import ScriptedServer

FAST = RetryConfig(attempts=3, min_wait=0.001, max_wait=0.01)
USER = [{"role": "user", "content": "abcdefgh"}]  # 8 characters: 2 tokens on the server
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def model_for(server: ScriptedServer, name: str = "test-model", **kw: Any) -> OpenAIModel:
    kw.setdefault("retries", FAST)
    kw.setdefault("prices", {"test-model": (1.0, 2.0)})
    return OpenAIModel(ModelConfig(name=name, base_url=server.url, **kw))


def model_for_url(url: str, name: str = "m") -> OpenAIModel:
    return OpenAIModel(ModelConfig(name=name, base_url=url, retries=FAST, prices={name: (0, 0)}))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- replies


def test_text_reply_has_usage_and_cost() -> None:
    with ScriptedServer([{"content": "hello"}]) as server:
        model = model_for(server)
        response = model.query(USER)
    assert response.content == "hello"
    assert response.tool_calls == []
    assert (response.tokens_sent, response.tokens_received) == (2, 2)
    assert response.cost == pytest.approx((2 * 1.0 + 2 * 2.0) / 1e6)
    assert model.stats.model_dump() == {
        "instance_cost": pytest.approx(response.cost),
        "tokens_sent": 2,
        "tokens_received": 2,
        "api_calls": 1,
        "price_source": "config",
        "price": (1.0, 2.0),
    }
    assert response.finish_reason == "stop"


def test_tool_call_reply_is_parsed_and_tools_are_sent() -> None:
    step = {
        "content": "I list the files.",
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "ls -la"}},
            {"name": "submit"},
        ],
    }
    with ScriptedServer([step]) as server:
        response = model_for(server).query(USER, TOOLS)
        sent = server.requests[0]
    assert sent["tools"] == TOOLS
    first, second = response.tool_calls
    assert (first.name, first.arguments, first.error) == ("bash", {"command": "ls -la"}, None)
    assert json.loads(first.raw_arguments) == {"command": "ls -la"}
    assert (second.name, second.arguments) == ("submit", {})
    assert first.id != second.id
    message = response.message()
    assert message["content"] == "I list the files."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["bash", "submit"]
    assert response.finish_reason == "tool_calls"


def test_malformed_tool_arguments_are_kept_raw_with_an_error() -> None:
    step = {"tool_calls": [{"name": "bash", "arguments": '{"command": "ls"'}]}
    with ScriptedServer([step]) as server:
        (call,) = model_for(server).query(USER, TOOLS).tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == '{"command": "ls"'
    assert call.error is not None and "not valid JSON" in call.error


def test_text_mode_never_sends_tools() -> None:
    with ScriptedServer([{"content": "```\nls\n```"}]) as server:
        model_for(server, function_calling=False).query(USER, TOOLS)
        assert "tools" not in server.requests[0]


def test_sampling_parameters_are_sent_and_reasoning_models_skip_them() -> None:
    with ScriptedServer([{"content": "a"}, {"content": "b"}]) as server:
        model_for(server, temperature=0.5, max_output_tokens=64).query(USER)
        model_for(server, name="o4-mini", temperature=0.5, max_output_tokens=64).query(USER)
        plain, reasoning = server.requests
    assert (plain["temperature"], plain["max_tokens"]) == (0.5, 64)
    assert "temperature" not in reasoning
    assert reasoning["max_completion_tokens"] == 64


def test_an_unknown_price_is_refused_while_a_cost_limit_is_on() -> None:
    name = f"local-{uuid.uuid4().hex[:8]}"
    with ScriptedServer([{"content": "a"}, {"content": "b"}]) as server:
        with pytest.raises(UnknownPrice) as caught:
            model_for(server, name=name, total_cost_limit=5.0)
        assert server.requests == []  # refused before any call
        # Without cost limits there is nothing to hold: the cost counts 0, said in the stats.
        model = model_for(server, name=name, per_instance_cost_limit=0)
        costs = [model.query(USER).cost, model.query(USER).cost]
    message = str(caught.value)
    assert "\n" not in message and f"no price known for the model {name!r}" in message
    assert "per_instance_cost_limit of 3 USD and total_cost_limit of 5 USD" in message
    assert f"--model.prices '{{\"{name}\": [1.0, 2.0]}}'" in message
    assert "--model.per-instance-cost-limit 0 --model.total-cost-limit 0" in message
    assert costs == [0.0, 0.0]
    assert (model.stats.price_source, model.stats.price) == ("unpriced", None)


def test_prices_merge_over_defaults_and_match_dated_names() -> None:
    config = ModelConfig(name="openai/gpt-4o-2024-08-06", prices={"mine": (1.0, 1.0)})
    assert config.price() == DEFAULT_PRICES["gpt-4o"]
    assert ModelConfig(name="mine", prices={"mine": [1, 2]}).price() == (1.0, 2.0)
    assert ModelConfig(name="gpt-4o", prices={"gpt-4o": (9.0, 9.0)}).price() == (9.0, 9.0)
    with pytest.raises(ValidationError, match="extra"):
        ModelConfig(name="x", api_key="sk-secret")  # type: ignore[call-arg]


def test_base_url_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ModelConfig(name="x").resolved_base_url() == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/")
    assert ModelConfig(name="x").resolved_base_url() == "http://localhost:8000/v1"
    assert ModelConfig(name="x", base_url="http://h/v1").resolved_base_url() == "http://h/v1"


# --------------------------------------------------------------------------- retries and errors


def test_429_then_500_then_success_is_one_response_after_three_requests() -> None:
    steps = [{"error": 429, "retry_after": 0}, {"error": 500}, {"content": "done"}]
    with ScriptedServer(steps) as server:
        model = model_for(server)
        response = model.query(USER)
        assert len(server.requests) == 3
    assert response.content == "done"
    assert model.stats.api_calls == 1


def test_retry_after_is_honoured_over_a_long_backoff() -> None:
    slow = RetryConfig(attempts=2, min_wait=30, max_wait=60)
    with ScriptedServer([{"error": 429, "retry_after": 0}, {"content": "ok"}]) as server:
        start = time.monotonic()
        assert model_for(server, retries=slow).query(USER).content == "ok"
    assert time.monotonic() - start < slow.min_wait  # not the backoff's 30 s


def test_rate_limit_and_server_errors_give_up_after_the_configured_attempts() -> None:
    with ScriptedServer([{"error": 429, "retry_after": 0}] * 3) as server:
        with pytest.raises(RateLimited, match="3 attempt"):
            model_for(server).query(USER)
        assert len(server.requests) == 3
    with ScriptedServer([{"error": 503, "message": "overloaded"}] * 3) as server:
        with pytest.raises(ServerError, match="overloaded"):
            model_for(server).query(USER)
        assert len(server.requests) == 3


def _completion_body(**changes: Any) -> str:
    """A chat completion's JSON with `changes` over its choice's message or its top level."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    for key, value in changes.items():
        if key == "message":
            body["choices"][0]["message"] = value
        else:
            body[key] = value
    return json.dumps(body)


MALFORMED = {
    "html page": {"raw": "<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"},
    "html as json": {"raw": "<html><body>oops</body></html>"},
    "truncated json": {"raw": _completion_body()[:60]},
    "message null": {"raw": _completion_body(message=None)},
    "usage not numeric": {"raw": _completion_body(usage={"prompt_tokens": "many"})},
    "choices null": {"raw": _completion_body(choices=None)},
}


@pytest.mark.parametrize("bad", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_is_retried_like_a_5xx(bad: dict[str, Any]) -> None:
    with ScriptedServer([bad, {"content": "done"}]) as server:
        model = model_for(server)
        assert model.query(USER).content == "done"
        assert len(server.requests) == 2
    assert model.stats.api_calls == 1


@pytest.mark.parametrize("bad", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_server_that_keeps_answering_malformed_is_one_sentence(bad: dict[str, Any]) -> None:
    with ScriptedServer([bad] * 3) as server:
        with pytest.raises(MalformedResponse) as raised:
            model_for(server).query(USER)
        assert len(server.requests) == 3
    message = str(raised.value)
    assert "not a chat completion" in message and "3 time(s)" in message
    assert "\n" not in message and "--base-url" in message


def test_usage_left_out_counts_zero() -> None:
    body = _completion_body(usage={"prompt_tokens": 7})
    with ScriptedServer([{"raw": body}]) as server:
        response = model_for(server).query(USER)
    assert (response.tokens_sent, response.tokens_received) == (7, 0)


def test_replay_retries_a_malformed_answer() -> None:
    bad = MALFORMED["html page"]
    config = ModelConfig(name="replay", retries=FAST)
    assert ReplayModel(config, script=[bad, {"content": "ok"}]).query(USER).content == "ok"
    with pytest.raises(MalformedResponse, match="not a chat completion"):
        ReplayModel(config, script=[bad] * 3).query(USER)


def test_401_fails_at_once_naming_the_variable_never_the_key(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-test-DISTINCTIVE-5f0c1e"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    # The real API echoes (part of) the key in its 401 message: so does this script.
    step = {"error": 401, "message": f"Incorrect API key provided: {key}"}
    caplog.set_level(logging.DEBUG)
    with ScriptedServer([step, {"content": "never"}]) as server:
        with pytest.raises(AuthenticationFailed) as caught:
            model_for(server).query(USER)
        assert len(server.requests) == 1
    text = str(caught.value)
    assert "OPENAI_API_KEY" in text
    assert key not in text
    assert caught.value.__cause__ is None
    assert all(key not in record.getMessage() for record in caplog.records)


def test_unset_key_sends_a_dummy_and_says_it_is_unset() -> None:
    unset = r"OPENAI_API_KEY \(it is unset\)"
    with (
        ScriptedServer([{"error": 401}]) as server,
        pytest.raises(AuthenticationFailed, match=unset),
    ):
        model_for(server).query(USER)


def test_unreachable_url_is_named() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = model_for_url(url)
    with pytest.raises(Unreachable) as caught:
        model.query(USER)
    assert url in str(caught.value)
    assert "--base-url" in str(caught.value)
    assert model.stats.api_calls == 0


def test_a_server_too_slow_times_out_as_unreachable() -> None:
    def slow(request: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.0)
        return {"content": "late"}

    with ScriptedServer(slow) as server:
        model = model_for(server, timeout=0.2, retries=RetryConfig(attempts=1))
        with pytest.raises(Unreachable, match="no answer"):
            model.query(USER)


def test_unknown_model_lists_the_served_ones() -> None:
    with ScriptedServer([{"content": "x"}], model="served-model") as server:
        with pytest.raises(ModelNotFound) as caught:
            model_for(server, name="other-model", prices={"other-model": (0, 0)}).query(USER)
        assert len(server.requests) == 1
    assert "'other-model'" in str(caught.value)
    assert "served-model" in str(caught.value)


@pytest.mark.parametrize(
    "step",
    [
        {"error": 400, "code": "context_length_exceeded", "message": "too long"},
        {"error": 400, "message": "This model's maximum context length is 8192 tokens."},
    ],
)
def test_context_overflow_is_not_retried(step: dict[str, Any]) -> None:
    with ScriptedServer([step, {"content": "never"}]) as server:
        with pytest.raises(ContextWindowExceeded) as caught:
            model_for(server).query(USER)
        assert len(server.requests) == 1
    assert caught.value.exit_status == "exit_context"


def test_script_exhaustion_is_a_bad_request_with_the_servers_message() -> None:
    with ScriptedServer([{"content": "one"}]) as server:
        model = model_for(server)
        model.query(USER)
        with pytest.raises(BadRequest, match="script exhausted after 1 replies"):
            model.query(USER)
        assert len(server.requests) == 2


# --------------------------------------------------------------------------- limits


def test_per_instance_cost_limit_stops_before_the_call() -> None:
    with ScriptedServer([{"content": "a"}] * 3) as server:
        # One call: 2 prompt + 1 completion tokens at $0.001 each = $0.003.
        prices = {"test-model": (1000.0, 1000.0)}
        model = model_for(server, prices=prices, per_instance_cost_limit=0.0025)
        model.query(USER)
        with pytest.raises(CostLimitExceeded) as caught:
            model.query(USER)
        assert len(server.requests) == 1
    assert caught.value.limit == "per_instance_cost_limit"
    assert caught.value.exit_status == "exit_cost"
    assert "per_instance_cost_limit" in str(caught.value)


def test_total_cost_limit_is_shared_across_instances() -> None:
    shared = GlobalStats()
    config: dict[str, Any] = {"prices": {"test-model": (1000.0, 1000.0)}, "total_cost_limit": 0.005}
    with ScriptedServer([{"content": "a"}] * 4) as server:
        first = OpenAIModel(ModelConfig(name="test-model", base_url=server.url, **config), shared)
        second = OpenAIModel(ModelConfig(name="test-model", base_url=server.url, **config), shared)
        first.query(USER)
        second.query(USER)
        with pytest.raises(CostLimitExceeded) as caught:
            first.query(USER)
        assert len(server.requests) == 2
    assert caught.value.limit == "total_cost_limit"
    assert shared.api_calls == 2
    assert shared.total_cost == pytest.approx(0.006)


def test_call_limit() -> None:
    with ScriptedServer([{"content": "a"}] * 3) as server:
        model = model_for(server, per_instance_call_limit=2)
        model.query(USER)
        model.query(USER)
        with pytest.raises(CostLimitExceeded) as caught:
            model.query(USER)
        assert len(server.requests) == 2
    assert caught.value.limit == "per_instance_call_limit"


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


# --------------------------------------------------------------------------- properties

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)


def _echo_arguments(request: dict[str, Any]) -> dict[str, Any]:
    """Reply with a tool call whose arguments are the JSON of the last message."""
    return {
        "tool_calls": [
            {"name": "echo", "arguments": json.loads(request["messages"][-1]["content"])}
        ]
    }


@pytest.fixture(scope="module")
def echo_model() -> Any:
    """One server and one client for all examples (a client costs an SSL context)."""
    with ScriptedServer(_echo_arguments) as server:
        yield model_for_url(server.url)


@settings(max_examples=60, deadline=None)
@given(arguments=st.dictionaries(st.text(), JSON_VALUES, max_size=6))
def test_tool_arguments_survive_the_round_trip(
    echo_model: OpenAIModel, arguments: dict[str, Any]
) -> None:
    response = echo_model.query([{"role": "user", "content": json.dumps(arguments)}])
    (call,) = response.tool_calls
    assert call.error is None
    assert call.arguments == arguments
    assert json.loads(call.raw_arguments) == arguments
