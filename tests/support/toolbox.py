"""A sandbox with tool bundles installed, for tests: LocalSandbox or DockerSandbox alike."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.core.tools import Toolset
from envs.sandbox import CommandResult, Sandbox

#: Fixture params: the Docker one carries the ``docker`` mark, so ``-m "not docker"`` skips it.
SANDBOX_KINDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@contextmanager
def open_sandbox(kind: str, repo: Path, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """``docker`` uses the suite's ``base_image`` fixture (skips without Docker, fails in CI)."""
    box: Sandbox
    if kind == "docker":
        from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig

        image = request.getfixturevalue("base_image")
        box = DockerSandbox(DockerSandboxConfig(image=image), repo=repo)
    else:
        from envs.local import LocalSandbox

        box = LocalSandbox(repo)
    with box:
        yield box


class ToolBox:
    """Calls tools the way the agent loop does: ``to_command`` then ``sandbox.run``."""

    def __init__(self, sandbox: Sandbox, toolset: Toolset) -> None:
        self.sandbox = sandbox
        self.toolset = toolset
        self.env = toolset.install(sandbox)

    @property
    def home(self) -> str:
        return str(getattr(self.sandbox, "home"))  # noqa: B009  (not in the Sandbox protocol)

    @property
    def repo(self) -> str:
        return self.sandbox.repo_path

    def path(self, relative: str) -> str:
        return f"{self.repo}/{relative}"

    def call(self, name: str, **arguments: Any) -> CommandResult:
        return self.sandbox.run(self.toolset.to_command(name, arguments), env=self.env)

    def sh(self, command: str) -> CommandResult:
        return self.sandbox.run(command, env=self.env)

    def read(self, relative: str) -> str:
        return self.sandbox.read_file(self.path(relative)).decode()


@contextmanager
def toolbox(
    kind: str,
    repo: Path,
    request: pytest.FixtureRequest,
    bundles: Sequence[Path | str] | None = None,
) -> Iterator[ToolBox]:
    with open_sandbox(kind, repo, request) as box:
        yield ToolBox(box, Toolset.from_paths(bundles))
