"""Every error pgs raises, in one module (as Hypothesis has ``hypothesis.errors``), and the exit
codes the command line gives them. It imports nothing of pgs but the sandboxes' own errors
(:mod:`envs.errors`: ``envs`` never imports ``agent``), so every layer can raise and catch them.

Exit codes: 0 the run submitted; 1 it ended with another exit status (:data:`RUN_ENDED`; an
error inside the run is :class:`RunFailed`, its files written); 2 a mistake in the command
(:data:`USER_ERROR`); 3 the infrastructure failed (:data:`INFRASTRUCTURE`: Docker unreachable,
an image build failed, the disk full, a result that cannot be written, a check that could not
run at all: :class:`CheckNotRun`); 130 interrupted
(:data:`INTERRUPTED`).

Each error a user can fix carries one sentence naming the problem and what to do; ``pgs``
prints it as one ``pgs: error:`` line (:func:`print_error`) and exits with 2, or 3 for
:data:`INFRASTRUCTURE_ERRORS`. The tree, by the layer that raises each::

    envs (envs.errors)       EnvError: DockerUnavailable, ImageBuildError, ImageNotFound,
                               NotAGitRepository, DiskFull, SandboxError > SandboxClosed
    models                   ModelError: AuthenticationFailed, ModelNotFound, Unreachable,
                               RateLimited, ServerError, MalformedResponse,
                               BadRequest > ContextWindowExceeded, CostLimitExceeded,
                               ModelClassError, UnknownPrice
                             ScriptError (a scripted model's script)
    core (the loop, tools)   FormatError > ToolCallError (sent back to the model)
                             ToolConfigError, ToolInstallError (a tool bundle)
                             Submitted, LimitReached, Forfeited (how the loop ends)
                             Claimed (an output folder another writer holds)
    pgs                      CheckError > CheckNotRun, TokenizerUnavailable, ReportError
    run                      ConfigError (a config file or flag)
                             InputError (a repository, issue or option) > GitHubError,
                               InstanceError > MissingData, ExecutorError
                             RunFailed, OutputNotWritten
    github, swebench,        Skipped (an event pgs github does not act on),
      inspect, cli             SetupFailed (an instance's repository), InspectError,
                               InterdiffError, EnvFileError
                             Interrupted (a KeyboardInterrupt: a signal, what was kept)

Not here: ``PgsTimeLimit`` (agent/pgs/pgs_pytest_plugin_results.py runs inside the sandbox,
where pgs is not installed) and ``agent.github.client``'s private retry signal.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from envs.errors import INFRASTRUCTURE, USER_ERROR, EnvError, print_error
from envs.errors import INFRASTRUCTURE_ERRORS as ENV_INFRASTRUCTURE_ERRORS

__all__ = [
    "COMMAND_MISTAKES",
    "INFRASTRUCTURE",
    "INFRASTRUCTURE_ERRORS",
    "INTERRUPTED",
    "RUN_ENDED",
    "STOP_SIGNALS",
    "USER_ERROR",
    "USER_ERRORS",
    "AuthenticationFailed",
    "BadRequest",
    "CheckError",
    "CheckNotRun",
    "Claimed",
    "ConfigError",
    "ContextWindowExceeded",
    "CostLimitExceeded",
    "CostLimitName",
    "EnvFileError",
    "ExecutorError",
    "Forfeited",
    "FormatError",
    "GitHubError",
    "InputError",
    "InspectError",
    "InstanceError",
    "InterdiffError",
    "Interrupted",
    "LimitReached",
    "MalformedResponse",
    "MissingData",
    "ModelClassError",
    "ModelError",
    "ModelNotFound",
    "OutputNotWritten",
    "RateLimited",
    "ReportError",
    "RunFailed",
    "ScriptError",
    "ServerError",
    "SetupFailed",
    "Skipped",
    "Submitted",
    "TokenizerUnavailable",
    "ToolCallError",
    "ToolConfigError",
    "ToolInstallError",
    "UnknownPrice",
    "Unreachable",
    "print_error",
]


# -- models: the model's API and the scripted model's script ---------------------------------


class ModelError(RuntimeError):
    """A model call failed; the message says what to do."""

    exit_status: ClassVar[str] = "exit_api"


class AuthenticationFailed(ModelError):
    """The server refused the API key (HTTP 401 or 403)."""


class ModelNotFound(ModelError):
    """The server does not serve the requested model (HTTP 404)."""


class Unreachable(ModelError):
    """No answer from the server: connection refused, DNS failure or timeout."""


class RateLimited(ModelError):
    """Still rate-limited (HTTP 429) after all retries."""


class ServerError(ModelError):
    """The server kept failing (HTTP 5xx) after all retries."""


class MalformedResponse(ModelError):
    """The server answered, but not with a chat completion (retried like a 5xx)."""


class BadRequest(ModelError):
    """The server rejected the request (HTTP 4xx); retrying would not help."""


class ContextWindowExceeded(BadRequest):
    """The conversation no longer fits the model's context window."""

    exit_status: ClassVar[str] = "exit_context"


