"""The Tester sub-agent: reads the issue and the ORIGINAL code, writes properties (or, in
the extraction turn of the io modes, the issue's examples as concrete tests:
:meth:`TesterConfig.for_examples`).

It is the Generator's loop (:class:`agent.core.loop.Agent`) with its own prompts, its own model and
its own conversation: it never sees the Generator's reasoning (shared reasoning means shared
blind spots). It may explore freely but writes only inside the properties folder; anything it
changes elsewhere is reverted when it ends.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from agent.core.loop import Agent
from agent.core.loop_config import MESSAGE_FIELDS, AgentConfig
from agent.core.prompts import config_only_prompt, default_prompt
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.models import Model
from agent.pgs.guard import SAFE_GIT
from agent.record.pgs import TesterConversation
from envs.sandbox import Sandbox

PROPERTIES_DIR = ".pgs/properties"

TESTER_SYSTEM_TEMPLATE = default_prompt("pgs", "tester", "system_template")

TESTER_INSTANCE_TEMPLATE = default_prompt("pgs", "tester", "instance_template")


class TesterConfig(BaseModel):
    """The Tester sub-agent: prompts and limits (its model is chosen in the PGS config)."""

    model_config = ConfigDict(extra="forbid")
    system_template: str = TESTER_SYSTEM_TEMPLATE
    instance_template: str = TESTER_INSTANCE_TEMPLATE
    retry_template: str = config_only_prompt("pgs", "tester", "retry_template")
    probe_template: str = config_only_prompt("pgs", "tester", "probe_template")
    examples_system_template: str = config_only_prompt("pgs", "tester", "examples_system_template")
    examples_instance_template: str = config_only_prompt(
        "pgs", "tester", "examples_instance_template"
    )
    inputs_system_template: str = config_only_prompt("pgs", "tester", "inputs_system_template")
    inputs_instance_template: str = config_only_prompt("pgs", "tester", "inputs_instance_template")
    inputs_note_template: str = config_only_prompt("pgs", "tester", "inputs_note_template")
    step_limit: int = Field(default=30, ge=1, description="most steps for writing properties")
    time_limit: float = Field(default=900.0, ge=0, description="wall-clock seconds (0: none)")
    properties_dir: str = Field(default=PROPERTIES_DIR, description="scratch folder in the repo")

    def for_examples(self, folder: str | None = None) -> TesterConfig:
        """The extraction turn's config: the examples prompts in place of the properties',
        writing into ``folder`` (default: the properties folder itself, as in the io modes)."""
        return self.model_copy(
            update={
                "system_template": self.examples_system_template,
                "instance_template": self.examples_instance_template,
                "properties_dir": folder or self.properties_dir,
            }
        )

    def for_inputs(self) -> TesterConfig:
        """The input generator's config: its prompts, writing ``hard_inputs.py`` into the
        properties folder."""
        return self.model_copy(
            update={
                "system_template": self.inputs_system_template,
                "instance_template": self.inputs_instance_template,
            }
        )


class SubTrajectory(Trajectory):
    """A conversation stored inside another run's record: every save hands it to ``store``
    (which writes the parent trajectory)."""

    def __init__(self, parent: Trajectory, store: Callable[[TesterConversation], None]) -> None:
        super().__init__(parent.path, replay_config={}, redactor=parent.redactor)
        self.store = store

    def save(self) -> None:
        self.store(TesterConversation(trajectory=self.steps, history=self.history, info=self.info))


def run_tester(
    config: TesterConfig,
    model: Model,
    sandbox: Sandbox,
    toolset: Toolset,
    trajectory: Trajectory,
    problem_statement: str,
    *,
    function_calling: bool = True,
    note: str = "",
    base: str = "HEAD",
    generator_config: AgentConfig | None = None,
) -> dict[str, str]:
    """Let the Tester write its properties; returns {path: text} of the property files.

    ``note`` follows the issue in the Tester's first message (a later turn's reason: the
    validation report of its first set, or the rules already written). ``base``: the
    original code's commit, restored when the Tester ends. ``generator_config``: the
    Generator's agent section, whose texts (:data:`~agent.core.loop_config.MESSAGE_FIELDS`: the
    observation, format-error and cut-output templates) the Tester's loop says too.
    """
    instance = config.instance_template
    if note:
        instance += "\n\n{% raw %}" + note + "{% endraw %}"
    agent_config = AgentConfig(
        system_template=config.system_template.replace(
            "{{ properties_dir }}", config.properties_dir
        ),
        instance_template=instance.replace("{{ properties_dir }}", config.properties_dir),
        step_limit=config.step_limit,
        time_limit=config.time_limit,
        **{f: getattr(generator_config, f) for f in MESSAGE_FIELDS if generator_config},
    )
    tester = Agent(
        agent_config, model, sandbox, toolset, trajectory, function_calling=function_calling
    )
    try:
        tester.run(problem_statement)
    finally:
        restore_original(sandbox, keep=config.properties_dir, base=base)
    return read_properties(sandbox, config.properties_dir)


def restore_original(sandbox: Sandbox, *, keep: str, base: str = "HEAD") -> None:
    """Back to the original commit ``base`` (the pinned SHA: a commit, checkout or reset by the
    Generator moves ``HEAD``, never ``base``), index included; the scratch folder (with the
    properties) survives. Untracked files go; ignored ones (build outputs) stay."""
    scratch = keep.split("/", 1)[0]
    result = sandbox.run(
        f"{SAFE_GIT} reset -q --hard {shlex.quote(base)} && "
        f"{SAFE_GIT} clean -qfd -e {shlex.quote(scratch)} && mkdir -p {shlex.quote(keep)}"
    )
    if not result.ok:
        raise RuntimeError(f"could not restore the original code: {result.output[-1000:]}")


def read_properties(sandbox: Sandbox, properties_dir: str) -> dict[str, str]:
    listing = sandbox.run(
        f"find {shlex.quote(properties_dir)} -name 'test_*.py' -type f 2>/dev/null | sort"
    )
    files = {}
    for path in listing.output.split():
        files[path] = sandbox.read_file(path).decode("utf-8", "replace")
    return files
