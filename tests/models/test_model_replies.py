"""The model layer's replies against the scripted server (the real openai client over real HTTP):
text and tool calls, sampling parameters, prices and usage, the cost and call limits, and tool
arguments surviving the round trip."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.errors import CostLimitExceeded, UnknownPrice
from agent.models import DEFAULT_PRICES, GlobalStats, ModelConfig, OpenAIModel
from agent.models.script_server import ScriptedServer
from tests.support.openai_model import TOOLS, USER, model_for, model_for_url

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.openai_model import _clean_env  # noqa: F401


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
