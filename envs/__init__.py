"""Sandboxes and images: where the agent's commands run."""

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
