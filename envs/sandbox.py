"""The seam between the agent and wherever its commands run.

A :class:`Sandbox` runs one command at a time (each in a fresh process group, with its own
working directory, environment and timeout; optionally in a persistent shell session whose
directory, variables and functions carry over), moves files in and out, and reports the
repository's diff. :class:`~envs.docker_sandbox.DockerSandbox` isolates;
:class:`~envs.local.LocalSandbox` runs on the host in a copy of the repository and offers no
isolation.
"""

from __future__ import annotations

import shlex
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
#: What running Python, pytest, Hypothesis and setuptools leave in a repository (gitignore
#: patterns): an untracked match is never part of a patch, whether or not the repository
#: ignores it, since the agent did not write it; a file the repository tracks is unaffected.
BYPRODUCTS: tuple[str, ...] = (
    "__pycache__/",
    "*.py[cod]",
    ".pytest_cache/",
    ".hypothesis/",
    "*.egg-info/",
)
#: The ``.gitignore`` pgs writes into a folder it makes for its results (``trajectories/``):
#: git ignores the folder, and :class:`~envs.local.LocalSandbox` never copies it in.
RESULTS_GITIGNORE = (
    "# pgs's results: git ignores this folder (delete this file to commit them)\n*\n"
)


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


#: Run before the diff: a throwaway git folder that borrows the repository's objects
#: (alternates) and nothing else of it: not its config (filters, textconv, fsmonitor,
#: ``core.worktree``), its replace refs, its attributes file or its index. Only excludes are
#: read (``.git/info/exclude`` and ``core.excludesFile``), and :data:`BYPRODUCTS` added to them:
#: leaving a file out of the patch never makes a check pass, since a sealed check sees only the
#: patch (:mod:`envs.seal`).
_SAFE_DIFF = (
    'top=$(pwd -P) && objs=$(cd "$(git rev-parse --git-common-dir)" && pwd -P)/objects && '
    "base=$(git --no-replace-objects rev-parse --verify {base}^{{commit}}) && "
    'g=$(mktemp -d) && mkdir -p "$g/objects/info" "$g/refs" "$g/info" && '
    'echo "$objs" > "$g/objects/info/alternates" && echo "$base" > "$g/HEAD" && '
    "x=$(git config --path core.excludesFile 2>/dev/null || "
    'echo "${{XDG_CONFIG_HOME:-$HOME/.config}}/git/ignore") && '
    'cat "$x" "$objs/../info/exclude" > "$g/info/exclude" 2>/dev/null; '
    "printf '\\n%s' " + " ".join(shlex.quote(p) for p in BYPRODUCTS) + ' >> "$g/info/exclude"; '
    'cp "$objs/../shallow" "$g/" 2>/dev/null; '
    'export GIT_DIR="$g" GIT_WORK_TREE="$top" GIT_INDEX_FILE="$g/index" GIT_CONFIG_NOSYSTEM=1 '
    "GIT_CONFIG_GLOBAL=/dev/null GIT_NO_REPLACE_OBJECTS=1 GIT_ATTR_NOSYSTEM=1 "
    "GIT_EXTERNAL_DIFF= GIT_DIFF_OPTS= && unset GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT; "
)


def diff_command(base: str, exclude: Sequence[str]) -> str:
    """Shell command printing the repo's diff against ``base`` without touching the real index.

    A throwaway index sees untracked files too, so new files are in the patch, and the user's
    staging area is left as it was. The git that computes it ignores the repository's config,
    replace refs and attributes file, and git's global and system config (:data:`_SAFE_DIFF`):
    what the Generator set up there cannot change the patch, which is exactly what is checked,
    submitted, applied and pushed.
    """
    pathspec = " ".join(f"':(exclude){d}'" for d in exclude)
    return (
        _SAFE_DIFF.format(base=shlex.quote(base))
        + f'git read-tree "$base" && git add -A -- . {pathspec} >/dev/null && '
        "git -c core.quotepath=off diff --cached --binary --no-ext-diff --no-textconv "
        f'"$base" -- . {pathspec}; '
        'rc=$?; rm -rf "$g"; exit $rc'
    )
