"""An ``OpenAIModel`` for the scripted server or a URL (quick retries, known prices), and the
messages and tools the tests of tests/models send it; ``_clean_env``, the environment without a
key or base URL of the developer's (a test module imports the fixture by name: pytest finds it
there)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from agent.models import ModelConfig, OpenAIModel, RetryConfig
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


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
