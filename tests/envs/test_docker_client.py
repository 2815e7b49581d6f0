"""The Docker client every sandbox makes (envs.docker_util.docker_client), against the real
daemon through a proxy on a socket of the test's own that counts what the clients ask.

A new docker-py client asks the daemon for its API version, and the daemon answers by starting
``runc --version`` and ``docker-init --version``: one process asks once per daemon.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from envs import docker_util
from envs.errors import DockerUnavailable

VERSION_REQUEST = re.compile(rb"GET /(v[0-9.]+/)?version HTTP/1\.[01]\r\n")


def _daemon_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the daemon is not on a unix socket here ({host})")
    return host.removeprefix("unix://")


class CountingProxy:
    """Forwards every connection on ``path`` to the daemon's socket; counts version requests."""

    def __init__(self, path: Path, daemon: str) -> None:
        self.path, self.daemon = path, daemon
        self.version_requests = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(path))
        self._server.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.daemon)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, dest: socket.socket, count: bool) -> None:
        with source, dest:
            while data := source.recv(65536):
                if count:  # requests are small: each arrives in one piece
                    with self._lock:
                        self.requests += len(re.findall(rb"^[A-Z]+ /\S* HTTP/1\.[01]\r\n", data))
                        self.version_requests += len(VERSION_REQUEST.findall(data))
                dest.sendall(data)

    def close(self) -> None:
        self._server.close()


@contextmanager
def proxy_at(path: Path) -> Iterator[CountingProxy]:
    proxy = CountingProxy(path, _daemon_socket())
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_process_asks_each_daemon_its_version_once(
    docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with proxy_at(tmp_path / "one.sock") as one, proxy_at(tmp_path / "two.sock") as two:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{one.path}")
        clients = [docker_util.docker_client() for _ in range(3)]
        # Every client works (a real request, through the proxy) and talks the same version.
        assert {c.api.api_version for c in clients} == {docker_client.api.api_version}
        for client in clients:
            assert isinstance(client.containers.list(limit=1), list)
            client.close()
        assert one.version_requests == 1, f"{one.version_requests} version requests"
        assert one.requests >= 7  # three pings and three lists besides

        # Another daemon address is a daemon of its own: asked again.
        monkeypatch.setenv("DOCKER_HOST", f"unix://{two.path}")
        docker_util.docker_client().close()
        assert two.version_requests == 1


def test_a_daemon_gone_is_still_said_so_after_a_client_was_made(
    docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remembered version never stands in for the ping: a daemon that stopped answering
    at an address that worked is reported, not a client that fails later."""
    path = tmp_path / "gone.sock"
    with proxy_at(path):
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        docker_util.docker_client().close()
    path.unlink()
    with pytest.raises(DockerUnavailable, match="cannot reach the Docker daemon"):
        docker_util.docker_client()
