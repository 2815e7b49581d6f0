"""The index as it was at a moment: a real HTTP upstream on 127.0.0.1, the build proxy in front
of it."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from envs.images.buildnet import SOCKET_NAME, build_network
from envs.images.snapshot import JSON_TYPE

PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "docutils",
    "versions": ["0.21.2", "0.22"],
    "files": [
        {"filename": "docutils-0.21.2-py3-none-any.whl", "upload-time": "2024-04-23T18:57:14Z"},
        {"filename": "docutils-0.22-py3-none-any.whl", "upload-time": "2025-07-29T15:20:31Z"},
    ],
}


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            json_wanted = JSON_TYPE in (self.headers.get("Accept") or "")
            body = json.dumps(PAGE).encode() if json_wanted else b"<html>docutils</html>"
            self.send_response(200 if self.path == "/simple/docutils/" else 404)
            self.send_header("Content-Type", JSON_TYPE if json_wanted else "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    yield url
    server.shutdown()
    server.server_close()


def get(sock: Path, path: str, accept: str = JSON_TYPE) -> tuple[int, bytes]:
    """A GET through the build proxy's Unix socket, as pip in a build container sends it."""
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(sock))
        client.sendall(f"GET {path} HTTP/1.1\r\nAccept: {accept}\r\n\r\n".encode())
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@contextmanager
def snapshot(tmp_path: Path, moment: str) -> Iterator[Path]:
    with build_network(tmp_path, network=True, moment=moment) as net:
        assert net.env["PIP_INDEX_URL"] == "http://127.0.0.1:3128/i/0/simple"
        yield tmp_path / SOCKET_NAME


def test_files_uploaded_after_the_moment_are_hidden(upstream: str, tmp_path: Path) -> None:
    with snapshot(tmp_path, "2025-01-01T00:00:00Z") as sock:
        status, body = get(sock, "/i/0/simple/docutils/")
        assert status == 200
        assert [f["filename"] for f in json.loads(body)["files"]] == [
            "docutils-0.21.2-py3-none-any.whl"
        ]
        assert get(sock, "/i/0/simple/nothing-here/")[0] == 404
        assert get(sock, "/i/0/simple/docutils/", "text/html") == (200, b"<html>docutils</html>")
    with snapshot(tmp_path, "2026-01-01T00:00:00Z") as sock:
        assert len(json.loads(get(sock, "/i/0/simple/docutils/")[1])["files"]) == 2


def test_a_pinned_version_stays_visible_after_the_moment_and_nothing_else_does(
    upstream: str, tmp_path: Path
) -> None:
    pins = {"docutils": frozenset({"0.22"}), "sphinx": frozenset({"0.21.2"})}
    with build_network(tmp_path, network=True, moment="2024-01-01T00:00:00Z", pins=pins) as _:
        status, body = get(tmp_path / SOCKET_NAME, "/i/0/simple/docutils/")
    assert status == 200
    # 0.22 (2025) is pinned: kept; 0.21.2 (2024-04) is after the moment and not pinned: hidden.
    assert [f["filename"] for f in json.loads(body)["files"]] == ["docutils-0.22-py3-none-any.whl"]
