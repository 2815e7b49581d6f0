"""The replay model: the scripted server's answers, in-process.

The reference is the scripted server itself: for the same script, `ReplayModel` must give what
`OpenAIModel` gets over HTTP (content, tool calls, tokens, cost, finish reason, errors).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    CostLimitExceeded,
    ModelNotFound,
    RateLimited,
    ScriptError,
    ServerError,
)
from agent.models import (
    GlobalStats,
    ModelConfig,
    ModelResponse,
    OpenAIModel,
    ReplayModel,
    RetryConfig,
    get_model,
)
from agent.models.script_format import ScriptSource
from agent.models.script_server import ScriptedServer
from agent.run.config import add_config_flags, flag_overrides, load_config

FAST = RetryConfig(attempts=3, min_wait=0.001, max_wait=0.01)
FREE = {"m": (0.0, 0.0)}
USER = [{"role": "user", "content": "abcdefgh"}]  # 8 characters: 2 tokens
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def replay(script: ScriptSource, name: str = "replay", **kw: Any) -> ReplayModel:
    kw.setdefault("retries", FAST)
    return ReplayModel(ModelConfig(name=name, **kw), script=script)


def seen(response: ModelResponse) -> dict[str, Any]:
    """What the loop reads from a response; call ids differ between the two (counters)."""
    return {
        "content": response.content,
        "calls": [(c.name, c.arguments, c.raw_arguments, c.error) for c in response.tool_calls],
        "usage": (response.tokens_sent, response.tokens_received, response.cost),
        "finish_reason": response.finish_reason,
    }


# --------------------------------------------------------------------------- the same answers

STEPS: list[dict[str, Any]] = [
    {"content": "hello"},
    {"content": None, "tool_calls": [{"name": "bash", "arguments": {"command": "ls -la"}}]},
    {
        "content": "two calls",
        "tool_calls": [{"name": "bash", "arguments": {"command": "pwd"}}, {"name": "submit"}],
    },
    {"tool_calls": [{"name": "bash", "arguments": '{"command": "ls"'}]},  # malformed, verbatim
]


@pytest.mark.parametrize("step", STEPS, ids=["text", "tool", "two-calls", "malformed"])
def test_a_reply_is_what_the_server_gives_over_http(step: dict[str, Any]) -> None:
    prices = {"m": (1000.0, 2000.0)}
    with ScriptedServer([step]) as server:
        config = ModelConfig(name="m", base_url=server.url, retries=FAST, prices=prices)
        over_http = OpenAIModel(config).query(USER, TOOLS)
    in_process = replay([step], name="m", prices=prices).query(USER, TOOLS)
    assert seen(in_process) == seen(over_http)
    assert in_process.cost > 0


def _reply_from_request(request: dict[str, Any]) -> Any:
    return json.loads(request["messages"][-1]["content"])


@pytest.fixture(scope="module")
def http_echo() -> Any:
    with ScriptedServer(_reply_from_request) as server:
        yield OpenAIModel(ModelConfig(name="m", base_url=server.url, retries=FAST, prices=FREE))


REPLIES = st.fixed_dictionaries(
    {"content": st.none() | st.text(max_size=40)},
    optional={
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(min_size=1, max_size=10),
                    "arguments": st.text(max_size=20)
                    | st.dictionaries(st.text(max_size=5), st.integers() | st.text(), max_size=3),
                }
            ),
            max_size=3,
        )
    },
)


@settings(max_examples=40, deadline=None)
@given(reply=REPLIES, history=st.lists(st.text(max_size=30), max_size=3))
def test_any_reply_and_history_count_the_same_as_the_server(
    http_echo: OpenAIModel, reply: dict[str, Any], history: list[str]
) -> None:
    messages = [{"role": "user", "content": text} for text in history]
    messages.append({"role": "user", "content": json.dumps(reply)})
    in_process = ReplayModel(ModelConfig(name="m"), script=_reply_from_request)
    assert seen(in_process.query(messages)) == seen(http_echo.query(messages))


# --------------------------------------------------------------------------- errors


def test_an_exhausted_script_is_the_servers_bad_request() -> None:
    model = replay([{"content": "one"}])
    model.query(USER)
    with pytest.raises(BadRequest, match="script exhausted after 1 replies"):
        model.query(USER)


def test_transient_errors_are_retried_each_on_the_next_step() -> None:
    model = replay([{"error": 429, "retry_after": 30}, {"error": 503}, {"content": "done"}])
    assert model.query(USER).content == "done"
    assert len(model.requests) == 3
    assert model.stats.api_calls == 1


@pytest.mark.parametrize(
    ("status", "error"), [(429, RateLimited), (500, ServerError), (503, ServerError)]
)
def test_transient_errors_give_up_after_the_configured_attempts(
    status: int, error: type[Exception]
) -> None:
    model = replay([{"error": status}] * 3 + [{"content": "never"}])
    with pytest.raises(error, match="3 attempt"):
        model.query(USER)
    assert len(model.requests) == 3
    assert model.stats.api_calls == 0


@pytest.mark.parametrize(
    ("step", "error"),
    [
        ({"error": 401}, AuthenticationFailed),
        ({"error": 404}, ModelNotFound),
        ({"error": 400, "code": "context_length_exceeded"}, ContextWindowExceeded),
        ({"error": 400, "message": "maximum context length is 8192 tokens"}, ContextWindowExceeded),
        ({"error": 422, "message": "bad tools"}, BadRequest),
    ],
)
def test_other_errors_are_not_retried(step: dict[str, Any], error: type[Exception]) -> None:
    model = replay([step, {"content": "never"}])
    with pytest.raises(error) as caught:
        model.query(USER)
    assert type(caught.value) is error
    assert len(model.requests) == 1


def test_a_policy_that_returns_nothing_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="script policy returned no step"):
        replay(lambda request: None).query(USER)


# --------------------------------------------------------------------------- limits and cost


def test_unpriced_costs_zero_and_priced_costs_by_the_token() -> None:
    assert replay([{"content": "ab"}]).query(USER).cost == 0.0
    priced = replay([{"content": "ab"}], prices={"replay": (1e6, 2e6)})
    response = priced.query(USER)  # 2 prompt tokens, 1 completion token
    assert response.cost == pytest.approx(2 * 1.0 + 1 * 2.0)
    assert priced.stats.instance_cost == pytest.approx(4.0)


def test_cost_and_call_limits_stop_before_the_call() -> None:
    costly = replay(
        [{"content": "a"}] * 3, prices={"replay": (1e6, 1e6)}, per_instance_cost_limit=2
    )
    costly.query(USER)
    with pytest.raises(CostLimitExceeded) as caught:
        costly.query(USER)
    assert caught.value.limit == "per_instance_cost_limit"
    assert len(costly.requests) == 1

    shared = GlobalStats()
    prices = {"replay": (1e6, 1e6)}
    config = ModelConfig(
        name="replay", prices=prices, per_instance_cost_limit=0, total_cost_limit=5
    )
    first = ReplayModel(config, shared, script=[{"content": "a"}] * 3)
    second = ReplayModel(config, shared, script=[{"content": "a"}] * 3)
    first.query(USER)
    second.query(USER)
    with pytest.raises(CostLimitExceeded, match="total_cost_limit"):
        first.query(USER)
    assert shared.api_calls == 2

    counted = replay([{"content": "a"}] * 3, per_instance_call_limit=1)
    counted.query(USER)
    with pytest.raises(CostLimitExceeded, match="per_instance_call_limit"):
        counted.query(USER)


# --------------------------------------------------------------------------- requests


def test_a_policy_sees_the_request_and_text_mode_sends_no_tools() -> None:
    asked: list[dict[str, Any]] = []

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"content": f"{len(request['messages'])} messages"}

    assert replay(policy).query(USER, TOOLS).content == "1 messages"
    assert asked[0] == {"model": "replay", "messages": USER, "tools": TOOLS}
    replay(policy, function_calling=False).query(USER, TOOLS)
    assert "tools" not in asked[1]


# --------------------------------------------------------------------------- selection


def test_model_replay_with_a_script_file_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"content": "from the file"}]))
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    args = parser.parse_args(["--model", "replay", "--model.script", str(script)])
    config = load_config(None, flag_overrides(args))
    model = get_model(config.model)
    assert isinstance(model, ReplayModel)
    assert model.query(USER).content == "from the file"


def test_a_saved_traj_replays_as_a_model(tmp_path: Path) -> None:
    traj = tmp_path / "run.traj"
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "the issue"},
        {"role": "assistant", "content": "look", "tool_calls": [call]},
        {"role": "tool", "content": "a.py", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done"},
    ]
    traj.write_text(json.dumps({"history": history}))
    model = get_model(ModelConfig(name="replay", script=str(traj)))
    first, second = model.query(USER), model.query(USER)
    assert (first.content, first.tool_calls[0].name) == ("look", "bash")
    assert second.content == "done"


def test_replay_without_a_script_says_which_flag_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"--model\.script"):
        get_model(ModelConfig(name="replay"))
    with pytest.raises(ScriptError, match="no such script file"):
        get_model(ModelConfig(name="replay", script=str(tmp_path / "missing.yaml")))
