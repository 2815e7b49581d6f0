"""`LiteLLMModel` (the extra pgs-agent[litellm]) against the scripted server over real HTTP,
through litellm's `openai/` route with `base_url` (litellm's own client, nothing patched)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.errors import AuthenticationFailed, ContextWindowExceeded, ServerError
from agent.models import ModelConfig, RetryConfig, get_model, model_kind
from agent.models.script_server import ScriptedServer
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, SUBMIT, bash, pgs_env, run_argv

FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")  # the local sandbox's cwd
FAST = RetryConfig(attempts=3, min_wait=0.001, max_wait=0.01)
USER = [{"role": "user", "content": "abcdefgh"}]  # 8 characters: 2 tokens on the server


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def litellm_model(url: str, **kw: Any) -> Any:
    config = ModelConfig(
        name="openai/scripted", model_class="litellm", base_url=url, retries=FAST, **kw
    )
    return get_model(config)


def test_a_run_through_litellm_counts_usage_and_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    out = tmp_path / "out"
    prices = json.dumps({"scripted": [1000.0, 2000.0]})  # priced by the served name
    with ScriptedServer([FIX, SUBMIT]) as server:
        argv = run_argv(
            repo, "--model", "openai/scripted", "--model.prices", prices, url=server.url
        )
        argv += ["--model.model-class", "litellm", "--sandbox", "local", "--output-dir", str(out)]
        code = main(argv)
        requests = server.requests
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "+    return text.upper()" in captured.out
    assert [r["model"] for r in requests] == ["scripted", "scripted"]  # litellm's openai/ route
    assert requests[0]["tools"]  # function calling, as with OpenAIModel
    (traj_path,) = out.glob("*/*.traj")
    stats = json.loads(traj_path.read_text())["info"]["model_stats"]
    assert stats["api_calls"] == 2 and stats["tokens_sent"] > 0 and stats["tokens_received"] > 0
    expected = (stats["tokens_sent"] * 1000.0 + stats["tokens_received"] * 2000.0) / 1e6
    assert stats["instance_cost"] == pytest.approx(expected)
    assert (stats["price_source"], stats["price"]) == ("config", [1000.0, 2000.0])
    assert "config price)" in captured.err


def test_errors_and_retries_are_the_openai_models() -> None:
    steps = [
        *[{"error": 503}] * 2,
        {"content": "after two retries"},
        *[{"error": 500}] * 3,
        {"error": 401},
        {"error": 400, "message": "This model's maximum context length is 8192 tokens."},
    ]
    with ScriptedServer(steps) as server:
        model = litellm_model(server.url, prices={"scripted": (0, 0)})
        assert model.query(USER).content == "after two retries"
        with pytest.raises(ServerError, match=r"kept failing \(HTTP 500\) after 3 attempt"):
            model.query(USER)
        with pytest.raises(AuthenticationFailed, match="set OPENAI_API_KEY") as refused:
            model.query(USER)
        with pytest.raises(ContextWindowExceeded) as overflow:
            model.query(USER)
        assert len(server.requests) == 3 + 3 + 1 + 1  # ours are the only retries
    assert "\n" not in str(refused.value) and str(server.url) in str(refused.value)
    assert overflow.value.exit_status == "exit_context"
    assert model.stats.api_calls == 1


def test_a_cost_limit_stops_a_litellm_model_before_the_call() -> None:
    from agent.errors import CostLimitExceeded

    with ScriptedServer([{"content": "a"}] * 3) as server:
        model = litellm_model(
            server.url, prices={"scripted": (1e6, 1e6)}, per_instance_cost_limit=5.0
        )
        model.query(USER)  # 2 + 1 tokens at $1 each
        model.query(USER)
        with pytest.raises(CostLimitExceeded):
            model.query(USER)
        assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("anthropic/claude-sonnet-4-5-20250929", "litellm"),
        ("gemini/gemini-2.5-pro", "litellm"),
        ("openai/gpt-4o", "openai"),  # as before: an OpenAI-compatible name
        ("Qwen/Qwen2.5-Coder-32B-Instruct", "openai"),  # a vLLM server's model
        ("gpt-4o", "openai"),
        ("replay", "replay"),
    ],
)
def test_a_provider_prefix_chooses_litellm(name: str, kind: str) -> None:
    assert model_kind(ModelConfig(name=name)) == kind
    assert model_kind(ModelConfig(name="gpt-4o", model_class="litellm")) == "litellm"


def test_without_the_extra_a_litellm_model_is_one_line_saying_what_to_install(
    tmp_path: Path,
) -> None:
    # litellm made absent for this process: a package of that name that is not there.
    absent = tmp_path / "absent" / "litellm"
    absent.mkdir(parents=True)
    (absent / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'litellm'\", name='litellm')\n"
    )
    repo = make_repo(tmp_path / "textutil", BUGGY)
    argv = run_argv(repo, "--model", "anthropic/claude-sonnet-4-5-20250929", "--sandbox", "local")
    env = pgs_env()
    env["PYTHONPATH"] = f"{absent.parent}{':'}{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv, "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("pgs: error: "), line
    assert "needs litellm, an optional extra: pip install 'pgs-agent[litellm]'" in line
    assert not (tmp_path / "out").exists()
