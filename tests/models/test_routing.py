"""Which backend and provider serve a model name without a provider prefix (issue 32): as
litellm routes it (`litellm.get_llm_provider`), so `claude-sonnet-4-5`, priced from litellm's
map, goes to Anthropic through `LiteLLMModel` and not to OpenAI; a name of one's own server
(a base URL given) stays with `OpenAIModel`. Decided without a network call; through the CLI,
a Claude model without ANTHROPIC_API_KEY is one line naming that variable before any image or
sandbox work, and without litellm one line saying what to install."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.models import (
    ModelConfig,
    family_provider,
    get_model_class,
    inferred_provider,
    model_kind,
)
from agent.models.prices import _cost_map
from tests.support.inprocess import run_pgs
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, ISSUE, closed_port, pgs_env

# As pgs imports it (agent/models/litellm.py): its cost map read from the package, never fetched.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm is imported by the tests that use it, not at collection (seconds, in every worker of
# both stages, the Docker one too, which runs none of these).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None, reason="litellm (the extra) is not installed"
)


@pytest.fixture(scope="module")
def litellm() -> Any:
    return importlib.import_module("litellm")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("name", "kind", "provider"),
    [
        ("claude-sonnet-4-5", "litellm", "anthropic"),
        ("claude-opus-4-1", "litellm", "anthropic"),
        ("claude-sonnet-4-7-20270101", "litellm", "anthropic"),  # not in the map: its family
        ("gpt-4o-mini", "openai", None),
        ("o3-mini", "openai", None),
        ("my-local-model", "openai", None),  # litellm does not know it: an OpenAI-compatible one
        ("Qwen/Qwen2.5-Coder-7B-Instruct", "openai", None),  # a vLLM name, not a provider prefix
        ("anthropic/claude-sonnet-4-5", "litellm", None),
    ],
)
def test_a_bare_name_goes_where_litellm_sends_it(
    name: str, kind: str, provider: str | None
) -> None:
    assert model_kind(ModelConfig(name=name)) == kind
    assert inferred_provider(name) == provider


def test_a_base_url_keeps_any_name_on_ones_own_server(monkeypatch: pytest.MonkeyPatch) -> None:
    given = ModelConfig(name="claude-sonnet-4-5", base_url="http://127.0.0.1:8000/v1")
    assert model_kind(given) == "openai"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert model_kind(ModelConfig(name="claude-sonnet-4-5")) == "openai"


def test_the_families_route_as_litellm_does(litellm: Any) -> None:
    # Every name of the cost map in a family that litellm places, it places with the family's
    # provider: the mapping used without litellm (or for names it does not list) agrees.
    litellm.suppress_debug_info = True
    checked = 0
    for name in _cost_map():
        family = family_provider(name)
        if family is None or "/" in name:
            continue
        try:
            found = litellm.get_llm_provider(name)[1]
        except Exception:
            continue
        assert found == family, name
        checked += 1
    assert checked >= 10


def test_a_claude_model_is_served_by_litellm_with_anthropics_provider() -> None:
    cls = get_model_class(ModelConfig(name="claude-sonnet-4-5"))
    assert cls.__name__ == "LiteLLMModel"
    from agent.models.litellm import provider_of

    assert provider_of("claude-sonnet-4-5") == "anthropic"


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``pgs`` in a process of its own: for a process whose imports the test changes."""
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_claude_model_without_its_key_is_one_line_naming_anthropics_variable(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    argv = ["run", "--repo", str(repo), "--issue", ISSUE, "--model", "claude-sonnet-4-5"]
    argv += ["--sandbox", "docker", "--output-dir", str(tmp_path / "out")]
    env = {"DOCKER_HOST": f"tcp://127.0.0.1:{closed_port()}"}
    done = run_pgs(argv, capfd, cwd=tmp_path, env=env, unset=["ANTHROPIC_API_KEY"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "pgs: error: no API key for anthropic (claude-sonnet-4-5): set ANTHROPIC_API_KEY"
    ]
    assert not (tmp_path / "out").exists()


def test_a_claude_model_without_litellm_says_what_to_install(tmp_path: Path) -> None:
    absent = tmp_path / "absent" / "litellm"  # litellm made absent for this process
    absent.mkdir(parents=True)
    (absent / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'litellm'\", name='litellm')\n"
    )
    repo = make_repo(tmp_path / "textutil", BUGGY)
    argv = ["run", "--repo", str(repo), "--issue", ISSUE, "--model", "claude-sonnet-4-5"]
    argv += ["--sandbox", "local", "--output-dir", str(tmp_path / "out")]
    env = pgs_env()
    env["PYTHONPATH"] = f"{absent.parent}:{env['PYTHONPATH']}"
    done = run(argv, env, tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "needs litellm, an optional extra: pip install 'pgs-agent[litellm]'" in line


def test_a_saved_claude_config_reads_anthropics_variable_again(tmp_path: Path) -> None:
    from agent.run.config import config_yaml, load_config

    saved = tmp_path / "claude.config.yaml"
    saved.write_text(config_yaml(load_config(None, {"model": {"name": "claude-sonnet-4-5"}})))
    again = load_config([saved], {})
    # No api_key_env: OPENAI_API_KEY written back would send OpenAI's key to Anthropic.
    assert "api_key_env" not in again.model.model_fields_set
    assert again.model.base_url is None and model_kind(again.model) == "litellm"
