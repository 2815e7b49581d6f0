"""The errors a user can fix, and the exit codes the command line gives them.

Exit codes: 0 the run submitted; 1 it ended with another exit status (:data:`RUN_ENDED`; an
error inside the run is :class:`~agent.core.run.RunFailed`, its files written); 2 a mistake in
the command (:data:`envs.cli.USER_ERROR`); 3 the infrastructure failed
(:data:`envs.cli.INFRASTRUCTURE`: Docker unreachable, an image build failed, the disk full, a
result that cannot be written); 130 interrupted (:data:`INTERRUPTED`).

Each error below carries one sentence naming the problem and what to do; ``pgs`` prints it as
one ``pgs: error:`` line and exits with 2, or 3 for :data:`INFRASTRUCTURE_ERRORS`::

    ConfigError          a config file or flag            agent.core.config
    InputError           a repository, issue or option    agent.core.run (GitHubError below it)
    EnvError             Docker, images, sandboxes        envs.errors
    ModelError           the model's API                  agent.models
    ToolConfigError      a tool bundle's config           agent.core.tools
    ToolInstallError     a tool bundle's install.sh       agent.core.tools
    ScriptError          a scripted model's script        agent.models.script_format
"""

from __future__ import annotations

from agent.core.config import ConfigError
from agent.core.run import InputError, OutputNotWritten
from agent.core.tools import ToolConfigError, ToolInstallError
from agent.models import ModelError
from agent.models.script_format import ScriptError
from envs.errors import INFRASTRUCTURE_ERRORS as ENV_INFRASTRUCTURE_ERRORS
from envs.errors import EnvError

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
#: Errors of the machine, not of the command: exit code 3 (:data:`envs.cli.INFRASTRUCTURE`).
INFRASTRUCTURE_ERRORS: tuple[type[Exception], ...] = (*ENV_INFRASTRUCTURE_ERRORS, OutputNotWritten)
#: Exit code of a run that ended with an exit status other than ``submitted``.
RUN_ENDED = 1
#: Exit code of a command ended by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, whatever the signal).
INTERRUPTED = 130
