"""Prompts shipped in agent/config/default.yaml, and ``--config`` files that stack over them:
later files win key by key, flags win last. The end-to-end test runs ``pgs run`` with two
stacked files (local sandbox, the scripted server over HTTP) and reads the prompt the model got.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.core.loop_config import AgentConfig
from agent.core.prompts import DEFAULT_CONFIG
from agent.errors import ConfigError
from agent.models.script_server import ScriptedServer
from agent.pgs import tester
from agent.pgs.config import PGSConfig
from agent.pgs.feedback import render_feedback
from agent.run.config import load_config
from tests.support.repos import make_repo


def write(path: Path, data: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_prompts_are_the_defaults_of_every_config() -> None:
    shipped = yaml.safe_load(DEFAULT_CONFIG.read_text())
    agent, pgs = AgentConfig(), PGSConfig()
    assert agent.system_template == shipped["agent"]["system_template"]
    assert agent.instance_template == shipped["agent"]["instance_template"]
    assert agent.elided_template == shipped["agent"]["elided_template"]
    assert tester.TesterConfig().system_template == shipped["pgs"]["tester"]["system_template"]
    assert pgs.property_template == shipped["pgs"]["property_template"]
    assert pgs.io_template == shipped["pgs"]["io_template"]
    assert "{{ problem_statement }}" in agent.instance_template


def test_stacked_files_merge_key_by_key_and_flags_win(tmp_path: Path) -> None:
    a = write(
        tmp_path / "a.yaml",
        {
            "model": {"name": "m", "temperature": 0.5},
            "agent": {"step_limit": 7, "instance_template": "A {{ problem_statement }}"},
        },
    )
    b = write(tmp_path / "b.yaml", {"agent": {"instance_template": "B {{ problem_statement }}"}})
    config = load_config([a, b], {"model": {"temperature": 0.1}})
    assert config.agent.instance_template == "B {{ problem_statement }}"  # b over a
    assert config.agent.step_limit == 7  # a's other keys stay
    assert config.model.temperature == 0.1  # the flag over both
    assert config.agent.system_template == AgentConfig().system_template  # shipped default
    assert load_config([b, a], {}).agent.instance_template.startswith("A")  # order matters


def test_a_bad_file_in_the_stack_is_named(tmp_path: Path) -> None:
    good = write(tmp_path / "good.yaml", {"model": {"name": "m"}})
    bad = write(tmp_path / "bad.yaml", {"agent": {"step_limit": "many"}})
    with pytest.raises(ConfigError, match=r"^\S*/bad\.yaml: agent\.step_limit: .*got 'many'$"):
        load_config([good, bad], {})  # the file that set it, not the whole stack
    with pytest.raises(ConfigError, match=r"cannot read the config file .*missing\.yaml"):
        load_config([good, tmp_path / "missing.yaml"], {})


def test_a_feedback_template_from_a_file_reaches_the_message(tmp_path: Path) -> None:
    from agent.pgs.feedback import Selection

    config = load_config(
        write(tmp_path / "fb.yaml", {"pgs": {"io_template": "R{{ round }}: {{ nodeid }}"}}),
        {"model": {"name": "m"}},
    )
    failing = {"category": "wrong_answer", "returned": "1 != 2"}
    selection = Selection.model_validate(
        {
            "result": {
                "nodeid": "tests/test_x.py::test_y",
                "outcome": "failed",
                "category": "wrong_answer",
                "output": "E   assert 1 == 2",
            },
            "chosen": failing,
            "category": "wrong_answer",
            "mode": "io",
            "input": "",
            "tokens": 0,
            "counter": "simple",
            "candidates": 1,
            "why": "the first failing test",
        }
    )
    message = render_feedback(selection, "io", 1, 5, template=config.pgs.io_template)
    assert message == "R1: tests/test_x.py::test_y"
    default = render_feedback(selection, "io", 1, 5, template=PGSConfig().io_template)
    assert "E   assert 1 == 2" in default and default.startswith("Round 1 of 5")


def test_pgs_run_with_two_stacked_config_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    base = write(
        tmp_path / "base.yaml",
        {
            "model": {"name": "scripted", "prices": {"scripted": [0.0, 0.0]}},
            "sandbox": {"type": "local"},
            "pgs": {"feedback": "none"},
            "agent": {"instance_template": "BASE {{ problem_statement }}"},
        },
    )
    team = write(
        tmp_path / "team.yaml",
        {"agent": {"instance_template": "TEAM: {{ problem_statement }} (be brief)"}},
    )
    submit = {"content": "done", "tool_calls": [{"name": "submit", "arguments": {}}]}
    out = tmp_path / "out"
    with ScriptedServer([submit]) as server:
        code = main(
            [
                "run",
                "--repo",
                str(repo),
                "--issue",
                "x should be two",
                "--config",
                str(base),
                "--config",
                str(team),
                "--base-url",
                server.url,
                "--output-dir",
                str(out),
            ]
        )
        first = server.requests[0]["messages"]
    capsys.readouterr()
    assert code == 0  # submitted
    user = next(m for m in first if m["role"] == "user")["content"]
    assert user == "TEAM: x should be two (be brief)"
    traj = json.loads(next(out.rglob("*.traj")).read_text())
    assert traj["replay_config"]["agent"]["instance_template"].startswith("TEAM:")
