"""Token counting: the documented simple rule, a vLLM server's tokenize endpoint, tiktoken,
and the fallback to the simple rule whenever a tokenizer is not there."""

from __future__ import annotations

import json
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.models import ModelConfig
from agent.models.scripted import ScriptedServer
from agent.pgs import tokens
from agent.pgs.feedback import select_failure
from agent.pgs.report import CheckReport, TestResult
from agent.pgs.tokens import SimpleCounter, get_counter

SIMPLE = SimpleCounter()


def violation(nodeid: str, xs: list[int]) -> TestResult:
    return TestResult(
        nodeid=nodeid,
        kind="issue",
        outcome="failed",
        category="property_violation",
        example=f"{nodeid.rsplit('::', 1)[-1]}(xs={xs!r})",
    )


# --------------------------------------------------------------------------- the simple count


def test_simple_count_rule_as_documented() -> None:
    assert SIMPLE.count("xs=[0, 0]") == 7  # xs = [ 0 , 0 ]
    assert SIMPLE.count("parse_header(b'x-y')") == 9  # parse_header ( b ' x - y ' )
    assert SIMPLE.count("") == 0 and SIMPLE.count("  \n\t") == 0
    assert SIMPLE.count("12345678901234567890") == 1


words = st.text(st.characters(categories=["L", "Nd"]) | st.just("_"), min_size=1, max_size=8)
texts = st.text(max_size=60)


@given(texts)
def test_simple_count_is_deterministic(text: str) -> None:
    assert SimpleCounter().count(text) == SimpleCounter().count(text)


@given(texts, texts)
def test_simple_count_is_additive_across_a_space(a: str, b: str) -> None:
    assert SIMPLE.count(a + " " + b) == SIMPLE.count(a) + SIMPLE.count(b)


@given(texts, st.lists(words | st.sampled_from(list("[](),=+-*'\"")), min_size=1, max_size=10))
def test_simple_count_grows_with_each_appended_token(text: str, tokens: list[str]) -> None:
    counts = [SIMPLE.count(text + "".join(" " + t for t in tokens[:n])) for n in range(len(tokens))]
    assert counts == list(range(counts[0], counts[0] + len(tokens)))
    assert all(SIMPLE.count(text + t) >= SIMPLE.count(text) for t in tokens)


@given(st.integers(), st.lists(st.integers(), min_size=20, max_size=20))
def test_a_one_element_list_counts_fewer_than_twenty(x: int, xs: list[int]) -> None:
    assert SIMPLE.count(f"xs={[x]!r}") < SIMPLE.count(f"xs={xs!r}")


# --------------------------------------------------------------------------- counters


class TokenizeServer:
    """A stand-in vLLM server: POST /tokenize answers {"count": 1000 + len(prompt)}."""

    def __init__(self, answer: str = "count") -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                if self.path != "/tokenize":
                    self.send_error(404)
                    return
                prompt = body["prompt"]
                reply = (
                    {"count": 1000 + len(prompt)}
                    if answer == "count"
                    else {"tokens": list(range(len(prompt)))}
                )
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> TokenizeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.thread.join()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(tokens, "_vllm_probes", {})
    monkeypatch.setattr(tokens, "_tiktoken_cache", {})
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield


def test_a_vllm_server_counts_through_its_tokenize_endpoint() -> None:
    with TokenizeServer() as server:
        config = ModelConfig(name="Qwen/Qwen2.5-Coder-7B", base_url=server.url + "/")
        counter = get_counter(config)
        assert counter.name == "vllm:Qwen/Qwen2.5-Coder-7B"
        assert counter.count("xs=[0]") == 1006
        assert get_counter(config, "vllm").count("ab") == 1002
        path, body = server.requests[-1]
        assert path == "/tokenize" and body["model"] == "Qwen/Qwen2.5-Coder-7B"
        assert body["prompt"] == "ab"
        probes = [b for _, b in server.requests if b["prompt"] == "ping"]
        assert len(probes) == 1  # probed once, then cached

        chosen = select_failure(
            CheckReport(results=[violation("p::a", [1, 2]), violation("p::b", [1])]),
            "property-min",
            counter,
        )
        assert chosen is not None and chosen.tokens == 1006
        assert chosen.why.endswith("(vllm:Qwen/Qwen2.5-Coder-7B counter)")


def test_a_tokens_list_answer_is_counted_too() -> None:
    with TokenizeServer(answer="tokens") as server:
        counter = get_counter(ModelConfig(name="local", base_url=server.url), "vllm")
        assert counter.count("abcd") == 4


def test_no_tokenize_endpoint_falls_back_to_simple() -> None:
    with ScriptedServer([]) as server:  # answers 404 to POST /tokenize
        config = ModelConfig(name="llama", base_url=server.url)
        assert get_counter(config).name == "simple"
        assert get_counter(config, "vllm").name == "simple"
    closed = ModelConfig(name="llama", base_url=server.url)  # nothing listens any more
    assert get_counter(closed, "vllm").name == "simple"


def test_simple_when_asked_or_without_a_model() -> None:
    assert get_counter(None).name == "simple"
    assert get_counter(ModelConfig(name="gpt-4o"), "simple").name == "simple"
    assert get_counter(ModelConfig(name="human")).name == "simple"
    # The OpenAI API has no tokenize endpoint: a non-OpenAI name there is not probed.
    assert get_counter(ModelConfig(name="deepseek-coder")).name == "simple"


def test_openai_names_without_tiktoken_fall_back_to_simple(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import fails: not installed
    assert get_counter(ModelConfig(name="gpt-4o")).name == "simple"
    assert get_counter(ModelConfig(name="openai/o3-mini"), "tiktoken").name == "simple"


def test_tiktoken_that_cannot_load_its_encoding_falls_back_to_simple(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offline = types.ModuleType("tiktoken")

    def no_download(name: str) -> Any:
        raise ConnectionError("cannot fetch https://openaipublic.blob.core.windows.net/...")

    offline.encoding_for_model = no_download  # type: ignore[attr-defined]
    offline.get_encoding = no_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", offline)
    assert get_counter(ModelConfig(name="gpt-4.1-mini")).name == "simple"


def test_tiktoken_is_used_when_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    class Encoding:
        name = "o200k_base"

        def encode(self, text: str, disallowed_special: Any = ()) -> list[int]:
            return list(range(len(text.split())))

    loaded = types.ModuleType("tiktoken")

    def unknown_model(name: str) -> Any:
        raise KeyError(name)

    loaded.encoding_for_model = unknown_model  # type: ignore[attr-defined]
    loaded.get_encoding = lambda name: Encoding()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", loaded)
    counter = get_counter(ModelConfig(name="gpt-9"))
    assert counter.name == "tiktoken:o200k_base" and counter.count("a b c") == 3


def test_an_openai_like_name_on_a_vllm_server_uses_the_endpoint_when_tiktoken_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with TokenizeServer() as server:
        counter = get_counter(ModelConfig(name="openai/gpt-oss-20b", base_url=server.url))
        assert counter.name == "vllm:openai/gpt-oss-20b" and counter.count("ab") == 1002
