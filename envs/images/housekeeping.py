"""Finding and removing what pgs made: images and containers labelled ``pgs-agent=1``.

:func:`prune` removes all of it, live runs' containers included; :func:`reap_orphans` only the
containers whose owner process on this host has ended (see ``envs.docker_util.owner_gone``),
which a sandbox removes by itself in any case (``envs/docker_sandbox.py``): it catches what an
older pgs, or a daemon that failed to remove a container, left behind. :func:`clear_cache`
empties the wheelhouses of the cache folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs import scratch
from envs.docker_util import (
    LABEL,
    PID_LABEL,
    RUN_LABEL,
    docker_client,
    list_containers,
    owner_gone,
    remove_container,
    translate_errors,
)
from envs.errors import EnvError, ImageNotFound

if TYPE_CHECKING:
    import docker

#: The folders of the cache (``envs.scratch.cache_dir``) that hold wheelhouses and build files.
CACHE_FOLDERS = ("wheels", "build")


@dataclass(frozen=True)
class PgsObjects:
    """Images and containers labelled pgs-agent=1."""

    images: list[Any]
    containers: list[Any]


def _filters(run_id: str | None) -> dict[str, list[str]]:
    wanted = [f"{LABEL}=1"]
    if run_id:
        wanted.append(f"{RUN_LABEL}={run_id}")
    return {"label": wanted}


def list_pgs(client: docker.DockerClient | None = None, *, run_id: str | None = None) -> PgsObjects:
    """Every pgs image and container (all states), or only those of ``run_id``."""
    client = client or docker_client()
    with translate_errors("list pgs images and containers"):
        return PgsObjects(
            images=_images(client, _filters(run_id)),
            containers=client.containers.list(
                all=True, filters=_filters(run_id), ignore_removed=True
            ),
        )


def prune(
    client: docker.DockerClient | None = None, *, run_id: str | None = None
) -> tuple[int, int]:
    """Remove every container, then every image, labelled pgs-agent=1 (or only ``run_id``'s),
    those of live runs included.

    Returns (containers removed, images removed).
    """
    client = client or docker_client()
    found = list_pgs(client, run_id=run_id)
    containers = 0
    with translate_errors("remove pgs containers"):
        for container in found.containers:
            containers += remove_container(client, container.id)
    # Repository images are children of base images: remove them first, retry what refused.
    pending = sorted(found.images, key=lambda i: (i.labels or {}).get(f"{LABEL}.kind") == "base")
    images = 0
    for _ in range(3):
        refused = []
        for image in pending:
            try:
                with translate_errors(f"remove image {image.short_id}"):
                    client.images.remove(image.id, force=True)
                images += 1
            except ImageNotFound:  # gone already (removed with its child, or by someone else)
                images += 1
            except EnvError:
                refused.append(image)
        if not refused:
            break
        pending = refused
    else:
        names = ", ".join(i.tags[0] if i.tags else i.short_id for i in pending)
        raise EnvError(f"could not remove {names}: see `docker image rm` for the reason")
    return containers, images


def orphans(client: docker.DockerClient | None = None) -> list[dict[str, Any]]:
    """pgs containers whose owner process on this host has ended, as the daemon lists them."""
    client = client or docker_client()
    with translate_errors("list pgs containers"):
        found = list_containers(client, f"{LABEL}=1", PID_LABEL)
    return [c for c in found if owner_gone(c.get("Labels") or {})]


def orphan_snapshots(client: docker.DockerClient | None = None) -> list[Any]:
    """The sandbox snapshots (``envs.seal``) whose owner process on this host has ended."""
    client = client or docker_client()
    with translate_errors("list pgs snapshot images"):
        found = _images(client, {"label": [f"{LABEL}.kind=snapshot", PID_LABEL]})
    return [image for image in found if owner_gone(image.labels or {})]


def _images(client: docker.DockerClient, filters: dict[str, list[str]]) -> list[Any]:
    """The images ``filters`` select, leaving out those removed while they were read.

    ``client.images.list`` inspects each image it lists and fails on one another process
    (a pgs reaping the snapshots of ended runs, a run closing) removed in between: the daemon
    says "no such image" once it is gone and "layer does not exist" while it goes."""
    import docker.errors

    found = []
    for row in client.api.images(filters=filters):
        try:
            found.append(client.images.get(row["Id"]))
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError as e:
            if "layer does not exist" not in str(e):
                raise
    return found


def reap_orphans(client: docker.DockerClient | None = None) -> int:
    """Remove the containers of :func:`orphans`, then the snapshots of
    :func:`orphan_snapshots`; returns how many this call removed.

    Never a container or snapshot of a live run, on this host or another."""
    client = client or docker_client()
    removed = 0
    for container in orphans(client):
        with translate_errors(f"remove container {container['Id'][:12]}"):
            removed += remove_container(client, container["Id"])
    for image in orphan_snapshots(client):
        try:
            with translate_errors(f"remove snapshot {image.id[:19]}"):
                client.images.remove(image.id, force=True)
        except ImageNotFound:  # another pgs process reaped it since it was listed
            continue
        except EnvError as e:
            if "unrecognized image ID" in str(e) or "No such image" in str(e):
                continue  # the same, as some daemons say it
            raise
        removed += 1
    return removed


def clear_cache() -> Path:
    """Delete the cached wheelhouses and build files; returns the cache folder."""
    where = scratch.cache_dir()
    for folder in CACHE_FOLDERS:
        shutil.rmtree(where / folder, ignore_errors=True)
    return where
