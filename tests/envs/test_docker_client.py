"""The Docker client every sandbox makes (envs.docker_util.docker_client), against the real
daemon through a proxy on a socket of the test's own that counts what the clients ask.

A new docker-py client asks the daemon for its API version, and the daemon answers by starting
``runc --version`` and ``docker-init --version``: one process asks once per daemon.
"""

from __future__ import annotations

import os
import re
import select
import socket
import socketserver
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


class CountingProxy(socketserver.ThreadingUnixStreamServer):
    """Forwards every connection on ``path`` to the daemon's socket and counts the requests.

    Each connection is served by one thread that owns both its sockets (a socket closed under
    another thread's ``recv`` would let that thread read whatever reuses the descriptor);
    :meth:`close` ends them all and waits for them."""

    daemon_threads = False  # server_close() joins the connections' threads

    def __init__(self, path: Path, daemon: str) -> None:
        self.path, self.daemon = path, daemon
        self.version_requests = 0
        self.requests = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        super().__init__(str(path), _Forward)
        self._serving = threading.Thread(target=self.serve_forever, args=(0.1,))
        self._serving.start()

    def count(self, data: bytes) -> None:
        with self._lock:  # requests are small: each arrives in one piece
            self.requests += len(re.findall(rb"^[A-Z]+ /\S* HTTP/1\.[01]\r\n", data, re.M))
            self.version_requests += len(VERSION_REQUEST.findall(data))

    def close(self) -> None:
        self.stopping.set()
        self.shutdown()
        self._serving.join()
        self.server_close()


class _Forward(socketserver.BaseRequestHandler):
    server: CountingProxy

    def handle(self) -> None:
        client: socket.socket = self.request
        with socket.socket(socket.AF_UNIX) as upstream:
            upstream.connect(self.server.daemon)
            while not self.server.stopping.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.1)
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    if source is client:
                        self.server.count(data)
                        upstream.sendall(data)
                    else:
                        client.sendall(data)


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
