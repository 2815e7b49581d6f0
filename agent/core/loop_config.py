"""How the Generator works (the ``agent`` section of the config): :class:`AgentConfig`.

Its prompts (Jinja2 templates, defaults in ``agent/config/default.yaml``), its limits and how it
keeps the history; the loop that follows it is :mod:`agent.core.loop`. The field descriptions
are the ``--agent.*`` flags' help. :data:`MESSAGE_FIELDS` are the texts the Tester (a loop of
its own) shares with the Generator.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.core.parsing import ActionParser
from agent.core.prompts import (
    CONFIG_ONLY,
    FormatErrors,
    Refusals,
    TruncationTemplates,
    default_prompt,
)
from agent.core.tool_output import Truncation

SYSTEM_TEMPLATE = default_prompt("agent", "system_template")

INSTANCE_TEMPLATE = default_prompt("agent", "instance_template")

OBSERVATION_TEMPLATE = default_prompt("agent", "observation_template")

FORMAT_ERROR_TEMPLATE = default_prompt("agent", "format_error_template")

ELIDED_TEMPLATE = default_prompt("agent", "elided_template")


class AgentConfig(BaseModel):
    """How the Generator works: prompts, limits and history handling."""

    model_config = ConfigDict(extra="forbid")
    system_template: str = Field(
        SYSTEM_TEMPLATE, description="Jinja2 template of the system message (default.yaml)"
    )
    instance_template: str = Field(
        INSTANCE_TEMPLATE,
        description="Jinja2 template of the first user message, the issue in it "
        "({{ problem_statement }})",
    )
    observation_template: str = Field(
        OBSERVATION_TEMPLATE,
        description="Jinja2 template of each command's output as shown to the model "
        "({{ output }}, {{ exit_code }})",
    )
    format_error_template: str = Field(
        FORMAT_ERROR_TEMPLATE,
        description="Jinja2 template of the answer to a reply with no valid action ({{ error }})",
    )
    elided_template: str = Field(
        ELIDED_TEMPLATE,
        description="Jinja2 template that replaces an old output no longer kept "
        "({{ lines }}; agent.keep_observations)",
    )
    step_limit: int = Field(100, ge=0, description="most model steps per task (0: no limit)")
    time_limit: float = Field(3600.0, ge=0, description="wall-clock seconds per task (0: none)")
    command_timeout: float = Field(120.0, gt=0, description="time limit of one command (s)")
    shell: Literal["fresh", "persistent"] = Field(
        "fresh",
        description="fresh: each command in a new shell in the repository, as mini-swe-agent; "
        "persistent: cd, export, source, functions and aliases carry over to the next command, "
        "as in SWE-agent (every process a command started still ends with it)",
    )
    max_format_errors: int = Field(3, ge=1, description="malformed replies in a row before exit")
    max_observation_chars: int = Field(
        12_000, gt=200, description="longer command output is cut (see truncation)"
    )
    truncation: Truncation = Field(
        "pgs",
        description="how a long output is cut: pgs (the middle, with a note), swe-agent (the "
        "head, <response clipped>; its limit is 100000), mini-swe-agent (a warning, head and "
        "tail halves; its limit is 10000)",
    )
    action_parser: ActionParser = Field(
        "pgs",
        description="text mode, which code block is the action: pgs (the one bash block; "
        "unlabelled fences count only when there is none), mini-swe-agent (exactly one ```bash "
        "block), mini-swe-agent-2 (exactly one ```mswea_bash_command block), swe-agent (the "
        "last block)",
    )
    keep_observations: int = Field(
        5, ge=1, description="the last N command outputs stay in the prompt; older ones elided"
    )
    format_errors: FormatErrors = Field(default_factory=FormatErrors, json_schema_extra=CONFIG_ONLY)
    refusals: Refusals = Field(default_factory=Refusals, json_schema_extra=CONFIG_ONLY)
    truncation_templates: TruncationTemplates = Field(
        default_factory=TruncationTemplates, json_schema_extra=CONFIG_ONLY
    )


#: The texts of the agent section besides the system and instance prompts: the Tester, a loop of
#: its own, says them as the Generator's config does.
MESSAGE_FIELDS = (
    "observation_template",
    "format_error_template",
    "elided_template",
    "format_errors",
    "refusals",
    "truncation_templates",
)
