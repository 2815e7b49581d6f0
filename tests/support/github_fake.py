"""A local stand-in for the part of GitHub's REST API pgs uses, for tests.

A threaded ``http.server`` on 127.0.0.1 serving, under ``/api/v3`` (so ``GITHUB_API_URL`` points
at it the way it points at GitHub Enterprise):

- ``GET /repos/{o}/{r}``, ``GET /repos/{o}/{r}/issues/{n}``, ``GET /repos/{o}/{r}/branches/{b}``,
  ``GET /repos/{o}/{r}/issues/{n}/comments`` (paginated with ``Link`` headers),
  ``POST /repos/{o}/{r}/pulls`` (the head branch must exist in the repository's git remote),
  ``POST /repos/{o}/{r}/issues/{n}/comments``;
- tokens: ``Authorization: Bearer T`` or ``token T``; an unknown token is 401, a private
  repository without a valid token is 404 (as on GitHub), a write without one is 401;
- rate-limit headers on every answer; when ``remaining`` reaches 0 the answer is 403;
- programmable failures (:meth:`FakeGitHub.fail`), and every request is recorded.

Each repository's ``clone_url`` is a local bare git repository, also the push remote.

Also the issue the tests of ``tests/github`` serve (:data:`REPO` #:data:`NUMBER`), a bare copy of
a repository (:func:`bare_copy`) and what a push left in one (:func:`branch_file`,
:func:`branches`); the fixtures over them are in ``tests/github/conftest.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

PREFIX = "/api/v3"

#: The issue the fake serves in tests/github: its repository, number, texts, and the token that
#: may read and write.
TOKEN = "good-token"
REPO = "octo/textutil"
NUMBER = 7
TITLE = "shout() does not shout"
BODY = "`shout('hi')` returns `'hi!'`; its docstring says it upper-cases, so `'HI!'`."
COMMENTS = (("alice", "Same here with `shout('abc')`."), ("bob", "The docstring is right."))


def bare_copy(source: Path, dest: Path) -> Path:
    """A bare clone of ``source`` at ``dest``: what GitHub holds, and where pushes land."""
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(dest)], check=True)
    return dest


def branch_file(bare: Path, branch: str, path: str) -> str:
    """The text of ``path`` on ``branch`` of the bare repository (a pushed branch)."""
    return subprocess.run(
        ["git", "--git-dir", str(bare), "show", f"{branch}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def branches(bare: Path) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", str(bare), "branch", "--format=%(refname:short)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None

    @property
    def token(self) -> str | None:
        value = self.headers.get("authorization", "")
        return value.split(" ", 1)[1] if " " in value else None


@dataclass
class Failure:
    method: str | None
    pattern: str
    status: int
    times: int
    headers: dict[str, str]
    message: str


@dataclass
class FakeRepo:
    full_name: str
    clone_url: str
    default_branch: str = "main"
    private: bool = False
    #: Tokens that may read but not push (GitHub's ``permissions.push`` false for them).
    read_only: set[str] = field(default_factory=set)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


class FakeGitHub:
    def __init__(self, tokens: tuple[str, ...] = ("good-token",), rate_limit: int = 5000) -> None:
        self.tokens = set(tokens)
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self.pulls: list[dict[str, Any]] = []
        self.posted_comments: list[dict[str, Any]] = []
        self.failures: list[Failure] = []
        self.page_size = 100
        self.limit = rate_limit
        self.remaining = rate_limit
        self.reset = int(time.time()) + 3600
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- set-up

    @property
    def host(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def api_url(self) -> str:
        return f"http://{self.host}{PREFIX}"

    def issue_url(self, full_name: str, number: int) -> str:
        return f"http://{self.host}/{full_name}/issues/{number}"

    def add_repo(self, full_name: str, clone_url: str | Path, **kwargs: Any) -> FakeRepo:
        repo = FakeRepo(full_name, str(clone_url), **kwargs)
        self.repos[full_name.lower()] = repo
        return repo

    def add_issue(
        self,
        full_name: str,
        number: int,
        title: str,
        body: str,
        *,
        labels: tuple[str, ...] = (),
        comments: tuple[tuple[str, str], ...] = (),
        state: str = "open",
        locked: bool = False,
        pull_request: bool = False,
    ) -> None:
        repo = self.repos[full_name.lower()]
        issue: dict[str, Any] = {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "locked": locked,
            "labels": [{"name": name} for name in labels],
            "comments": len(comments),
            "html_url": f"http://{self.host}/{full_name}/issues/{number}",
            "user": {"login": "reporter"},
        }
        if pull_request:
            issue["pull_request"] = {"url": "..."}
        repo.issues[number] = issue
        repo.comments[number] = [
            {
                "id": i + 1,
                "user": {"login": login},
                "body": text,
                "created_at": f"2024-03-0{i % 9 + 1}T10:00:00Z",
            }
            for i, (login, text) in enumerate(comments)
        ]

    def fail(
        self,
        pattern: str,
        status: int,
        *,
        method: str | None = None,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "failure",
    ) -> None:
        """Answer ``status`` to the next ``times`` requests whose path matches ``pattern``."""
        self.failures.append(Failure(method, pattern, status, times, headers or {}, message))

    def exhaust_rate_limit(self, reset_in: float = 600) -> None:
        self.remaining = 0
        self.reset = int(time.time() + reset_in)

    # -- lifecycle

    def start(self) -> FakeGitHub:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- answers: (status, body, extra headers)

    def answer(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            self.requests.append(request)
            for failure in self.failures:
                if (
                    failure.times > 0
                    and re.search(failure.pattern, request.path)
                    and failure.method in (None, request.method)
                ):
                    failure.times -= 1
                    return failure.status, {"message": failure.message}, failure.headers
            if request.token is not None and request.token not in self.tokens:
                return 401, {"message": "Bad credentials"}, {}
            if self.remaining <= 0:
                return 403, {"message": "API rate limit exceeded for 127.0.0.1."}, {}
            self.remaining -= 1
            return self._route(request)

    def _route(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(request.path)
        path = parts.path.removeprefix(PREFIX)
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        repo = self.repos.get(match.group(1).lower()) if match else None
        authed = request.token in self.tokens
        if match is None or repo is None or (repo.private and not authed):
            return 404, {"message": "Not Found"}, {}
        rest = match.group(2) or ""
        if request.method == "POST" and not authed:
            return 401, {"message": "Requires authentication"}, {}
        if request.method == "GET" and rest == "":
            data = self._repo_json(repo)
            if authed:  # as GitHub does: the token's own permissions on the repository
                push = request.token not in repo.read_only
                data["permissions"] = {"admin": False, "push": push, "pull": True}
            return 200, data, {}
        branch = re.fullmatch(r"/branches/(.+)", rest)
        if request.method == "GET" and branch:
            return self._branch(repo, branch.group(1))
        issue = re.fullmatch(r"/issues/(\d+)(/comments)?", rest)
        if issue and int(issue.group(1)) in repo.issues:
            number = int(issue.group(1))
            if request.method == "GET" and not issue.group(2):
                return 200, repo.issues[number], {}
            if request.method == "GET":
                return self._page(repo.comments[number], parts.path, parse_qs(parts.query))
            if request.method == "POST" and issue.group(2):
                comment = {
                    "id": 1000 + len(self.posted_comments),
                    "body": request.body["body"],
                    "html_url": f"{repo.issues[number]['html_url']}#issuecomment-1",
                }
                self.posted_comments.append(comment)
                return 201, comment, {}
        if request.method == "POST" and rest == "/pulls":
            return self._create_pull(repo, request.body)
        return 404, {"message": "Not Found"}, {}

    def _branch(self, repo: FakeRepo, name: str) -> tuple[int, Any, dict[str, str]]:
        found = subprocess.run(
            ["git", "--git-dir", repo.clone_url, "rev-parse", "--verify", f"refs/heads/{name}"],
            capture_output=True,
            text=True,
        )
        if found.returncode != 0:
            return 404, {"message": "Branch not found"}, {}
        return 200, {"name": name, "commit": {"sha": found.stdout.strip()}}, {}

    def _repo_json(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "full_name": repo.full_name,
            "name": repo.full_name.split("/")[1],
            "owner": {"login": repo.full_name.split("/")[0]},
            "private": repo.private,
            "default_branch": repo.default_branch,
            "clone_url": repo.clone_url,
            "html_url": f"http://{self.host}/{repo.full_name}",
        }

    def _page(
        self, items: list[dict[str, Any]], path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        size = min(int(query.get("per_page", ["30"])[0]), self.page_size)
        page = int(query.get("page", ["1"])[0])
        chunk = items[(page - 1) * size : page * size]
        headers = {}
        if page * size < len(items):
            headers["Link"] = (
                f'<http://{self.host}{path}?per_page={size}&page={page + 1}>; rel="next"'
            )
        return 200, chunk, headers

    def _create_pull(self, repo: FakeRepo, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        head = str(body.get("head", ""))
        owner, _, branch = head.rpartition(":")
        where = repo
        if owner:
            name = repo.full_name.split("/")[1]
            where = self.repos.get(f"{owner}/{name}".lower()) or repo
        exists = subprocess.run(
            ["git", "--git-dir", where.clone_url, "rev-parse", "--verify", f"refs/heads/{branch}"],
            capture_output=True,
        )
        if exists.returncode != 0:
            message = "Validation Failed"
            return 422, {"message": message, "errors": [{"field": "head", "code": "invalid"}]}, {}
        number = 100 + len(self.pulls)
        pull = {
            **body,
            "number": number,
            "html_url": f"http://{self.host}/{repo.full_name}/pull/{number}",
        }
        self.pulls.append(pull)
        return 201, pull, {}

    def rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(self.remaining, 0)),
            "X-RateLimit-Reset": str(self.reset),
        }


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                self._send(400, {"message": "Problems parsing JSON"}, {})
                return
            self._serve(body)

        def _serve(self, body: Any) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer, extra = fake.answer(Request(self.command, self.path, headers, body))
            self._send(status, answer, extra)

        def _send(self, status: int, body: Any, extra: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in {**fake.rate_headers(), **extra}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
