"""The seam between the agent and wherever its commands run.

A :class:`Sandbox` runs one command at a time (each in a fresh process group, with its own
working directory, environment and timeout; optionally in a persistent shell session whose
directory, variables and functions carry over), moves files in and out, and reports the
repository's diff. :class:`~envs.docker_sandbox.DockerSandbox` isolates;
:class:`~envs.local.LocalSandbox` runs on the host in a copy of the repository and offers no
isolation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Self, runtime_checkable

#: Default cap on what one command may return (head and tail are kept, the middle dropped).
DEFAULT_MAX_OUTPUT = 1_000_000
#: Default time limit for one command, in seconds.
DEFAULT_TIMEOUT = 120.0
#: Folders of the repository that are never part of a patch (the Tester's properties live here).
SCRATCH_DIRS: tuple[str, ...] = (".pgs",)


@dataclass(frozen=True)
class CommandResult:
    """What one command did; ``output`` is stdout and stderr interleaved, as a terminal shows."""

    output: str
    exit_code: int
    timed_out: bool = False
    #: True when the output was longer than the cap; ``output`` then holds its head and tail.
    truncated: bool = False
    #: Bytes the command printed in all, before any cap.
    output_bytes: int = 0
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Sandbox(Protocol):
    """Where the agent's commands run. Use as a context manager; ``close`` is idempotent."""

    #: Absolute path of the repository inside the sandbox.
    repo_path: str
    #: The home folder in the sandbox: tool bundles, state.json and helper files go there.
    home: str

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
        session: str | None = None,
    ) -> CommandResult:
        """Run ``command`` with ``bash -c`` in its own process group; kill the group on timeout.

        ``cwd`` defaults to the repository; ``env`` is added to the sandbox's base environment.
        ``session``: the name of a persistent shell session (None: a fresh shell). The
        directory, variables, functions, aliases and shell options a session's command leaves
        are those its next command starts with (``cwd`` and ``env`` then apply only to the
        session's first command); every process a command started still ends with it, and a
        command that timed out or was stopped leaves the session as it was before it, which its
        output then says. Only the Generator's own commands use one (``agent.shell``); every
        other command (the tools' setup, the Tester, the PGS checks, the diff) runs fresh.
        """
        ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None: ...

    def upload(self, local: Path, remote: str) -> None:
        """Copy a host file or folder to ``remote`` (created, parents included)."""
        ...

    def diff(self, *, base: str = "HEAD", exclude: Sequence[str] = SCRATCH_DIRS) -> str:
        """The repository's changes against ``base`` as a git patch, new files included."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


def diff_command(base: str, exclude: Sequence[str]) -> str:
    """Shell command printing the repo's diff against ``base`` without touching the real index.

    A throwaway index (GIT_INDEX_FILE) sees untracked files too, so new files are in the patch,
    and the user's staging area is left as it was.
    """
    pathspec = " ".join(f"':(exclude){d}'" for d in exclude)
    return (
        'idx=$(mktemp) && rm -f "$idx" && export GIT_INDEX_FILE="$idx" && '
        f"git read-tree {base} && git add -A -- . {pathspec} >/dev/null && "
        f"git -c core.quotepath=off diff --cached --binary {base} -- . {pathspec}; "
        'rc=$?; rm -f "$idx"; exit $rc'
    )
