"""Sandboxes and images: where the agent's commands run.

Below :mod:`agent`, beside it: imports nothing of ``agent`` (a contract). Entry points: the
:class:`~envs.sandbox.Sandbox` protocol, :func:`envs.registry.make_sandbox` (a config's
``type`` to a sandbox), the images' API :mod:`envs.images` (which ``pgs env``,
:mod:`agent.cli.env`, drives) and the errors :mod:`envs.errors`. ``envs/helper/`` runs inside
the sandbox.
"""

from envs.errors import (
    DiskFull,
    DockerUnavailable,
    EnvError,
    ImageBuildError,
    ImageNotFound,
    NotAGitRepository,
    SandboxClosed,
    SandboxError,
)
from envs.sandbox import CommandResult, Sandbox

__all__ = [
    "CommandResult",
    "DiskFull",
    "DockerUnavailable",
    "EnvError",
    "ImageBuildError",
    "ImageNotFound",
    "NotAGitRepository",
    "Sandbox",
    "SandboxClosed",
    "SandboxError",
]
