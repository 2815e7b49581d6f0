"""What a batch's output folder says of an instance, for resuming: its ``.traj``'s exit
status (:func:`finished_status`; ``interrupted`` and a failure of the infrastructure or of the
command do not count as finished), the failures that are not the instance's result
(:data:`RETRIED`, :data:`MISTAKES`, :func:`infrastructure_failure`), and the setting a finished
run was made with (:func:`result_setting`, :func:`recorded_setting`), which a batch resuming
into the folder must share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.errors import (
    INFRASTRUCTURE_ERRORS,
    AuthenticationFailed,
    ConfigError,
    ModelNotFound,
    RateLimited,
    RunFailed,
    ServerError,
    SetupFailed,
    ToolConfigError,
    ToolInstallError,
    Unreachable,
)
from agent.pgs.compare import ablation_of
from agent.pgs.config import ablation
from agent.record.trajectory import Info, RunRecord
from agent.run.config import RunConfig

#: Exit statuses that do not count as finished: the instance runs again on resume.
UNFINISHED = {"interrupted"}


#: Errors of the machine or of the model endpoint, not of the agent: an instance they ended
#: has no result (it is not finished, a resume runs it again), and several in a row of the same
#: one stop the batch (``--stop-after``). The model's are raised after its retries; a
#: repository that could not be prepared (:class:`SetupFailed`) is the data's or the machine's.
RETRIED: tuple[type[Exception], ...] = (
    *INFRASTRUCTURE_ERRORS,
    SetupFailed,
    Unreachable,
    ServerError,
    RateLimited,
    AuthenticationFailed,
    ModelNotFound,
)


#: Mistakes in the command that show only once an instance runs (a tool bundle whose
#: install.sh fails in the sandbox, a config the run rejects): the same for every instance, so,
#: as :data:`RETRIED`, not the instance's result, run again on resume, and counted towards
#: ``--stop-after``.
MISTAKES: tuple[type[Exception], ...] = (ConfigError, ToolConfigError, ToolInstallError)


#: What an instance that failed for infrastructure shows as in the exit statuses.
INFRASTRUCTURE = "exit_error (infrastructure)"


#: What an instance that failed on a mistake in the command (:data:`MISTAKES`) shows as.
MISTAKE = "exit_error (mistake in the command)"


def infrastructure_failure(error: BaseException) -> str | None:
    """``"<Error>: <first line>"`` when ``error`` (or the cause of a :class:`RunFailed`) is one
    of :data:`RETRIED` or :data:`MISTAKES`; None for any other error (the instance's own
    result)."""
    if isinstance(error, RunFailed) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    if not isinstance(error, (*RETRIED, *MISTAKES)):
        return None
    first = (str(error).splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:300]


def failed_for_infrastructure(info: Info) -> bool:
    """A ``.traj``'s ``info`` of a run an infrastructure error ended: marked by the batch, or
    (a ``pgs run``, a batch before the mark) its recorded error names one of :data:`RETRIED`."""
    if info.exit_status != "exit_error":
        return False
    if info.infrastructure or info.mistake:
        return True
    name = (info.error or "").split(":", 1)[0]
    return name in {cls.__name__ for cls in with_subclasses((*RETRIED, *MISTAKES))}


def with_subclasses(roots: tuple[type[Exception], ...]) -> list[type[Exception]]:
    """``roots`` and their subclasses (SandboxClosed is a SandboxError)."""
    classes, found = list(roots), []
    while classes:
        cls = classes.pop()
        found.append(cls)
        classes.extend(cls.__subclasses__())
    return found


def is_mistake(error: BaseException) -> bool:
    """``error`` (or the cause of a :class:`RunFailed`) is one of :data:`MISTAKES`."""
    if isinstance(error, RunFailed) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    return isinstance(error, MISTAKES)


def read_traj(traj_path: Path) -> RunRecord | None:
    """The run record of a ``.traj``, or None when it cannot be read."""
    try:
        return RunRecord.read(traj_path)
    except (OSError, ValueError):  # not JSON, or not a trajectory (ValidationError)
        return None


def finished_status(traj_path: Path) -> str | None:
    """The exit status recorded in a ``.traj``, or None if it has none (or cannot be read), or
    the run was interrupted or failed for infrastructure (:data:`RETRIED`)."""
    data = read_traj(traj_path)
    return status_of(data.info) if data is not None else None


def status_of(info: Info) -> str | None:
    """:func:`finished_status` of a read ``.traj``'s ``info``."""
    status = info.exit_status
    if not status or status in UNFINISHED or failed_for_infrastructure(info):
        return None
    return status


def result_setting(config: RunConfig) -> dict[str, Any]:
    """What changes an instance's result, by name: the model, and the feedback mode with the
    rest of the ablation setting (:func:`agent.pgs.config.ablation`)."""
    return {"model": config.model.name, **ablation(config.pgs).model_dump()}


def recorded_setting(data: RunRecord) -> dict[str, Any] | None:
    """:func:`result_setting` of the run a ``.traj`` holds; None when it does not say (a run
    that crashed before the agent started)."""
    model = (data.replay_config.get("model") or {}).get("name")
    setting = ablation_of(data)
    if not model or setting is None:
        return None
    return {"model": model, **setting.model_dump()}
