"""The one place that connects to the Docker daemon, labels what pgs creates, translates errors.

Every container also names its owner: the host, the pid and the start time of the process that
created it (:func:`container_labels`). :func:`owner_gone` tells from those labels whether the
owner has ended, so that debris can be removed without touching another live run's containers.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.errors import DISK_FULL_HINT, DiskFull, DockerUnavailable, EnvError, looks_like_disk_full

if TYPE_CHECKING:
    import docker

#: Every container and image pgs creates carries this label (``pgs env prune`` finds them by it).
LABEL = "pgs-agent"
#: The run that created a container or image.
RUN_LABEL = "pgs-agent.run"
#: The process that created a container (a test session finds its own leaks by it).
PID_LABEL = "pgs-agent.pid"
#: The host that process runs on (its pid means nothing elsewhere).
HOST_LABEL = "pgs-agent.host"
#: When that process started, in clock ticks after boot (a reused pid has another start).
STARTED_LABEL = "pgs-agent.started"


def labels(run_id: str | None = None, **extra: str) -> dict[str, str]:
    out = {LABEL: "1", **{f"{LABEL}.{k}": v for k, v in extra.items()}}
    if run_id:
        out[RUN_LABEL] = run_id
    return out


def container_labels(run_id: str | None = None, **extra: str) -> dict[str, str]:
    """Labels for a container: those of :func:`labels` plus its owner, this process."""
    owner = {PID_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname()}
    stat = _process_stat(os.getpid())
    if stat is not None:
        owner[STARTED_LABEL] = stat[1]
    return {**labels(run_id, **extra), **owner}


def _process_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of process ``pid`` from /proc, or None (no such process, no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_fields(text)


def stat_fields(text: str) -> tuple[str, str] | None:
    """(state, start time) from the text of /proc/<pid>/stat, or None if it is cut short."""
    # After "pid (comm)", whose comm may hold spaces and parentheses: fields 3 (state) onwards.
    fields = text.rpartition(")")[2].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    stat = _process_stat(pid)
    return stat is None or stat[0] not in ("Z", "X")  # a zombie has ended


def owner_gone(found: Mapping[str, str]) -> bool:
    """Whether a container's labels ``found`` name an owner process on this host that has ended.

    False whenever that cannot be told: another host's container, or no owner label at all.
    A container of an older pgs has a pid but no host: it counts as this host's. With a start
    time, a running process under the same pid that started at another time is not the owner.
    """
    if found.get(HOST_LABEL, socket.gethostname()) != socket.gethostname():
        return False
    try:
        pid = int(found[PID_LABEL])
    except (KeyError, ValueError):
        return False
    if pid <= 0:
        return False
    if not _running(pid):
        return True
    started = found.get(STARTED_LABEL)
    stat = _process_stat(pid)
    return started is not None and stat is not None and stat[1] != started


def remove_container(client: docker.DockerClient, container_id: str) -> bool:
    """Force-remove a container; False when it was gone already or Docker was removing it (a
    container made with auto_remove goes by itself once it stops): then this waits for that."""
    import docker.errors
    import requests.exceptions

    try:
        client.api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as e:
        if e.status_code != 409:  # 409: "removal of container ... is already in progress"
            raise
        with suppress(docker.errors.NotFound, requests.exceptions.RequestException):
            client.api.wait(container_id, timeout=30, condition="removed")
        return False
    return True


def remove_own_containers(client: docker.DockerClient | None = None) -> int:
    """Force-remove every container this process created (its owner labels,
    :func:`container_labels`), running or not: how a command stopped by a signal ends the work
    its threads do in containers (a test run, an image build step) at once, instead of waiting
    for it. The number removed; never raises (Docker may be gone: nothing is left to stop)."""
    try:
        client = client or docker_client()
        mine = [f"{LABEL}=1", f"{PID_LABEL}={os.getpid()}", f"{HOST_LABEL}={socket.gethostname()}"]
        found = list_containers(client, *mine)
    except Exception:
        return 0
    removed = 0
    for container in found:
        with suppress(Exception):
            removed += remove_container(client, container["Id"])
    return removed


def list_containers(client: docker.DockerClient, *label_filters: str) -> list[dict[str, Any]]:
    """Containers (all states) carrying every label filter (``key`` or ``key=value``), as the
    daemon lists them (``Id``, ``Names``, ``Labels``, ``State``...): one request, no inspect."""
    found: list[dict[str, Any]] = client.api.containers(
        all=True, filters={"label": list(label_filters)}
    )
    return found


def _cause(error: Exception) -> tuple[str, str]:
    """What keeps the daemon from being used, and what to do, for a ping's ``error``."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(error)
    if "Permission denied" in text or "PermissionError" in text:
        return (
            f"no permission to use the Docker daemon at {host}",
            "add your user to the 'docker' group (then log in again) or run as root",
        )
    return (
        f"cannot reach the Docker daemon at {host}",
        "start Docker (e.g. `sudo systemctl start docker`) or set DOCKER_HOST to a running "
        "daemon; without Docker use `--sandbox local`",
    )


def _unavailable(error: Exception) -> DockerUnavailable:
    cause, fix = _cause(error)
    return DockerUnavailable(f"{cause}: {fix}")


def docker_unreachable(timeout: float = 5.0) -> str | None:
    """Why the daemon the environment names (DOCKER_HOST) cannot be used now, in a few words
    ("cannot reach the Docker daemon at ..."), or None when it answers a ping within
    ``timeout`` seconds. For commands that can do without Docker (``pgs demo``)."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except (docker.errors.DockerException, OSError) as e:
        return _cause(e)[0]
    return None


#: The API version each daemon (by the variables that name it) agreed on in this process. A
#: new client asks for it again otherwise, and the daemon's answer starts two processes
#: (``runc --version``, ``docker-init --version``): every sandbox makes a client.
_api_versions: dict[tuple[str | None, ...], str] = {}


def docker_client() -> docker.DockerClient:
    """A client for the daemon named by the environment (DOCKER_HOST), checked with a ping."""
    import docker
    import docker.errors

    daemon = tuple(
        os.environ.get(v) for v in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")
    )
    try:
        client = docker.from_env(timeout=120, version=_api_versions.get(daemon))
        client.ping()
    except (docker.errors.DockerException, OSError) as e:
        raise _unavailable(e) from e
    _api_versions[daemon] = client.api.api_version
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
