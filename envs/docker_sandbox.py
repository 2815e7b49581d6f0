"""DockerSandbox: one container per task, one helper process inside it.

The helper (``envs/helper/pgs_helper.py``) is the container's main process, under Docker's init
(which reaps orphans), with its stdin attached; every command is a JSON line over the attach
socket: well under a millisecond of overhead instead of the ~80 ms of a ``docker exec`` per
command, and each command still runs in a fresh process group with its own working directory
and environment, killed whole on timeout.

The container lives no longer than its owner, this process, whatever ends it (SIGKILL
included): Docker closes the helper's stdin when the attach connection closes (``StdinOnce``);
the helper then kills the running command and exits, the container stops, and Docker removes
it (``auto_remove``), all within a second. :meth:`DockerSandbox.close` removes it at once.

Safe by default: no network (``network=True`` to opt in), memory / CPU / pids limits, no swap
beyond the memory limit, and the labels ``pgs-agent=1``, ``pgs-agent.run=<run id>`` and the
owner's host, pid and start time (``envs/docker_util.py``). The first sandbox of a process
removes the containers whose owner has ended (``reap_orphans``); ``pgs env prune`` removes
every pgs container, live runs' included.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import struct
import tarfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from envs.channel import HelperSandbox, helper_source
from envs.docker_util import container_labels, docker_client, remove_container, translate_errors
from envs.errors import ImageNotFound, NotAGitRepository, SandboxError
from envs.registry import SandboxSettings
from envs.sandbox import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT

HELPER_PATH = "/tmp/pgs_helper.py"

logger = logging.getLogger(__name__)


class DockerSandboxConfig(SandboxSettings):
    """A Docker container per task; see the module docstring for what is enforced."""

    model_config = ConfigDict(extra="forbid")
    takes_image: ClassVar[bool] = True
    type: Literal["docker"] = "docker"
    image: str | None = Field(
        None, description="image to start; None: the repository's image (`pgs env build`)"
    )
    repo_path: str = Field("/repo", description="where the repository lives in the container")
    network: bool = Field(False, description="give the container network access (off by default)")
    memory: str = Field("4g", description="memory limit (Docker syntax: 512m, 4g)")
    cpus: float = Field(2.0, gt=0, description="CPU limit, in cores")
    pids_limit: int = Field(1024, gt=0, description="maximum number of processes")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="default time limit per command (s)")
    max_output: int = Field(
        DEFAULT_MAX_OUTPUT, gt=0, description="bytes of output kept per command"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    python: str = Field("python3", description="interpreter in the image that runs the helper")
    startup_timeout: float = Field(60.0, gt=0, description="seconds to wait for the helper")

    def image_tag(self) -> str | None:
        return self.image


class _SocketChannel:
    """The attach socket of a container without a TTY: frames of (stream, length, payload)."""

    def __init__(self, sock: Any) -> None:
        self._holder = sock
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._raw = bytearray()
        self._stdout = bytearray()
        self.stderr = bytearray()
        self._eof = False

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def _fill(self) -> None:
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            self._eof = True
            return
        self._raw += chunk
        while len(self._raw) >= 8:
            stream, size = struct.unpack(">BxxxL", self._raw[:8])
            if len(self._raw) < 8 + size:
                break
            payload = bytes(self._raw[8 : 8 + size])
            del self._raw[: 8 + size]
            if stream == 2:
                self.stderr = (self.stderr + payload)[-4000:]
            else:
                self._stdout += payload

    def readline(self, timeout: float | None) -> bytes:
        # One deadline for the line: bytes trickling in must not restart the wait.
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._stdout and not self._eof:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._sock.settimeout(left)
            else:
                self._sock.settimeout(None)
            self._fill()  # socket.timeout is a TimeoutError
        end = self._stdout.find(b"\n") + 1 or len(self._stdout)
        line = bytes(self._stdout[:end])
        del self._stdout[:end]
        return line

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        close = getattr(self._holder, "close", None)
        if close is not None:
            close()


def _tar(local: Path, name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(local), arcname=name)
    return buf.getvalue()


def _tar_bytes(name: str, data: bytes, mode: int = 0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class DockerSandbox(HelperSandbox):
    """A container with the repository at ``config.repo_path``.

    ``repo``: a host repository to copy into the container at start, for images that do not
    already hold it (a repository image from ``pgs env build`` does).
    """

    home = "/root"
    config_class = DockerSandboxConfig

    @classmethod
    def from_config(cls, config: DockerSandboxConfig, *, repo: Path, run_id: str) -> DockerSandbox:
        """The registry's way in (:mod:`envs.registry`): the repository is not copied here;
        pgs copies it when the image does not hold it."""
        return cls(config, run_id=run_id)

    def __init__(
        self, config: DockerSandboxConfig, *, repo: Path | None = None, run_id: str | None = None
    ) -> None:
        # Without a network pip must not wait on an index it cannot reach: only local wheels.
        env = config.env if config.network else {"PIP_NO_INDEX": "1", **config.env}
        super().__init__(timeout=config.timeout, max_output=config.max_output, env=env)
        if not config.image:
            raise ImageNotFound(
                "no image given for the Docker sandbox: build one with `pgs env build`"
            )
        self.config = config
        self.repo_path = config.repo_path
        self.run_id = run_id or uuid.uuid4().hex[:12]
        if repo is not None and not (Path(repo) / ".git").exists():
            raise NotAGitRepository(
                f"{repo} is not a git repository: run `git init` there, or give the folder "
                "that holds .git"
            )
        self.client = docker_client()
        self.container: Any = None
        try:
            self._start(repo)
        except BaseException:
            self.close()
            raise

    def _start(self, repo: Path | None) -> None:
        cfg = self.config
        _reap_orphans_once(self.client)
        environment = {"HOME": self.home, **({} if cfg.network else {"PIP_NO_INDEX": "1"})}
        with translate_errors(f"starting a container of image {cfg.image}"):
            self.container = self.client.containers.create(
                cfg.image,
                # As the entrypoint: the image's own entrypoint and command are not run.
                entrypoint=[cfg.python, "-u", HELPER_PATH],
                name=f"pgs-{self.run_id}-{uuid.uuid4().hex[:6]}",
                init=True,
                # An open stdin, not detached: Docker closes the helper's stdin when the attach
                # connection closes (StdinOnce), and removes the container once it stops.
                stdin_open=True,
                detach=False,
                auto_remove=True,
                # The helper's stdout carries every reply (files included): not for a log file.
                log_config={"type": "none"},
                labels=container_labels(self.run_id),
                network_mode="bridge" if cfg.network else "none",
                mem_limit=cfg.memory,
                memswap_limit=cfg.memory,
                nano_cpus=int(cfg.cpus * 1e9),
                pids_limit=cfg.pids_limit,
                working_dir="/",
                environment=environment,
            )
            self.container.put_archive("/tmp", _tar_bytes(Path(HELPER_PATH).name, helper_source()))
            # Attached before the start, so that no byte of the helper's output is missed.
            sock = self.client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._channel = channel = _SocketChannel(sock)
            self.container.start()
        self._attach(channel, timeout=cfg.startup_timeout)
        if repo is not None:
            self.upload(Path(repo), cfg.repo_path)

    def _helper_stderr(self) -> str:
        channel = self._channel
        if isinstance(channel, _SocketChannel) and channel.stderr:
            return "helper said: " + channel.stderr.decode("utf-8", "replace")[-500:]
        return ""

    def upload(self, local: Path, remote: str) -> None:
        remote = self._abs(remote)
        parent, name = remote.rstrip("/").rsplit("/", 1)
        data = _tar(Path(local), name)
        with translate_errors(f"copying {local} into the sandbox"):
            self.container.exec_run(["mkdir", "-p", parent or "/"])
            if not self.container.put_archive(parent or "/", data):
                raise SandboxError(f"could not copy {local} to {remote} in the sandbox")

    def close(self) -> None:
        container, self.container = self.container, None
        try:
            if container is not None:
                import docker.errors

                # Removed before the connection closes: else the helper exits on its own and
                # Docker's auto-removal races with this one.
                try:
                    remove_container(self.client, container.id)
                except docker.errors.DockerException as e:
                    raise SandboxError(
                        f"could not remove container {container.name}: {e}; "
                        "`pgs env prune --orphans` removes it"
                    ) from e
        finally:
            self._close_channel()


#: Taken by the first sandbox of the process, never released: orphans are looked for once.
_first_sandbox = threading.Lock()


def _reap_orphans_once(client: Any) -> None:
    """The first sandbox of a process removes what ended pgs processes left behind; a failure
    there is logged, never raised: it must not cost the run."""
    if not _first_sandbox.acquire(blocking=False):
        return
    from envs.images.housekeeping import reap_orphans

    try:
        removed = reap_orphans(client)
    except Exception as e:
        logger.warning("could not remove the containers of ended pgs runs: %s", e)
        return
    if removed:
        logger.info("removed %d container(s) of ended pgs runs", removed)
