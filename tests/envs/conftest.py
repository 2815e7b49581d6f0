"""Fixtures of the sandbox tests: one sandbox of each kind (Docker and local)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.local import LocalSandbox
from envs.sandbox import Sandbox


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker), "local"])
def sandbox(request: pytest.FixtureRequest, small_repo: Path) -> Iterator[Sandbox]:
    """A sandbox on ``small_repo``, once in Docker (the base image) and once on the host."""
    if request.param == "docker":
        image = request.getfixturevalue("base_image")
        box: Sandbox = DockerSandbox(DockerSandboxConfig(image=image), repo=small_repo)
    else:
        box = LocalSandbox(small_repo)
    with box:
        yield box
