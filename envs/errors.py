"""Errors raised by the sandbox and image layer.

Every error a user can cause or fix carries one sentence that names the problem and what to do;
the CLI prints ``str(error)`` and exits non-zero, never a traceback.

    EnvError (RuntimeError)
    ├── DockerUnavailable       the daemon is not running, not reachable, or no permission
    ├── ImageBuildError         one step of an image build failed (carries that step's last lines)
    ├── ImageNotFound           an image tag that was never built here
    ├── NotAGitRepository       a path that is not a git repository (or a bad commit)
    ├── DiskFull                no space left on the device
    └── SandboxError            the sandbox itself failed (helper died, container gone)
        └── SandboxClosed       used after close()

:data:`INFRASTRUCTURE_ERRORS` are the machine's failures, not the command's (exit code 3,
:data:`INFRASTRUCTURE`; a mistake in the command: 2, :data:`USER_ERROR`); :func:`print_error`
shows one as a ``pgs: error:`` line.
"""

from __future__ import annotations

import sys

#: Exit code of a user error (bad input, a bad option or config).
USER_ERROR = 2
#: Exit code of an infrastructure failure (Docker unreachable, a failed image build, disk full).
INFRASTRUCTURE = 3


def print_error(message: str) -> None:
    """``pgs: error: <message>`` on stderr (the message may continue on further lines): how
    every command shows an error (`pgs env` directly, the others through :mod:`agent.errors`)."""
    print(f"pgs: error: {message}", file=sys.stderr)


class EnvError(RuntimeError):
    """Base of every error in :mod:`envs`."""


class DockerUnavailable(EnvError):
    pass


class ImageBuildError(EnvError):
    def __init__(self, step: str, output: str, *, lines: int = 20) -> None:
        tail = "\n".join(output.rstrip().splitlines()[-lines:])
        self.step = step
        self.output = output
        super().__init__(f"image step failed: {step}\n--- last lines of its output ---\n{tail}")


class ImageNotFound(EnvError):
    pass


class NotAGitRepository(EnvError):
    pass


class DiskFull(EnvError):
    pass


class SandboxError(EnvError):
    pass


class SandboxClosed(SandboxError):
    pass


def looks_like_disk_full(text: str) -> bool:
    """True when an error message from Docker, pip or the OS means the disk is full."""
    lowered = text.lower()
    return "no space left on device" in lowered or "disk quota exceeded" in lowered


DISK_FULL_HINT = (
    "no space left on the device: free some disk (`pgs env prune` removes every pgs container "
    "and image; `docker system prune` removes other unused Docker data), then retry"
)


#: The machine failed, not the command: the CLI exits with 3 (:data:`INFRASTRUCTURE`).
INFRASTRUCTURE_ERRORS: tuple[type[EnvError], ...] = (
    DockerUnavailable,
    ImageBuildError,
    DiskFull,
    SandboxError,
)
