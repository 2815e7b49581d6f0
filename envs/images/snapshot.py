"""The package index as it was at a moment: a local proxy of PyPI's simple API that hides every
file uploaded later.

An environment spec pins some packages and leaves the rest to the resolver; resolved today, the
rest are newer than when the spec was written (and than in the official images built from it),
and an old repository breaks on them (sphinx 3.0 with docutils 0.22). Builds that give a moment
reach the index through this proxy (``PIP_INDEX_URL``, also in pip's isolated build
environments), so the resolver sees what it saw then. Any pip since 22.2 asks for the JSON form
(PEP 691), whose files carry their ``upload-time`` (PEP 700); an HTML answer is passed through
unfiltered. The files themselves are still fetched from where the index points.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from envs.images.common import ca_bundle

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def upstream_index() -> str:
    return (os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")


def visible(page: dict[str, Any], moment: str) -> dict[str, Any]:
    """``page`` (a PEP 691 project page) without the files uploaded at or after ``moment``
    (ISO 8601, UTC, as PEP 700 writes ``upload-time``)."""
    files = [f for f in page.get("files", []) if str(f.get("upload-time") or "") < moment]
    return {**page, "files": files}


@contextmanager
def index_snapshot(moment: str) -> Iterator[str]:
    """Serve the index as of ``moment`` on 127.0.0.1 while the block runs; yields its URL."""
    upstream = upstream_index()
    context = ssl.create_default_context(cafile=ca_bundle())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            request = urllib.request.Request(
                upstream + self.path.removeprefix("/simple"),
                headers={"Accept": self.headers.get("Accept") or JSON_TYPE},
            )
            try:
                with urllib.request.urlopen(request, context=context, timeout=60) as answer:
                    body, kind = answer.read(), answer.headers.get("Content-Type", "")
                    status = answer.status
            except urllib.error.HTTPError as e:
                body, kind, status = e.read(), e.headers.get("Content-Type", ""), e.code
            except OSError as e:
                body, kind, status = str(e).encode(), "text/plain", 502
            if status == 200 and kind.startswith(JSON_TYPE):
                body = json.dumps(visible(json.loads(body), moment)).encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
