"""The Tester sub-agent: reads the issue and the ORIGINAL code, writes properties.

It is the Generator's loop (:class:`agent.core.loop.Agent`) with its own prompts, its own model and
its own conversation: it never sees the Generator's reasoning (shared reasoning means shared
blind spots). It may explore freely but writes only inside the properties folder; anything it
changes elsewhere is reverted when it ends.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.core.loop import Agent, AgentConfig
from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory
from agent.models import Model
from envs.sandbox import Sandbox

PROPERTIES_DIR = ".pgs/properties"

TESTER_SYSTEM_TEMPLATE = """\
You are a test engineer. You write property-based tests, with pytest and Hypothesis, that
decide whether an issue in the repository at {{ repo_path }} is fixed. Somebody else fixes
the code; you never edit it. Explore the code (view, search, run it), then write test files
ONLY inside {{ repo_path }}/{{ properties_dir }}/ (files named test_*.py). Anything written
elsewhere is thrown away.

Write about five properties, each a different rule the FIXED code must satisfy for ALL valid
inputs ("decoding an encoding returns the input", "the result is sorted", "no input in this
domain raises"), as pytest functions with @given and Hypothesis strategies over the whole
input domain the issue concerns (any list, any string, any integer the function accepts; do
not keep inputs artificially small: Hypothesis shrinks a failure to a small input by itself).
Add an @example for every concrete case the issue states. Give every assertion a message that
shows the value returned and the value expected, e.g.
`assert out == expected, f"returned {out!r}, expected {expected!r}"`. Mark every test with
exactly one of:

    @pytest.mark.pgs_issue("one sentence: the rule the issue asks for")
        the behaviour the issue asks for: it must FAIL on the current (unfixed) code;
    @pytest.mark.pgs_regression("one sentence: the rule that must not change")
        behaviour that already works and must keep working: it must PASS on the current code.

A regression property must not assert the current behaviour on an input the issue says is
wrong.

Import the code under test the way the repository's own tests do. Run your tests with
`python3 -m pytest -q {{ properties_dir }}`: issue properties should fail now, regression
properties pass. Commands run in a fresh shell in {{ repo_path }}.
{% if not function_calling %}
Reply with your reasoning, then exactly ONE command in a fenced ```bash block.

Tools you can run as commands, besides any shell command:
{{ tool_docs }}
{% endif %}
When your tests are written, run `submit`.
"""

TESTER_INSTANCE_TEMPLATE = """\
<issue>
{{ problem_statement }}
</issue>

Write the properties for this issue in {{ repo_path }}/{{ properties_dir }}/, then submit.
"""


class TesterConfig(BaseModel):
    """The Tester sub-agent: prompts and limits (its model is chosen in the PGS config)."""

    model_config = ConfigDict(extra="forbid")
    system_template: str = TESTER_SYSTEM_TEMPLATE
    instance_template: str = TESTER_INSTANCE_TEMPLATE
    step_limit: int = Field(default=30, ge=1, description="most steps for writing properties")
    time_limit: float = Field(default=900.0, ge=0, description="wall-clock seconds (0: none)")
    properties_dir: str = Field(default=PROPERTIES_DIR, description="scratch folder in the repo")


class SubTrajectory(Trajectory):
    """A conversation stored inside another trajectory, under ``parent.extra[key]``."""

    def __init__(self, parent: Trajectory, *path: str) -> None:
        super().__init__(parent.path, replay_config={}, secrets=parent.secrets)
        self.parent = parent
        self.key_path = path

    def save(self) -> None:
        node: dict[str, Any] = self.parent.extra
        for key in self.key_path[:-1]:
            node = node.setdefault(key, {})
        node[self.key_path[-1]] = {
            "trajectory": self.steps,
            "history": self.history,
            "info": self.info,
        }
        self.parent.save()


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
) -> dict[str, str]:
    """Let the Tester write its properties; returns {path: text} of the property files.

    ``note`` follows the issue in the Tester's first message (a later turn's reason: the
    validation report of its first set, or the rules already written).
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
    )
    tester = Agent(
        agent_config, model, sandbox, toolset, trajectory, function_calling=function_calling
    )
    try:
        tester.run(problem_statement)
    finally:
        restore_original(sandbox, keep=config.properties_dir)
    return read_properties(sandbox, config.properties_dir)


def restore_original(sandbox: Sandbox, *, keep: str) -> None:
    """Back to the original commit; the scratch folder (with the properties) survives."""
    scratch = keep.split("/", 1)[0]
    result = sandbox.run(
        f"git checkout -q -- . && git clean -qfd -e {shlex.quote(scratch)} && "
        f"mkdir -p {shlex.quote(keep)}"
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
