"""The workflow file users copy (docs/github-action.yml): it runs ``pgs github`` as documented,
takes any provider's key from the repository's secrets and installs pgs-agent with litellm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.github_actions import _env  # noqa: F401

WORKFLOW = Path(__file__).parents[2] / "docs" / "github-action.yml"


def step_argv(command: str, env: dict[str, str]) -> list[str]:
    """The argv a workflow step's ``run:`` line gives its program, as bash expands it."""
    done = subprocess.run(
        ["bash", "-c", f"set -- {command}; printf '%s\\0' \"$@\""],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split("\0")[:-1]


@pytest.mark.parametrize("base_url", ["", "http://llm.internal/v1"])
def test_the_workflow_users_copy_runs_pgs_github_as_documented(base_url: str) -> None:
    import yaml

    from agent.cli import build_parser
    from agent.cli.github import cmd_github

    workflow = yaml.safe_load(WORKFLOW.read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["issues"] == {"types": ["labeled"]}
    assert on["issue_comment"] == {"types": ["created"]}
    assert on["workflow_dispatch"]["inputs"]["issue"]["required"] is True
    assert workflow["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
    }
    job = workflow["jobs"]["fix"]
    steps = {step.get("name", step.get("uses")): step for step in job["steps"]}
    checkout = steps["actions/checkout@v4"]["with"]
    assert checkout["persist-credentials"] is False
    step = steps["pgs github"]
    assert step["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    assert "${{" not in step["run"]  # nothing of the event is pasted into the shell line
    env = {"PGS_MODEL": "gpt-4o", "PGS_BASE_URL": base_url, "RUNNER_TEMP": "/tmp/runner"}
    program, *args = step_argv(step["run"], env)
    assert program == "pgs"
    parsed = build_parser().parse_args(args)
    assert parsed.func is cmd_github
    assert parsed.output_dir == Path("/tmp/runner/pgs")
    assert parsed.model__base_url == (base_url or None)
    # The job's first filter and pgs github agree on the label and the word.
    assert f"github.event.label.name == '{parsed.label}'" in job["if"]
    assert f"contains(github.event.comment.body, '{parsed.trigger}')" in job["if"]
    for role in ("OWNER", "MEMBER", "COLLABORATOR"):
        assert role in job["if"]
    upload = steps["Keep the run's files"]
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ runner.temp }}/pgs"
    program, *args = step_argv(
        steps["Base image"]["run"].replace("${{ vars.PGS_PYTHON || '3.11' }}", "3.11"), {}
    )
    assert program == "pgs" and build_parser().parse_args(args).method == "dockerfile"


#: The model keys the workflow takes from the repository's secrets: a provider's own variable
#: (litellm reads it), or PGS_API_KEY for any other (pgs reads it via --model.api-key-env).
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")


@pytest.mark.parametrize(
    ("model", "secret"),
    [
        ("gpt-4o", "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-pro", "GEMINI_API_KEY"),
        ("openrouter/qwen/qwen3-coder", "OPENROUTER_API_KEY"),
        ("hosted_vllm/qwen3-coder", "PGS_API_KEY"),
    ],
)
def test_the_workflow_takes_any_providers_key_and_installs_litellm(model: str, secret: str) -> None:
    import tomllib

    import yaml
    from packaging.requirements import Requirement

    from agent.cli import build_parser
    from agent.core.secrets import is_secret

    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = {step.get("name", step.get("uses")): step for step in workflow["jobs"]["fix"]["steps"]}
    # pgs-agent with its litellm extra (models of other providers go through litellm), as
    # pyproject.toml names that extra.
    wanted = Requirement(workflow["env"]["PGS_AGENT"])
    pyproject = tomllib.loads((WORKFLOW.parents[1] / "pyproject.toml").read_text())
    assert wanted.name == pyproject["project"]["name"] and wanted.extras == {"litellm"}
    assert "litellm" in pyproject["project"]["optional-dependencies"]
    assert step_argv(steps["Install pgs-agent"]["run"], {"PGS_AGENT": str(wanted)}) == [
        "python",
        "-m",
        "pip",
        "install",
        str(wanted),
    ]
    # Each key comes from a secret of its own name (GitHub masks secrets in the logs), under
    # a name pgs redacts from everything it writes; none is read in a shell line.
    step = steps["pgs github"]
    for name in (*PROVIDER_KEYS, "PGS_API_KEY"):
        assert step["env"][name] == f"${{{{ secrets.{name} }}}}"
        assert is_secret(name, "k3y-value-of-the-provider")
    for each in workflow["jobs"]["fix"]["steps"]:
        assert "secrets." not in each.get("run", "")
    value = "k3y-value-of-the-provider"
    env = {"PGS_MODEL": model, "RUNNER_TEMP": "/tmp/runner", secret: value}
    if secret != "PGS_API_KEY":
        env["PGS_API_KEY"] = ""  # a secret not set: an empty variable
    program, *args = step_argv(step["run"], env)
    assert program == "pgs" and value not in " ".join(args)
    parsed = build_parser().parse_args(args)
    assert parsed.model__name == model
    # PGS_API_KEY set: pgs sends the key it holds; else the provider's own variable is read.
    assert parsed.model__api_key_env == ("PGS_API_KEY" if secret == "PGS_API_KEY" else None)
