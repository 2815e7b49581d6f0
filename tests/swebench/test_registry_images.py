"""Built instance images shared through a registry (``--registry HOST:PORT``, build source).

A real registry (Debian's ``docker-registry`` on 127.0.0.1, as in test_official_images.py):
an instance image built with the registry is pushed there once; with its local tag removed
(as on another node, whose daemon never had it), the next run pulls it instead of building it,
and it is the same image. An unreachable registry costs a warning, not the run.

The first test builds an image of its own (the example instance with an extra ``pre_install``
step holding a random word, so the tag is new and the shared environment layer stays cached)
and removes exactly that tag afterwards.
"""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import docker.errors
import pytest

from agent.swebench import Environments, Instance
from agent.swebench.images import pull_from_registry, push_to_registry
from tests.support.swe_dataset import I1, Dataset, make_dataset
from tests.swebench import test_official_images

#: The registry on 127.0.0.1:<free port>, shared with the official-image tests.
registry = test_official_images.registry


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("registry-images"))


@pytest.fixture
def own_tags(docker_client: Any) -> Iterator[list[str]]:
    """Tags this test made; removed after it, by their exact names."""
    made: list[str] = []
    yield made
    for tag in made:
        with contextlib.suppress(Exception):
            docker_client.images.remove(tag, force=True)


def unique_instance(dataset: Dataset) -> Instance:
    """The example instance with one more setup step, so its image is new to this test."""
    record = dict(dataset.record(I1))
    record["pre_install"] = [f"echo pgs-registry-test-{uuid.uuid4().hex}"]
    return Instance.from_record(record)


def registry_tags(address: str, name: str) -> list[str]:
    with urllib.request.urlopen(f"http://{address}/v2/{name}/tags/list", timeout=10) as answer:
        tags: list[str] = json.loads(answer.read()).get("tags") or []
        return tags


@pytest.mark.docker
def test_a_built_image_is_pushed_once_and_pulled_not_built_elsewhere(
    dataset: Dataset, registry: str, docker_client: Any, own_tags: list[str]
) -> None:
    instance = unique_instance(dataset)
    first_lines: list[str] = []
    envs = Environments(dataset.repos_dir, {}, "build", registry=registry)
    first = envs.image(instance, first_lines.append)
    own_tags.append(first.tag)
    assert not first.cache_hit and not first.pulled
    assert f"docker pull {registry}/{first.tag} (built by another node?)" in first_lines
    assert any(line.startswith(f"docker build {first.tag}") for line in first_lines)
    assert f"docker push {registry}/{first.tag} (once, for the other nodes)" in first_lines
    name, version = first.tag.split(":")
    assert registry_tags(registry, name) == [version]
    env_pushes = [line for line in first_lines if line.startswith(f"docker push {registry}/")]
    env_name, env_version = env_pushes[0].split()[2].removeprefix(f"{registry}/").split(":")
    assert env_name.startswith("pgs-sweb-env-") and env_version in registry_tags(registry, env_name)
    with pytest.raises(docker.errors.ImageNotFound):  # the registry's name is not kept here
        docker_client.images.get(f"{registry}/{first.tag}")
    pushed_id = docker_client.images.get(first.tag).id

    # Another node: its daemon has no such image. Only this test's tag is removed.
    docker_client.images.remove(first.tag)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(first.tag)
    second_lines: list[str] = []
    again = Environments(dataset.repos_dir, {}, "build", registry=registry)
    second = again.image(instance, second_lines.append)
    assert second.tag == first.tag and second.pulled and second.cache_hit
    assert f"docker pull {registry}/{first.tag} (built by another node?)" in second_lines
    assert not any(line.startswith(("docker build", "docker push")) for line in second_lines)
    assert docker_client.images.get(first.tag).id == pushed_id  # the same image, not a rebuild
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(f"{registry}/{first.tag}")


@pytest.mark.docker
def test_an_unreachable_registry_is_a_warning_and_the_run_goes_on(
    registry: str, base_image: str, docker_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed pull means "build it here" (the caller builds, as the first node does when the
    registry lacks the image: see above); a failed push leaves the image here, warned about."""
    closed = f"127.0.0.1:{test_official_images.free_port()}"
    with caplog.at_level(logging.WARNING, logger="agent.swebench.images"):
        assert not pull_from_registry(docker_client, closed, "pgs-sweb-absent:0")
        assert not push_to_registry(docker_client, closed, [base_image])
    docker_client.images.get(base_image)  # still here
    for ref in (f"{closed}/pgs-sweb-absent:0", f"{closed}/{base_image}"):
        with pytest.raises(docker.errors.ImageNotFound):  # no name of the closed registry left
            docker_client.images.get(ref)
    pull, push = (r.getMessage() for r in caplog.records)
    assert pull.startswith(f"cannot pull {closed}/pgs-sweb-absent:0: the registry is unreachable")
    assert pull.endswith("building it here")
    assert push.startswith(f"cannot push {closed}/{base_image}: the registry is unreachable")
    assert push.endswith("the run goes on")
    # A registry that answers but lacks the image: the first node's normal case, no warning.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent.swebench.images"):
        assert not pull_from_registry(docker_client, registry, "pgs-sweb-absent:0")
    assert caplog.records == []
