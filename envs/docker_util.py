"""The one place that connects to the Docker daemon, labels what pgs creates, translates errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from envs.errors import DISK_FULL_HINT, DiskFull, DockerUnavailable, EnvError, looks_like_disk_full

if TYPE_CHECKING:
    import docker

#: Every container and image pgs creates carries this label (``pgs env prune`` finds them by it).
LABEL = "pgs-agent"
#: The run that created a container or image.
RUN_LABEL = "pgs-agent.run"
#: The process that created a container (a test session finds its own leaks by it).
PID_LABEL = "pgs-agent.pid"


def labels(run_id: str | None = None, **extra: str) -> dict[str, str]:
    out = {LABEL: "1", **{f"{LABEL}.{k}": v for k, v in extra.items()}}
    if run_id:
        out[RUN_LABEL] = run_id
    return out


def container_labels(run_id: str | None = None, **extra: str) -> dict[str, str]:
    """Labels for a container: those of :func:`labels` plus the creating process."""
    return {**labels(run_id, **extra), PID_LABEL: str(os.getpid())}


def _unavailable(error: Exception) -> DockerUnavailable:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(error)
    if "Permission denied" in text or "PermissionError" in text:
        return DockerUnavailable(
            f"no permission to use the Docker daemon at {host}: add your user to the 'docker' "
            "group (then log in again) or run as root"
        )
    return DockerUnavailable(
        f"cannot reach the Docker daemon at {host}: start Docker (e.g. `sudo systemctl start "
        "docker`) or set DOCKER_HOST to a running daemon; without Docker use `--sandbox local`"
    )


def docker_client() -> docker.DockerClient:
    """A client for the daemon named by the environment (DOCKER_HOST), checked with a ping."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, OSError) as e:
        raise _unavailable(e) from e
    return client


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Turn the Docker SDK's errors raised while doing ``what`` into our own, one sentence each."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except EnvError:
        raise
    except docker.errors.ImageNotFound as e:
        from envs.errors import ImageNotFound

        raise ImageNotFound(
            f"{what}: image not found ({e.explanation}); build it first, see `pgs env --help`"
        ) from e
    except docker.errors.APIError as e:
        text = str(e.explanation or e)
        if looks_like_disk_full(text):
            raise DiskFull(f"{what}: {DISK_FULL_HINT}") from e
        raise EnvError(f"{what}: the Docker daemon refused: {text}") from e
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as e:
        raise _unavailable(e) from e
    except OSError as e:
        if looks_like_disk_full(str(e)):
            raise DiskFull(f"{what}: {DISK_FULL_HINT}") from e
        raise
