"""A run told in words as it goes: the lines of each step and PGS round, the run's log file,
and the logging of the command line.

:func:`step_lines` and :func:`round_lines` say what a step did (its thought, its action, the
head of its observation: :data:`FOLD_LINES` lines, then ``… N more lines``) and what a PGS
round found (the verdict, the property and the input fed back); the live view of ``pgs run``
(:mod:`agent.cli.view`) shows them, :class:`RunLog` writes them.

Logs:

- :class:`RunLog`: ``DIR/<id>/<id>.log`` beside the ``.traj``: pgs's own records (INFO and
  up, DEBUG with ``-v``) and the libraries' warnings, with timestamps, and every step and round
  as the live view shows them (the :data:`TRACE` logger, which reaches log files only, never
  the console). A run hook and a context manager: it opens with the run and closes whatever
  ends it, the error that did included.
- :class:`BatchLog`: ``DIR/batch.log``, what every instance of a batch logs, without the steps.
- :func:`configure`: the console. pgs's loggers (``agent``, ``envs``) at INFO, ``-v`` DEBUG;
  the console shows WARNING and up, ``-v`` pgs's DEBUG too; the libraries (docker, urllib3,
  httpcore, openai) stay at WARNING unless ``-vv``.

Every line goes through a :class:`~agent.core.secrets.Redactor` (the host's secrets, and the
run's once it starts).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agent.core.secrets import RedactingFilter, Redactor
from agent.run.hooks import RunHook

if TYPE_CHECKING:
    from agent.core.loop import Agent, RunResult
    from agent.record.pgs import RoundRecord
    from agent.record.trajectory import Step
    from agent.run.config import RunConfig
    from agent.run.outputs import RunPaths
    from agent.run.task import Task

#: Observation lines shown before ``… N more lines``.
FOLD_LINES = 5
#: A thought or an action is cut after this many lines.
LONG_LINES = 12
#: A line longer than this is cut (``…``).
WIDTH = 200
#: pgs's own loggers: INFO and up in the run's log, DEBUG with ``-v``.
PGS_LOGGERS = ("agent", "envs")
#: Steps and rounds as the live view shows them: for log files, never the console.
TRACE = "agent.trace"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

trace = logging.getLogger(TRACE)
trace.propagate = False  # only the log files' handlers take it (RunLog adds them here)
trace.setLevel(logging.INFO)


def fold(text: str, lines: int = FOLD_LINES, *, unit: str = "line") -> list[str]:
    """The first ``lines`` lines of ``text`` (each cut at :data:`WIDTH`), then ``… N more
    lines`` when there are more."""
    all_lines = text.rstrip().splitlines()
    head = [line if len(line) <= WIDTH else line[: WIDTH - 1] + "…" for line in all_lines[:lines]]
    more = len(all_lines) - lines
    if more > 0:
        head.append(f"… {more} more {unit}{'' if more == 1 else 's'}")
    return head


def step_lines(agent: Agent, step: Step) -> list[tuple[str, list[str]]]:
    """(what, lines) of a step: the heading, the thought, the action, the observation's head."""
    stats = agent.model.stats
    usage = (
        f"{stats.tokens_sent + stats.tokens_received} tokens, ${stats.instance_cost:.4f}, "
        f"{step.execution_time or 0:.1f}s"
    )
    code = step.exit_code
    parts: list[tuple[str, list[str]]] = [("step", [f"step {agent.steps} ({usage})"])]
    thought = step.thought.strip()
    if thought:
        parts.append(("thought", fold(thought, LONG_LINES)))
    parts.append(("action", fold(step.action, LONG_LINES)))
    observation = step.observation
    head = fold(observation) if observation.strip() else ["(no output)"]
    if code not in (None, 0):
        head.append(f"(exit code {code})")
    parts.append(("observation", head))
    return parts


def round_lines(record: RoundRecord, reason: str | None = None) -> list[tuple[str, str]]:
    """(what, text) of a checked candidate: its verdict, the failure fed back (the property
    and its rule, the input, what the code did), whether feedback went to the Generator."""
    failing = f", {record.failures} failing" if record.failures else ""
    out = [("round", f"PGS round {record.round}: verdict {record.verdict or 'unchecked'}{failing}")]
    selection = record.selection
    result = selection.result if selection else None
    if result is None and record.report is not None:  # no feedback chosen: the first failure
        result = next(iter(record.report.failures()), None)
    if result is not None:
        rule = f" ({result.rule})" if result.rule else ""
        out.append(("property" if result.kind != "repo" else "test", f"{result.nodeid}{rule}"))
        chosen = selection.chosen if selection else None
        example = (selection.input if selection else None) or (chosen.example if chosen else None)
        example = example or result.example
        if example:
            out.append(("input", example))
        did = (
            (chosen.returned or chosen.exception if chosen else None)
            or result.returned
            or result.exception
        )
        if did:
            out.append(("got", did.strip().splitlines()[0][:WIDTH]))
    if reason:
        out.append(("why", reason))
    if record.feedback:
        out.append(("next", "feedback sent to the Generator"))
    elif record.note:
        out.append(("next", record.note))
    return out


