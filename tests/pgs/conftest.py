"""Sandboxes of the planted-bug repositories of example_repos (Python 3.9 images: the plugin runs
on an older interpreter, pytest and Hypothesis than the host's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from tests.support.example_repos import DEDUPE, RLE, ExampleRepo


def _image(repo: ExampleRepo, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from envs.images import build_repo_image

    path = repo.make(tmp_path_factory.mktemp(repo.name) / repo.name)
    return path, build_repo_image(path).tag


@pytest.fixture(scope="session")
def dedupe_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _image(DEDUPE, tmp_path_factory)[1]


@pytest.fixture(scope="session")
def rle_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _image(RLE, tmp_path_factory)[1]


@pytest.fixture
def dedupe(dedupe_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=dedupe_image)) as sandbox:
        yield sandbox


@pytest.fixture
def rle(rle_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=rle_image)) as sandbox:
        yield sandbox
