"""The live view of ``pgs run`` and ``pgs demo`` on stderr: each step as it happens (its
thought, its action, the head of its observation, folded after a few lines), what the run is
doing (the image, the sandbox, the Tester), each PGS round (the verdict, the property and the
input fed back), then the report. ``--quiet`` gives the one-line spinner instead
(:class:`agent.cli.run.TerminalHook`).

On a terminal, with colours and a spinner under the lines while the model thinks; elsewhere (a
pipe, CI) the same lines, plain, without any control code. What it shows comes from
:func:`agent.run.runlog.step_lines` and :func:`~agent.run.runlog.round_lines` (the run's log
file says the same) and goes through the run's :class:`~agent.core.secrets.Redactor`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from agent.core.secrets import Redactor
from agent.run.hooks import RunHook
from agent.run.runlog import round_lines, step_lines, verdict_reason

if TYPE_CHECKING:
    from agent.core.loop import Agent, RunResult
    from agent.record.pgs import RoundRecord
    from agent.record.trajectory import Step
    from agent.run.config import RunConfig
    from agent.run.outputs import RunPaths
    from agent.run.task import Task

#: The style of each part of a step or a round.
STYLES = {
    "step": "bold cyan",
    "thought": "italic",
    "action": "bold green",
    "observation": "dim",
    "status": "dim",
    "round": "bold magenta",
    "property": "magenta",
    "test": "magenta",
    "input": "bold",
    "got": "",
    "why": "dim",
    "next": "dim",
}
#: What each part starts with, so that a plain log (a pipe, CI) still reads well.
LABELS = {
    "thought": "thought: ",
    "action": "action: ",
    "observation": "  | ",
    "status": "- ",
}
VERDICT_STYLES = {"passed": "bold green", "failed": "bold red"}


class LiveView(RunHook):
    """The run as it happens, on ``console`` (stderr); then the report (``report``, a
    callable of :mod:`agent.cli.run`, given so that this module does not import it)."""

    def __init__(self, console: Console, report: Any) -> None:
        self.console = console
        self.report = report
        self.redactor = Redactor.from_env()
        self.agent: Agent | None = None
        self.spinner: Status | None = None
        self.instance_id = ""
        self.started = time.monotonic()

    # -- the hooks ----------------------------------------------------------------------------

    def on_start(self, task: Task, config: RunConfig) -> None:
        self.instance_id = task.instance_id
        self.redactor = Redactor.for_config(config)
        self.started = time.monotonic()
        sandbox = getattr(config.sandbox, "type", "?")
        self.line(
            "step",
            f"pgs: {task.instance_id} | model {config.model.name} | sandbox {sandbox} | "
            f"feedback {config.pgs.feedback}",
        )
        if self.console.is_terminal:
            self.spinner = self.console.status(f"{task.instance_id}: starting")
            self.spinner.start()

    def on_status(self, text: str) -> None:
        if not text.startswith("PGS: warning:"):  # logged as a warning already
            self.line("status", text)
        self.spin(text)

    def on_step(self, agent: Agent, step: Step) -> None:
        self.agent = agent
        self.console.print()
        for what, lines in step_lines(agent, step):
            for i, line in enumerate(lines):
                first = i == 0 or what == "observation"
                label = LABELS.get(what, "") if first else " " * len(LABELS.get(what, ""))
                style = STYLES[what]
                if what == "observation" and line.startswith("… ") and i == len(lines) - 1:
                    style = "italic dim"
                self.line(what, line, label=label, style=style)
        stats = agent.model.stats
        self.spin(
            f"step {agent.steps + 1}: the model is thinking | "
            f"{stats.tokens_sent + stats.tokens_received} tokens | ${stats.instance_cost:.3f} | "
            f"{time.monotonic() - self.started:.0f}s"
        )

    def on_round(self, record: RoundRecord) -> None:
        self.console.print()
        for what, text in round_lines(record, verdict_reason(self.agent)):
            if what == "round":
                style = VERDICT_STYLES.get(record.verdict or "", STYLES["round"])
                self.line(what, text, style=style)
            else:
                self.line(what, f"{what}: {text}", label="  ")

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        self.close()
        self.console.print()
        self.report(result, paths, self.console)

    # -- output -------------------------------------------------------------------------------

    def line(self, what: str, text: str, *, label: str | None = None, style: str = "") -> None:
        """One line, redacted; never read as markup (a model's text may hold ``[red]``)."""
        prefix = LABELS.get(what, "") if label is None else label
        shown = Text(prefix + self.redactor.redact(text), style=style or STYLES.get(what, ""))
        self.console.print(shown, soft_wrap=True, highlight=False, markup=False)

    def spin(self, text: str) -> None:
        if self.spinner is not None:
            self.spinner.update(Text(self.redactor.redact(f"{self.instance_id}: {text}")))

    def close(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None