def _lines_text(parts: list[tuple[str, list[str]]]) -> str:
    out = []
    for what, lines in parts:
        if what == "step":
            out.extend(lines)
            continue
        out.append(f"{what.upper()}:")
        out.extend(f"  {line}" for line in lines)
    return "\n".join(out)


class _ThreadFilter(logging.Filter):
    """Only the records of the thread that made it (one instance of a batch among several)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread == self.thread


class _FileLog:
    """A log file on the root logger (and on :data:`TRACE` when ``steps``), redacted."""

    def __init__(self, path: Path, *, steps: bool, this_thread: bool, append: bool = False) -> None:
        self.path = path
        self.append = append
        self.steps = steps
        self.this_thread = this_thread
        self.redacting = RedactingFilter()
        self.handler: logging.Handler | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Private, as the run's other files are; a run's emptied (each run writes its own).
        flags = os.O_CREAT | os.O_WRONLY | (os.O_APPEND if self.append else os.O_TRUNC)
        os.close(os.open(self.path, flags, 0o600))
        handler = logging.FileHandler(self.path, mode="a", encoding="utf-8")
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(self.redacting)
        if self.this_thread:
            handler.addFilter(_ThreadFilter())
        logging.getLogger().addHandler(handler)
        if self.steps:
            trace.addHandler(handler)
        self.handler = handler

    def close(self) -> None:
        if self.handler is None:
            return
        logging.getLogger().removeHandler(self.handler)
        trace.removeHandler(self.handler)
        self.handler.close()
        self.handler = None


class RunLog(RunHook):
    """``<id>.log`` of one run (see the module's docstring); ``this_thread``: only what the
    thread that opens it logs (a batch runs several instances at once)."""

    def __init__(self, path: Path, *, this_thread: bool = False) -> None:
        self.log = _FileLog(path, steps=True, this_thread=this_thread)
        self.agent: Agent | None = None

    def __enter__(self) -> RunLog:
        self.log.open()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(error, KeyboardInterrupt):
            trace.warning("interrupted")
        elif error is not None:
            trace.error("the run ended with an error: %s: %s", type(error).__name__, error)
        self.log.close()

    def on_start(self, task: Task, config: RunConfig) -> None:
        self.log.redacting.redactor = Redactor.for_config(config)
        sandbox = getattr(config.sandbox, "type", "?")
        trace.info(
            "run of %s: model %s, sandbox %s, feedback %s, repository %s",
            task.instance_id,
            config.model.name,
            sandbox,
            config.pgs.feedback,
            task.repo,
        )

    def on_status(self, text: str) -> None:
        trace.info("%s", text)

    def on_step(self, agent: Agent, step: Step) -> None:
        self.agent = agent
        trace.info("%s", _lines_text(step_lines(agent, step)))

    def on_round(self, record: RoundRecord) -> None:
        (_, head), *rest = round_lines(record, verdict_reason(self.agent))
        trace.info("%s", "\n".join([head, *(f"  {what}: {text}" for what, text in rest)]))

    def on_done(self, result: RunResult, paths: RunPaths) -> None:
        trace.info(
            "exit status %s after %d steps; files: %s",
            result.exit_status,
            result.steps,
            ", ".join(p.name for p in paths.files().values() if p.exists()),
        )


def verdict_reason(agent: Agent | None) -> str | None:
    """Why PGS gave its latest verdict, from the run's trajectory."""
    if agent is None:
        return None
    pgs = agent.traj.record.pgs
    return pgs.verdict_reason if pgs is not None and pgs.verdict_reason else None


class BatchLog:
    """``DIR/batch.log``: what every instance logs, without the steps (see the module);
    appended to by each run of the batch (a resume)."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.log = _FileLog(path, steps=False, this_thread=False, append=True)
        self.log.redacting.redactor = redactor

    def __enter__(self) -> BatchLog:
        self.log.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.close()


class _Stderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is at each record: under the live view's spinner that is
    rich's proxy, which prints the line above the spinner instead of through it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _NotTrace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(TRACE)


def configure(verbosity: int = 0) -> None:
    """The console's logging (see the module's docstring): ``verbosity`` 0, 1 (``-v``: pgs's
    debug), 2 (``-vv``: the libraries' too)."""
    root = logging.getLogger()
    if not root.handlers:
        console = _Stderr()
        console.addFilter(_NotTrace())
        root.addHandler(console)
    for handler in root.handlers:  # ours (a second call in one process sets it again)
        if isinstance(handler, _Stderr):
            named = "%(name)s: " if verbosity else ""  # -v: whose line it is
            handler.setFormatter(logging.Formatter(f"pgs: %(levelname)s: {named}%(message)s"))
            handler.setLevel(logging.DEBUG if verbosity else logging.WARNING)
    for handler in root.handlers:  # log lines hold the host's secrets redacted
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    root.setLevel(logging.DEBUG if verbosity >= 2 else logging.WARNING)
    for name in PGS_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity else logging.INFO)
