"""A mini-swe-agent or SWE-agent config file given to ``--config`` is answered with what its
keys are called in pgs (agent/run/foreign.py), as their flags are (agent/cli/flags.py), not
with the pgs key closest by spelling (``model.model_name`` → "did you mean model.model_class?",
issue 32). The files are small copies of the key structure of their shipped configs
(mini-swe-agent's ``src/minisweagent/config/benchmarks/swebench.yaml`` and ``default.yaml``,
SWE-agent's ``config/default.yaml`` and a benchmark's ``agent.model``), through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main

#: mini-swe-agent's swebench.yaml, its keys (texts shortened).
MINI = """\
agent:
  system_template: |
    You are a helpful assistant that can interact with a computer.
  instance_template: |
    {{task}}
  step_limit: 250
  cost_limit: 3.
environment:
  cwd: "/testbed"
  timeout: 60
  interpreter: ["bash", "-c"]
  env:
    PAGER: cat
  environment_class: docker
model:
  observation_template: |
    <returncode>{{output.returncode}}</returncode>
  format_error_template: |
    Tool call error: {{error}}
  model_name: "anthropic/claude-sonnet-4-5-20250929"
  model_kwargs:
    drop_params: true
    parallel_tool_calls: true
"""

#: SWE-agent's config/default.yaml, with a benchmark config's agent.model (texts shortened).
SWE_AGENT = """\
agent:
  templates:
    system_template: |-
      You are a helpful assistant that can interact with a computer to solve tasks.
    instance_template: |-
      {{problem_statement}}
    next_step_template: |-
      OBSERVATION:
      {{observation}}
    next_step_no_output_template: |-
      Your command ran successfully and did not produce any output.
  tools:
    env_variables:
      PAGER: cat
    bundles:
      - path: tools/registry
      - path: tools/edit_anthropic
      - path: tools/review_on_submit_m
    registry_variables:
      USE_FILEMAP: 'true'
    enable_bash_tool: true
    parse_function:
      type: function_calling
  history_processors:
    - type: cache_control
      last_n_messages: 2
  model:
    name: claude-sonnet-4-20250514
    api_key: $CLAUDE_API_KEY_ROTATION
    per_instance_cost_limit: 3
    total_cost_limit: 1000.0
    temperature: 0.0
"""

#: A SWE-agent run config's task sections (sweagent run --config).
SWE_AGENT_RUN = """\
env:
  repo:
    path: /src/myrepo
  deployment:
    image: python:3.11
problem_statement:
  path: issue.md
model:
  name: gpt-4o
"""


def config_error(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    config = tmp_path / "theirs.yaml"
    config.write_text(text)
    assert main(["run", "--issue", "x", "--config", str(config)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    prefix = f"pgs: error: {config}: "
    assert line.startswith(prefix), line
    return line.removeprefix(prefix)


def test_a_mini_swe_agent_config_is_told_in_pgs_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = config_error(tmp_path, MINI, capsys)
    assert said.startswith("this looks like a mini-swe-agent config: ")
    for told in [
        "model.model_name is pgs's model.name",
        "agent.cost_limit is pgs's model.per_instance_cost_limit",
        "model.observation_template is pgs's agent.observation_template",
        "model.format_error_template is pgs's agent.format_error_template",
        "environment.environment_class is pgs's sandbox.type",
        "environment.env is pgs's sandbox.env",
        "environment.timeout is pgs's agent.command_timeout",
        "model.model_kwargs.drop_params: nothing",
    ]:
        assert told in said
    assert "did you mean" not in said
    assert "no model given" not in said  # model.model_name told it already


def test_a_swe_agent_config_is_told_in_pgs_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = config_error(tmp_path, SWE_AGENT, capsys)
    assert said.startswith("this looks like a SWE-agent config: ")
    for told in [
        "agent.templates.system_template is pgs's agent.system_template",
        "agent.templates.instance_template is pgs's agent.instance_template",
        "agent.templates.next_step_template is pgs's agent.observation_template",
        "agent.tools.bundles is pgs's tools.bundles",
        "agent.tools.env_variables is pgs's tools.env_variables",
        "agent.tools.parse_function is pgs's model.function_calling",
        "agent.history_processors is pgs's agent.keep_observations",
        "agent.model.name is pgs's model.name",
        "agent.model.per_instance_cost_limit is pgs's model.per_instance_cost_limit",
        "agent.model.api_key is pgs's model.api_key_env (the name of the variable, not a key)",
    ]:
        assert told in said
    assert "did you mean" not in said and "no model given" not in said
    assert "$CLAUDE_API_KEY_ROTATION" not in said  # values are not repeated


def test_a_swe_agent_run_configs_task_is_told_as_pgs_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = config_error(tmp_path, SWE_AGENT_RUN, capsys)
    assert said.startswith("this looks like a SWE-agent config: ")
    assert "env.repo.path is pgs's --repo (a flag)" in said
    assert "env.deployment.image is pgs's sandbox.image" in said
    assert "problem_statement.path is pgs's --issue FILE (a flag)" in said
    assert "env.repo is" not in said  # the section's keys are told, not the section too


def test_a_pgs_keys_typo_still_gets_the_closest_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = config_error(tmp_path, "model:\n  nmae: gpt-4o\n", capsys)
    assert said == "unknown key model.nmae (did you mean model.name?)"
