"""The errors a user can fix, and the exit codes the command line gives them.

Each error below carries one sentence naming the problem and what to do; ``pgs`` prints it as
one ``pgs: error:`` line and exits with 2 (:data:`envs.cli.USER_ERROR`)::

    ConfigError          a config file or flag            agent.core.config
    InputError           a repository, issue or option    agent.core.run (GitHubError below it)
    EnvError             Docker, images, sandboxes        envs.errors
    ModelError           the model's API                  agent.models
    ToolConfigError      a tool bundle's config           agent.core.tools
    ToolInstallError     a tool bundle's install.sh       agent.core.tools
    ScriptError          a scripted model's script        agent.models.script
"""

from __future__ import annotations

from agent.core.config import ConfigError
from agent.core.run import InputError
from agent.core.tools import ToolConfigError, ToolInstallError
from agent.models import ModelError
from agent.models.script import ScriptError
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
#: Exit code of a command ended by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, whatever the signal).
INTERRUPTED = 130