CostLimitName = Literal["per_instance_cost_limit", "total_cost_limit", "per_instance_call_limit"]


class CostLimitExceeded(ModelError):
    """A cost or call limit was reached; raised before the call that would pass it."""

    exit_status: ClassVar[str] = "exit_cost"

    def __init__(self, limit: CostLimitName, value: float, spent: float) -> None:
        self.limit = limit
        self.value = value
        self.spent = spent
        what = "calls made" if limit == "per_instance_call_limit" else "spent"
        super().__init__(
            f"{limit} of {value:g} reached ({spent:g} {what}): "
            f"raise {limit} in the model config to continue"
        )


class ModelClassError(ModelError):
    """`model_class` names no class that can be imported; the message says what to fix."""


class UnknownPrice(ModelError):
    """A cost limit is on, but no price is known for the model: the limit could not hold."""


class ScriptError(ValueError):
    """A script cannot be loaded; the message names the file, the step and the field."""


# -- core: the loop, its tools and its output folders -----------------------------------------


class FormatTexts(Protocol):
    """What says a format error: a config's ``agent.format_errors``
    (:class:`agent.core.prompts.FormatErrors`)."""

    def render(self, kind: str, values: Mapping[str, Any]) -> str: ...


class FormatError(ValueError):
    """The model's reply cannot be turned into an action; the loop tells it why. ``kind``: the
    template of ``agent.format_errors`` that says it (``values``: its variables), rendered with
    the run's config (:meth:`render`); ``str(error)`` is the shipped text
    (:func:`agent.core.prompts.format_error` builds one). No kind: the message is the text told."""

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.values = dict(values or {})
        super().__init__(message)

    def render(self, templates: FormatTexts) -> str:
        """The message with ``templates`` (a config's ``agent.format_errors``)."""
        return str(self) if self.kind is None else templates.render(self.kind, self.values)


class ToolCallError(FormatError):
    """The model called an unknown tool or gave bad arguments; the message is for the model."""


class ToolConfigError(ValueError):
    """A bundle's config.yaml or layout is wrong. The message names the bundle and the field."""


class ToolInstallError(RuntimeError):
    """Installing a bundle in the sandbox failed (upload, chmod or install.sh)."""


class Submitted(Exception):
    """The Generator submitted ``patch``: ends the loop (not an error the user sees)."""

    def __init__(self, patch: str) -> None:
        self.patch = patch


class LimitReached(Exception):
    """A step, time or cost limit; ``status`` is the exit status suffix (exit_cost, ...)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class Forfeited(Exception):
    """The Generator gave up (a forfeit tool): ends the loop with ``exit_forfeit``."""


class Claimed(RuntimeError):
    """Another process (or thread) is running this instance into this folder now."""


# -- pgs: the method -------------------------------------------------------------------------


class CheckError(RuntimeError):
    """Checking could not be done (a patch that does not parse or apply back)."""


class CheckNotRun(CheckError):
    """Nothing of the check could run: pytest or Hypothesis missing in the sandbox, pgs's
    plugin that does not load. ``str()`` names what is missing; exit code 3, as the machine's
    failures (:data:`INFRASTRUCTURE_ERRORS`): there is no verdict to give."""


class TokenizerUnavailable(RuntimeError):
    """A tokenizer cannot be loaded or stopped answering; the caller falls back to simple."""


class ReportError(ValueError):
    """A folder ``pgs report`` cannot read as a run; the message says what to do."""


# -- run: one task from start to finish -------------------------------------------------------


class Ended(Protocol):
    """What :class:`RunFailed` keeps of the run's result (an ``agent.core.loop.RunResult``)."""

    @property
    def exit_status(self) -> str: ...


