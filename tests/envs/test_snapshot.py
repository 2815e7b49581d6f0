"""The index as it was at a moment: a real HTTP upstream on 127.0.0.1, the proxy in front of it."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from envs.images.snapshot import JSON_TYPE, index_snapshot

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


def get(url: str, accept: str = JSON_TYPE) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_files_uploaded_after_the_moment_are_hidden(upstream: str) -> None:
    with index_snapshot("2025-01-01T00:00:00Z") as url:
        status, body = get(f"{url}/docutils/")
        assert status == 200
        assert [f["filename"] for f in json.loads(body)["files"]] == [
            "docutils-0.21.2-py3-none-any.whl"
        ]
        assert get(f"{url}/nothing-here/")[0] == 404
        assert get(f"{url}/docutils/", "text/html") == (200, b"<html>docutils</html>")
    with index_snapshot("2026-01-01T00:00:00Z") as url:
        assert len(json.loads(get(f"{url}/docutils/")[1])["files"]) == 2
