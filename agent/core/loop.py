"""The Generator: a ReAct loop over an OpenAI-compatible model and a sandbox.

    run → step → query → parse → execute → observe

Control flow goes through a few exceptions that carry what the run ends with:
:class:`Submitted` (the model submitted a patch), :class:`LimitReached` (steps, time or cost;
the current diff is kept as the submission), :class:`Forfeited`, and
:class:`~agent.errors.FormatError` (asked again, at most ``max_format_errors`` times in a
row). What it says and how long it may go on (prompts, limits, history) is its config,
:class:`~agent.core.loop_config.AgentConfig`.
With ``shell: persistent`` the agent's own commands (and its tools' state commands) share one
shell session (:meth:`~envs.sandbox.Sandbox.run`'s ``session``), so ``cd`` and ``export`` carry
over; every other command the run makes stays in a fresh shell.
The trajectory is written after every step and in a ``finally``, so Ctrl-C or a crash leaves a
valid ``.traj`` with its exit status.

A run is submitted only by a submit tool (:meth:`~agent.core.tools.Toolset.role`): the marker in
any other command's output is text. The submitted patch is the sandbox's diff once the submit
tool has run, never text a command printed. Every message passes through the trajectory's
redactor (:mod:`agent.core.secrets`) before the model sees it; a submission that holds a secret
value is kept with the value redacted, and its variables' names are listed in the ``.traj``
under ``info.patch_redacted``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import jinja2
from pydantic import BaseModel, ConfigDict

from agent.core.loop_config import AgentConfig
from agent.core.parsing import interactive_refusal, parse_text_action
from agent.core.prompts import format_error
from agent.core.tool_output import truncate_observation
from agent.core.tools import OutputKind, Toolset, classify_output
from agent.core.trajectory_file import Trajectory
from agent.errors import (
    ContextWindowExceeded,
    CostLimitExceeded,
    Forfeited,
    FormatError,
    LimitReached,
    Submitted,
)
from agent.models import Model, ModelResponse
from agent.record.steps import Limits, Step, Usage
from envs.sandbox import CommandResult, Sandbox

logger = logging.getLogger(__name__)

#: The name of the Generator's shell session in the sandbox (``agent.shell: persistent``).
SESSION = "generator"


class Reviewer(Protocol):
    """Checks a submitted patch (the PGS Tester): a feedback message sends the Generator back to
    work in the same conversation, with at least ``round_steps`` more steps and ``round_time``
    more seconds; None accepts the patch and ends the run. ``final_check`` checks the diff a
    limit ends the run with (recorded, no feedback)."""

    round_steps: int
    round_time: float

    def review(self, patch: str) -> str | None: ...

    def final_check(self, patch: str, why: str) -> None: ...


@dataclass
class Action:
    thought: str
    command: str
    #: The tool call this command answers (function calling), else None.
    call_id: str | None = None
    tool: str | None = None


class RunResult(BaseModel):
    """How a run ended; the trajectory holds the rest (``trajectory.record.pgs_record``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    exit_status: str
    submission: str
    steps: int
    trajectory: Trajectory


def cut_middle(text: str, limit: int, *, dropped: int = 0) -> str:
    """``text`` cut to its first and last ``limit // 2`` characters; ``dropped``: characters
    already cut out of its middle before it got here (the sandbox caps what it returns)."""
    return truncate_observation(text, limit, "pgs", dropped=dropped)


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        model: Model,
        sandbox: Sandbox,
        toolset: Toolset,
        trajectory: Trajectory,
        *,
        function_calling: bool = True,
        on_step: Callable[[Agent, Step], None] | None = None,
        reviewer: Reviewer | None = None,
        base: str | None = None,
    ) -> None:
        self.config = config
        #: The commit the patch is a diff against (pinned when the sandbox was ready). When
        #: given, a submission is the sandbox's whole diff against it, so work the model
        #: committed (or a moved HEAD) is still in the patch; None: the submit tool's patch.
        self.base = base
        self.model = model
        self.sandbox = sandbox
        self.toolset = toolset
        self.traj = trajectory
        self.function_calling = function_calling
        self.on_step = on_step
        self.reviewer = reviewer
        self.messages: list[dict[str, Any]] = []
        #: The environment of every tool call: the toolset's variables, set up by :meth:`setup`.
        self.tool_env: dict[str, str] = {}
        self.state: dict[str, Any] = {}
        self.steps = 0
        self.format_errors_in_a_row = 0
        self.started = 0.0
        #: The limits in force: the config's, raised after each feedback round (0: none).
        self.step_limit = config.step_limit
        self.time_limit = config.time_limit
        self._jinja = jinja2.Environment(
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True
        )
        #: The shell session of this agent's own commands (and its tools' state commands, which
        #: report its working directory), when persistent; everything else (tool setup, the
        #: diff, a Tester, the PGS checks) runs in fresh shells.
        self.session = SESSION if config.shell == "persistent" else None
        # Compiling a template costs about 0.7 ms; prompt() renders one per old observation.
        self._templates: dict[str, jinja2.Template] = {}

    # -- run ----------------------------------------------------------------------------------

    def run(self, problem_statement: str) -> RunResult:
        self.started = time.monotonic()
        status, submission = "exit_error", ""
        try:
            self.setup(problem_statement)
            while True:
                self.step()
        except Submitted as e:
            status, submission = "submitted", e.patch
        except LimitReached as e:
            status, submission = f"submitted ({e.status})", self._current_diff()
            self.traj.info.limit_message = str(e)
            if self.reviewer is not None:  # never submitted unchecked
                self.reviewer.final_check(submission, e.status)
        except Forfeited:
            status = "exit_forfeit"
        except FormatError as e:
            status, submission = "exit_format", self._current_diff()
            self.traj.info.error = str(e)
        except KeyboardInterrupt:
            status, submission = "interrupted", self._current_diff()
            raise
        except Exception as e:
            status, submission = "exit_error", self._current_diff()
            self.traj.info.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            submission = self._without_secrets(submission)
            info = self.traj.info
            info.exit_status, info.submission = status, submission
            info.model_stats = self.model.stats.model_copy()
            info.steps = self.steps
            info.duration = round(time.monotonic() - self.started, 3)
            self.traj.history = self.messages
            self.traj.save()
        return RunResult(
            exit_status=status, submission=submission, steps=self.steps, trajectory=self.traj
        )

    def setup(self, problem_statement: str) -> None:
        # PROBLEM_STATEMENT: read by SWE-agent's review-on-submit tools.
        self.tool_env = self.toolset.install(
            self.sandbox, env={"PROBLEM_STATEMENT": problem_statement}
        )
        values = {
            "repo_path": self.sandbox.repo_path,
            "problem_statement": problem_statement,
            "function_calling": self.function_calling,
            "tool_docs": self.toolset.text_docs(),
            "shell": self.config.shell,
        }
        self.add("system", self.render(self.config.system_template, values), "system")
        self.add("user", self.render(self.config.instance_template, values), "user")
        self.traj.save()

    def step(self) -> None:
        self.check_limits()
        response = self.query()
        try:
            actions = self.parse(response)
        except FormatError as e:
            self.format_errors_in_a_row += 1
            self.add_reply(response, tool_calls=False)
            if self.format_errors_in_a_row >= self.config.max_format_errors:
                raise
            self.add(
                "user",
                self.render(
                    self.config.format_error_template,
                    {
                        "error": e.render(self.config.format_errors),
                        "function_calling": self.function_calling,
                    },
                ),
                "format_error",
            )
            return
        self.format_errors_in_a_row = 0
        self.add_reply(response, tool_calls=True, action="\n".join(a.command for a in actions))
        for i, action in enumerate(actions):
            self.execute(action, response, charged=i == 0)

    # -- the parts of a step ------------------------------------------------------------------

    def check_limits(self) -> None:
        if self.step_limit and self.steps >= self.step_limit:
            raise LimitReached("exit_step_limit", f"step limit of {self.step_limit} reached")
        if self.time_limit and time.monotonic() - self.started >= self.time_limit:
            raise LimitReached("exit_time", f"time limit of {self.time_limit:.0f} s reached")

    def extend_limits(self, steps: int, seconds: float) -> None:
        """A feedback round: at least ``steps`` more steps and ``seconds`` more from now."""
        if self.step_limit:
            self.step_limit = max(self.step_limit, self.steps + steps)
        if self.time_limit:
            elapsed = time.monotonic() - self.started
            self.time_limit = max(self.time_limit, elapsed + seconds)
        self.traj.info.limits = Limits(steps=self.step_limit, seconds=round(self.time_limit))

    def query(self) -> ModelResponse:
        tools = self.toolset.openai_tools() if self.function_calling else None
        try:
            response = self.model.query(self.prompt(), tools)
            logger.debug(
                "the model answered: %d tokens sent, %d received, $%.4f, %d tool calls",
                response.tokens_sent,
                response.tokens_received,
                response.cost,
                len(response.tool_calls),
            )
            return response
        except CostLimitExceeded as e:
            raise LimitReached("exit_cost", str(e)) from e
        except ContextWindowExceeded as e:
            raise LimitReached("exit_context", str(e)) from e

    def parse(self, response: ModelResponse) -> list[Action]:
        if not self.function_calling:
            thought, command = parse_text_action(response.content, self.config.action_parser)
            return [Action(thought=thought, command=self.toolset.guard_multiline(command))]
        if not response.tool_calls:
            raise format_error(kind="no_tool_call")
        actions = []
        for call in response.tool_calls:
            if call.error:
                values = {"tool": call.name, "error": call.error}
                raise format_error(kind="malformed_arguments", values=values)
            command = self.toolset.to_command(call.name, call.arguments)
            actions.append(
                Action(thought=response.content, command=command, call_id=call.id, tool=call.name)
            )
        return actions

    def execute(self, action: Action, response: ModelResponse, *, charged: bool = True) -> None:
        """Run one action; ``charged``: this step carries the reply's tokens and cost (the
        first action of a reply that made several)."""
        self.steps += 1
        start = time.monotonic()
        refusal = interactive_refusal(action.command, self.config.refusals)
        if refusal is not None:
            observation, kind, patch, exit_code = refusal, OutputKind.NORMAL, None, 1
            timed_out = False
        else:
            result = self._run(action.command)
            logger.debug(
                "ran %s: exit code %s, %d bytes of output, %.2fs",
                action.tool or "a command",
                result.exit_code,
                len(result.output),
                time.monotonic() - start,
            )
            out = classify_output(result.output, self.toolset.role(action.command, action.tool))
            kind, exit_code, timed_out = out.kind, result.exit_code, result.timed_out
            # The repository's real change, not what the tool (or a file it printed) claims.
            patch = (
                self.sandbox.diff(base=self.base or "HEAD")
                if kind is OutputKind.SUBMISSION
                else None
            )
            observation = truncate_observation(
                out.text,
                self.config.max_observation_chars,
                self.config.truncation,
                dropped=_dropped(result),
                templates=self.config.truncation_templates,
            )
        self.state = self.toolset.state(self.sandbox, self.tool_env, session=self.session)
        rendered = self.render(
            self.config.observation_template,
            {
                # SWE-agent's names too: observation, and the state of its bundles
                "output": observation,
                "observation": observation,
                "exit_code": exit_code,
                "timed_out": timed_out,
                "timeout": self.config.command_timeout,
                "open_file": "n/a",
                "working_dir": self.sandbox.repo_path,
                "diff": "",
                **self.state,
            },
        )
        self.add_observation(rendered, action)
        step = Step(
            action=action.command,
            observation=observation,
            response=response.content,
            thought=action.thought,
            execution_time=round(time.monotonic() - start, 4),
            state=self.state,
            query=self.traj_query(),
            tool=action.tool,
            exit_code=exit_code,
            usage=Usage(
                tokens_sent=response.tokens_sent if charged else 0,
                tokens_received=response.tokens_received if charged else 0,
                cost=response.cost if charged else 0.0,
            ),
        )
        self.traj.steps.append(step)
        self.traj.history = self.messages
        self.traj.save()
        if self.on_step is not None:
            self.on_step(self, step)
        if kind is OutputKind.SUBMISSION:
            feedback = self.reviewer.review(patch or "") if self.reviewer else None
            if feedback is None:
                raise Submitted(patch or "")
            self.add("user", feedback, "feedback")
            assert self.reviewer is not None
            self.extend_limits(self.reviewer.round_steps, self.reviewer.round_time)
            self.traj.history = self.messages
            self.traj.save()
        if kind is OutputKind.EXIT_FORFEIT:
            raise Forfeited()

    def _run(self, command: str) -> CommandResult:
        timeout = self.config.command_timeout
        if self.session is None:  # (a sandbox of a user's own may not know sessions)
            return self.sandbox.run(command, timeout=timeout, env=self.tool_env)
        return self.sandbox.run(command, timeout=timeout, env=self.tool_env, session=self.session)

    # -- messages -----------------------------------------------------------------------------

    def render(self, template: str, values: dict[str, Any]) -> str:
        compiled = self._templates.get(template)
        if compiled is None:
            compiled = self._templates[template] = self._jinja.from_string(template)
        return compiled.render(**values).strip()

    def add(self, role: str, content: str, message_type: str, **extra: Any) -> None:
        self.messages.append(
            {
                "role": role,
                "content": self.traj.redactor.redact(content),
                "agent": "main",
                "message_type": message_type,
                **extra,
            }
        )

    def add_reply(self, response: ModelResponse, *, tool_calls: bool, action: str = "") -> None:
        """The model's reply in the history; ``thought`` and ``action`` as SWE-agent writes
        them (its web inspector reads them)."""
        message = response.message()
        extra: dict[str, Any] = {"thought": response.content or "", "action": action}
        if tool_calls and "tool_calls" in message:
            extra["tool_calls"] = message["tool_calls"]
        content = message["content"] or ""
        if not tool_calls and response.tool_calls:  # keep what it asked for, as plain text
            calls = "; ".join(f"{c.name}({c.raw_arguments})" for c in response.tool_calls)
            content = f"{content}\n[tool calls: {calls}]".strip()
        self.add("assistant", content, "action", **extra)

    def add_observation(self, text: str, action: Action) -> None:
        if action.call_id is not None:
            self.add("tool", text, "observation", tool_call_id=action.call_id)
        else:
            self.add("user", text, "observation")

    def prompt(self) -> list[dict[str, Any]]:
        """The messages sent to the model: older observations elided to stay within context."""
        observations = [
            i for i, m in enumerate(self.messages) if m["message_type"] == "observation"
        ]
        old = set(observations[: -self.config.keep_observations])
        out = []
        for i, m in enumerate(self.messages):
            msg = {
                k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")
            }
            if i in old:
                lines = m["content"].count("\n") + 1
                msg["content"] = self.render(self.config.elided_template, {"lines": lines})
            out.append(msg)
        return out

    def traj_query(self) -> list[dict[str, Any]]:
        """The last exchange only: the whole prompt per step would make the .traj quadratic."""
        return self.prompt()[-3:]

    def _without_secrets(self, patch: str) -> str:
        """``patch`` with the host's secret values redacted; the run is marked when it held any
        (such a patch no longer applies as it was made: ``pgs run --apply`` refuses it)."""
        found = self.traj.redactor.found(patch)
        if not found:
            return patch
        self.traj.info.patch_redacted = found
        return self.traj.redactor.redact(patch)

    def _current_diff(self) -> str:
        try:
            return self.sandbox.diff(base=self.base or "HEAD")
        except Exception:  # the sandbox may be the thing that failed
            return ""


def _dropped(result: CommandResult) -> int:
    """Characters the sandbox cut from the middle of a long output (estimated from bytes)."""
    if not result.truncated or result.output_bytes <= 0:
        return 0
    kept = len(result.output.encode("utf-8", "replace"))
    return max(0, result.output_bytes - kept)
