"""Other tools' config keys, pointed to pgs's: a mini-swe-agent or SWE-agent YAML file given to
``--config`` is answered with what each of its keys is called here, not with the closest pgs
key by spelling (``model.model_name`` is pgs's ``model.name``, not "``model.model_class``?").

:func:`foreign_hint` reads an unknown key (and the keys under it, for a section pgs does not
have, such as SWE-agent's ``agent.model``) against :data:`FOREIGN_KEYS`, built from the keys of
mini-swe-agent's ``src/minisweagent/config/*.yaml`` (``agent``, ``environment``, ``model``) and
SWE-agent's ``config/*.yaml`` (``agent.model``, ``agent.templates``, ``agent.tools``, ``env``,
``problem_statement``, ``actions``). As for their flags (:data:`agent.cli.flags.FOREIGN`), the
keys are pointed to, not accepted: their meaning differs in details (a template's variables,
a bundle's path), and one spelling keeps configs alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FOREIGN_KEYS", "MINI", "SWE_AGENT", "foreign_hint"]

MINI = "mini-swe-agent"
SWE_AGENT = "SWE-agent"

#: A key of another tool's config file (dotted) → (the tool, what pgs calls it). A target that
#: is a pgs key is a key; one in words says how pgs does it.
FOREIGN_KEYS: dict[str, tuple[str, str]] = {
    # mini-swe-agent: agents/default.py AgentConfig, models/litellm_model.py, environments/*.py
    "model.model_name": (MINI, "model.name"),
    "model.model_kwargs": (MINI, "model.temperature, model.top_p, ... (keys of model itself)"),
    "model.model_kwargs.temperature": (MINI, "model.temperature"),
    "model.model_kwargs.top_p": (MINI, "model.top_p"),
    "model.model_kwargs.max_tokens": (MINI, "model.max_output_tokens"),
    "model.model_kwargs.api_base": (MINI, "model.base_url"),
    "model.model_kwargs.drop_params": (MINI, "nothing (litellm models drop unsupported ones)"),
    "model.observation_template": (MINI, "agent.observation_template ({{ output }})"),
    "model.format_error_template": (MINI, "agent.format_error_template ({{ error }})"),
    "model.litellm_model_registry": (MINI, "model.prices (model name → [input, output])"),
    "model.cost_tracking": (MINI, "model.prices, or no cost limits"),
    "agent.cost_limit": (MINI, "model.per_instance_cost_limit"),
    "agent.wall_time_limit_seconds": (MINI, "agent.time_limit"),
    "agent.max_consecutive_format_errors": (MINI, "agent.max_format_errors"),
    "agent.mode": (MINI, "nothing: pgs runs unattended (model.name: human to type replies)"),
    "agent.output_path": (MINI, "--output-dir"),
    "environment": (MINI, "sandbox"),
    "environment.environment_class": (MINI, "sandbox.type"),
    "environment.image": (MINI, "sandbox.image"),
    "environment.cwd": (MINI, "sandbox.repo_path"),
    "environment.env": (MINI, "sandbox.env"),
    "environment.timeout": (MINI, "agent.command_timeout"),
    "environment.forward_env": (MINI, "sandbox.env (values, not names)"),
    "environment.interpreter": (MINI, "agent.shell"),
    "environment.run_args": (MINI, "sandbox.memory, sandbox.cpus, sandbox.network"),
    "environment.container_timeout": (MINI, "agent.time_limit"),
    # SWE-agent: run/run_single.py, agent/agents.py, agent/models.py, tools/tools.py
    "agent.model": (SWE_AGENT, "model (a section of its own)"),
    "agent.model.name": (SWE_AGENT, "model.name"),
    "agent.model.per_instance_cost_limit": (SWE_AGENT, "model.per_instance_cost_limit"),
    "agent.model.total_cost_limit": (SWE_AGENT, "model.total_cost_limit"),
    "agent.model.per_instance_call_limit": (SWE_AGENT, "model.per_instance_call_limit"),
    "agent.model.temperature": (SWE_AGENT, "model.temperature"),
    "agent.model.top_p": (SWE_AGENT, "model.top_p"),
    "agent.model.max_output_tokens": (SWE_AGENT, "model.max_output_tokens"),
    "agent.model.api_base": (SWE_AGENT, "model.base_url"),
    "agent.model.api_key": (SWE_AGENT, "model.api_key_env (the name of the variable, not a key)"),
    "agent.model.retry": (SWE_AGENT, "model.retries (attempts, min_wait, max_wait)"),
    "agent.model.completion_kwargs": (SWE_AGENT, "model.temperature, model.top_p, ..."),
    "agent.templates": (SWE_AGENT, "agent (its templates are keys of agent itself)"),
    "agent.templates.system_template": (SWE_AGENT, "agent.system_template"),
    "agent.templates.instance_template": (SWE_AGENT, "agent.instance_template"),
    "agent.templates.next_step_template": (SWE_AGENT, "agent.observation_template"),
    "agent.templates.next_step_no_output_template": (SWE_AGENT, "agent.observation_template"),
    "agent.tools": (SWE_AGENT, "tools (a section of its own)"),
    "agent.tools.bundles": (SWE_AGENT, "tools.bundles (a list of folders)"),
    "agent.tools.env_variables": (SWE_AGENT, "tools.env_variables"),
    "agent.tools.registry_variables": (SWE_AGENT, "tools.registry_variables"),
    "agent.tools.submit_command": (SWE_AGENT, "tools.submit_tools"),
    "agent.tools.execution_timeout": (SWE_AGENT, "agent.command_timeout"),
    "agent.tools.total_execution_timeout": (SWE_AGENT, "agent.time_limit"),
    "agent.tools.parse_function": (SWE_AGENT, "model.function_calling (false: text mode)"),
    "agent.tools.enable_bash_tool": (SWE_AGENT, "nothing: the bash tool is always there"),
    "agent.history_processors": (SWE_AGENT, "agent.keep_observations"),
    "agent.max_requeries": (SWE_AGENT, "agent.max_format_errors"),
    "agent.type": (SWE_AGENT, "nothing: pgs has one agent (--feedback none: no Tester)"),
    "env": (SWE_AGENT, "sandbox, and flags"),
    "env.repo": (SWE_AGENT, "--repo PATH or --issue URL (flags)"),
    "env.repo.path": (SWE_AGENT, "--repo (a flag)"),
    "env.repo.github_url": (SWE_AGENT, "--issue (a GitHub issue URL: the repository is cloned)"),
    "env.repo.base_commit": (SWE_AGENT, "--base-commit (a flag)"),
    "env.deployment": (SWE_AGENT, "sandbox"),
    "env.deployment.image": (SWE_AGENT, "sandbox.image"),
    "env.deployment.type": (SWE_AGENT, "sandbox.type"),
    "env.post_startup_commands": (SWE_AGENT, "--setup (a flag)"),
    "problem_statement": (SWE_AGENT, "--issue (a flag)"),
    "problem_statement.path": (SWE_AGENT, "--issue FILE (a flag)"),
    "problem_statement.text": (SWE_AGENT, "--issue TEXT (a flag)"),
    "problem_statement.github_url": (SWE_AGENT, "--issue URL (a flag)"),
    "actions": (SWE_AGENT, "flags"),
    "actions.open_pr": (SWE_AGENT, "--open-pr (a flag)"),
    "actions.apply_patch_locally": (SWE_AGENT, "--apply (a flag)"),
    "output_dir": (SWE_AGENT, "--output-dir (a flag)"),
    "instances": (SWE_AGENT, "--instances FILE or --dataset NAME (flags of pgs batch)"),
}


def foreign_hint(
    loc: tuple[str, ...], data: Mapping[str, Any]
) -> tuple[str, list[str], list[tuple[str, ...]]] | None:
    """For an unknown key at ``loc`` of the config ``data``: the tool whose config it looks
    like, what its keys are called in pgs (``model.model_name is pgs's model.name``), and the
    pgs keys named (as locations: ``("model", "name")``); None when neither the key nor one
    under it is another tool's."""
    keys = [key for key in _keys_at(loc, data) if key in FOREIGN_KEYS]
    # A section's keys told one by one, not the section too (env.repo.path, not env.repo).
    keys = [key for key in keys if not any(k.startswith(key + ".") for k in keys)]
    if not keys:
        return None
    tool = FOREIGN_KEYS[keys[0]][0]
    told, targets = [], []
    for key in keys:
        who, target = FOREIGN_KEYS[key]
        if who != tool:
            continue
        first = target.split()[0].rstrip(",")
        if first.split(".")[0] in _SECTIONS or first.startswith("--"):
            told.append(f"{key} is pgs's {target}")
            if not first.startswith("--"):
                targets.append(tuple(first.split(".")))
        else:
            told.append(f"{key}: {target}")
    return tool, told, targets


_SECTIONS = ("model", "agent", "sandbox", "tools", "pgs")


def _keys_at(loc: tuple[str, ...], data: Mapping[str, Any]) -> Iterator[str]:
    """The dotted key at ``loc``, then those under it (depth first), most specific first for
    a section: SWE-agent's ``agent.model`` is told as ``agent.model.name`` ... when they are
    known, else as itself."""
    value: Any = data
    for part in loc:
        value = value.get(part) if isinstance(value, Mapping) else None
    key = ".".join(loc)
    below = list(_below(key, value))
    if any(k in FOREIGN_KEYS for k in below):
        yield from below
    else:
        yield key


def _below(prefix: str, value: Any) -> Iterator[str]:
    if not isinstance(value, Mapping):
        return
    for name, inner in value.items():
        key = f"{prefix}.{name}"
        yield key
        yield from _below(key, inner)