class ConfigError(ValueError):
    """A configuration file or flag that cannot be used; the message names the field."""


class InputError(ValueError):
    """A repository, issue or option the user must fix; the message says how."""


class RunFailed(RuntimeError):
    """An error ended the run once the Generator had started (its exit status: ``exit_error``);
    its ``.traj``, ``.patch`` and ``.pred`` hold the work so far. ``str()`` is the error and
    where the work is; ``.result`` is the run's result."""

    def __init__(self, error: BaseException, result: Ended, folder: Path) -> None:
        known = (InputError, EnvError, ModelError, CheckNotRun)
        what = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
        self.result = result
        super().__init__(
            f"{what} (exit status {result.exit_status}; the work so far is in {folder})"
        )


class OutputNotWritten(RuntimeError):
    """A result file could not be written (disk full, a read-only folder). ``str()`` names the
    file, the reason and what was kept; ``.submission`` is the patch, for the caller to show."""

    def __init__(self, path: Path, error: OSError, kept: list[str], submission: str) -> None:
        self.submission = submission
        saved = ", ".join(kept) or "nothing"
        super().__init__(
            f"cannot write {path} ({error.strerror or error}): kept {saved}; free some space "
            "or choose another --output-dir"
        )


# -- integrations and the command line --------------------------------------------------------


class GitHubError(InputError):
    """GitHub or git refused or could not be reached; the message says what to do."""


class InstanceError(InputError):
    """A record, dataset or selection the user must fix; the message says what."""


class MissingData(InstanceError):
    """The repository copy lacks what the record needs (a commit it names, or files of it): a
    problem of the data here (an incomplete snapshot, an outdated mirror), not of the record or
    of a patch; ``pgs eval`` reports the instance as not checkable here, ``reason`` saying why
    in one phrase."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP ended a command that stopped its work and kept what it had
    finished: ``saved`` says what and where, in one line (``pgs`` prints it before its
    ``interrupted`` line and exits with :data:`INTERRUPTED`)."""

    def __init__(self, saved: str) -> None:
        super().__init__(saved)
        self.saved = saved


class SetupFailed(RuntimeError):
    """An instance's repository could not be prepared here (not in ``--repos-dir``, the clone
    failed, its base commit missing or not checked out): a problem of the data or the machine
    here, not of the agent, so ``pgs batch`` records no result for it and runs it again on
    resume. The message names what failed and how to fix it; ``__cause__`` is the error."""


class ExecutorError(InputError):
    """The executor cannot run: Ray missing, the cluster unreachable or without Docker nodes."""


class Skipped(Exception):
    """An event ``pgs github`` does not act on; ``str()`` says why, in one line."""


class InspectError(ValueError):
    """A PATH that cannot be inspected; the message says what to pass instead."""


class InterdiffError(ValueError):
    """Two patches whose difference cannot be rebuilt from the patches alone."""


class EnvFileError(ValueError):
    """A ``.env`` file that cannot be read; the message names the file and line."""


# -- exit codes ------------------------------------------------------------------------------

USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    InputError,
    EnvError,
    ModelError,
    ToolConfigError,
    ToolInstallError,
    ScriptError,
)
#: Mistakes in the command even when found after the run started (a tool bundle's install.sh
#: fails as the agent sets up): exit code 2, the run's files written all the same.
COMMAND_MISTAKES: tuple[type[Exception], ...] = (
    ConfigError,
    InputError,
    ToolConfigError,
    ToolInstallError,
    ScriptError,
)
#: Errors of the machine, not of the command: exit code 3 (:data:`INFRASTRUCTURE`).
INFRASTRUCTURE_ERRORS: tuple[type[Exception], ...] = (
    *ENV_INFRASTRUCTURE_ERRORS,
    OutputNotWritten,
    CheckNotRun,
)
#: Exit code of a run that ended with an exit status other than ``submitted``.
RUN_ENDED = 1
#: Exit code of a command ended by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, whatever the signal).
INTERRUPTED = 130
#: The signals that end a command the way Ctrl-C does (:mod:`agent.cli.signals`).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
