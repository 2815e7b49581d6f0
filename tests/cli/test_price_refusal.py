"""Honest cost through the real command line: a model without a price is refused before the
run starts while a cost limit is on (one ``pgs: error:`` line, exit 2, nothing made, no model
call), turning the limits off runs it with its cost said to be not counted, and a model
litellm's cost map knows is priced from it. The scripted model over real HTTP, the local
sandbox (Docker is not the point), real git repositories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.prices import cost_map_path
from agent.models.script_server import ScriptedServer
from tests.support.inprocess import run_pgs
from tests.support.repos import make_repo
from tests.support.swe_dataset import batch_args, make_dataset
from tests.support.textutil import BUGGY, SUBMIT, bash, run_argv

FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")  # the local sandbox's cwd
UNPRICED = ("--model", "my-local-model", "--model.prices", "{}")
PRICE_LINE = "pgs: error: no price known for the model 'my-local-model'"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # the scripted model, never a real one
        monkeypatch.delenv(var, raising=False)
    return make_repo(tmp_path / "textutil", BUGGY)


def traj_of(out: Path) -> dict[str, Any]:
    (path,) = out.glob("*/*.traj")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_an_unknown_price_is_refused_before_the_run_starts(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with ScriptedServer([FIX, SUBMIT]) as server:
        argv = run_argv(repo, *UNPRICED, "--sandbox", "local", url=server.url)
        done = run_pgs([*argv, "--output-dir", str(out)], capfd, cwd=tmp_path)
        assert server.requests == []  # no model call
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(PRICE_LINE), line
    # It says both ways out, each as a flag to type.
    assert """--model.prices '{"my-local-model": [1.0, 2.0]}'""" in line
    assert line.endswith("run without cost limits with --model.per-instance-cost-limit 0")
    assert "per_instance_cost_limit of 3 USD cannot hold" in line
    assert done.stdout == ""
    assert not out.exists()  # nothing made: no folder, no trajectory


def test_turning_the_cost_limits_off_runs_an_unpriced_model(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with ScriptedServer([FIX, SUBMIT]) as server:
        argv = run_argv(repo, *UNPRICED, "--model.per-instance-cost-limit", "0", url=server.url)
        code = main([*argv, "--sandbox", "local", "--output-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "+    return text.upper()" in captured.out
    assert "cost: not counted (no price known, cost limits off)" in captured.err
    stats = traj_of(out)["info"]["model_stats"]
    assert stats["price_source"] == "unpriced" and stats["price"] is None
    assert stats["instance_cost"] == 0 and stats["api_calls"] == 2 and stats["tokens_sent"] > 0


def test_a_model_litellm_knows_is_priced_from_its_cost_map(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Claude model behind an OpenAI-compatible server (a proxy): OpenAIModel, litellm's price.
    name = "claude-sonnet-4-5-20250929"
    path = cost_map_path()
    assert path is not None, "litellm is not installed: pip install 'pgs-agent[litellm]'"
    entry = json.loads(path.read_text())[name]
    price = [entry["input_cost_per_token"] * 1e6, entry["output_cost_per_token"] * 1e6]
    out = tmp_path / "out"
    with ScriptedServer([FIX, SUBMIT]) as server:
        argv = run_argv(repo, "--model", name, "--model.prices", "{}", url=server.url)
        code = main([*argv, "--sandbox", "local", "--output-dir", str(out)])
        assert {r["model"] for r in server.requests} == {name}
    err = capsys.readouterr().err
    assert code == 0, err
    stats = traj_of(out)["info"]["model_stats"]
    assert stats["price_source"] == "litellm"
    assert stats["price"] == pytest.approx(price)
    expected = (stats["tokens_sent"] * price[0] + stats["tokens_received"] * price[1]) / 1e6
    assert stats["instance_cost"] == pytest.approx(expected) and expected > 0
    assert "litellm price)" in err


def test_the_testers_own_model_needs_a_price_too(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = run_argv(repo, "--pgs.tester-model", "my-tester", "--feedback", "property-min")
    code = main([*argv, "--sandbox", "local", "--output-dir", str(tmp_path / "out")])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line.startswith("pgs: error: no price known for the Tester's model 'my-tester'"), line


def test_a_batch_with_an_unknown_price_is_refused_before_any_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = make_dataset(tmp_path / "data")
    out = tmp_path / "batch"
    argv = batch_args(dataset, "http://127.0.0.1:9/v1", out, model="my-local-model")
    code = main([*argv, "--model.prices", "{}", "--model.total-cost-limit", "10"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line.startswith(PRICE_LINE), line
    assert "per_instance_cost_limit of 3 USD and total_cost_limit of 10 USD" in line
    assert "--model.per-instance-cost-limit 0 --model.total-cost-limit 0" in line
    assert not out.exists()


def test_the_demo_with_a_key_and_an_unknown_model_is_refused_before_its_image(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # With OPENAI_API_KEY the demo calls the real API: an unpriced --model stops it at once
    # (no image built, no call made: the key is never used).
    env = {"OPENAI_API_KEY": "sk-test-never-sent", "DOCKER_HOST": "unix:///nonexistent.sock"}
    done = run_pgs(["demo", "--model", "my-local-model"], capfd, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(PRICE_LINE), line
    assert not (tmp_path / "trajectories").exists()


def test_the_recorded_demo_and_the_replay_model_need_no_price() -> None:
    # The demo's recorded session is priced at 0 by the demo itself; the replay model bills
    # nothing: neither is refused (tests/cli/test_ladder.py runs the replay model unpriced).
    from agent.run.config import load_config
    from agent.run.reviewer import check_prices

    check_prices(load_config(None, {"model": {"name": "replay", "script": "x.yaml"}}))
    check_prices(load_config(None, {"model": {"name": "human"}}))
