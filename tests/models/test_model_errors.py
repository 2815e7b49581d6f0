"""The model layer's retries and errors against the scripted server (the real openai client over
real HTTP): rate limits and server errors retried, malformed answers, a bad or unset key, an
unreachable or slow server, an unknown model, a context overflow; each one sentence."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from agent.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    MalformedResponse,
    ModelNotFound,
    RateLimited,
    ServerError,
    Unreachable,
)
from agent.models import ModelConfig, ReplayModel, RetryConfig
from agent.models.script_server import ScriptedServer
from tests.support.openai_model import FAST, USER, closed_port, model_for, model_for_url

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.openai_model import _clean_env  # noqa: F401


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
