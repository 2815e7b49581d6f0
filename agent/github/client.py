"""GitHub at the boundary: issue URLs, the REST API, and git over HTTPS.

Everything GitHub or git can answer is translated here into :class:`GitHubError`, an
:class:`~agent.errors.InputError`: the CLI prints one ``pgs: error:`` line and exits 2.

- :func:`parse_issue_url` checks an issue URL against the API's host (``GITHUB_API_URL``,
  default ``https://api.github.com`` for ``github.com``; a GitHub Enterprise host otherwise).
- :class:`GitHub` is a small client: ``GITHUB_TOKEN`` when set (optional for public
  repositories), GETs retried on 5xx and connection errors, POSTs never retried (a retried
  POST can open a second pull request).
- :func:`fetch_issue` reads the repository, the issue and its comments;
  :func:`problem_statement` formats them for the Generator.
- git itself (clone, commit, push) is :mod:`agent.github.git`.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from agent.errors import GitHubError, InputError

DEFAULT_API = "https://api.github.com"
USER_AGENT = "pgs-agent"
TIMEOUT = 30.0
#: Most characters of one comment put into the problem statement.
COMMENT_LIMIT = 6000


@dataclass
class RetrySettings:
    """GET retries on 5xx and connection errors (exponential backoff, in seconds)."""

    attempts: int = 3
    min_wait: float = 0.5
    max_wait: float = 8.0


RETRY = RetrySettings()


# -- issue URLs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssueRef:
    owner: str
    name: str
    number: int

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def __str__(self) -> str:
        return f"{self.full_name}#{self.number}"


def api_url() -> str:
    return (os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/")


def web_host(api: str) -> str:
    """The host issue URLs live on: github.com for api.github.com, the API's host otherwise."""
    host = urlsplit(api).netloc.lower()
    return "github.com" if host == "api.github.com" else host


def looks_like_url(text: str) -> bool:
    text = text.strip()
    return bool(re.match(r"^https?://", text, re.I)) or text.lower().startswith(
        ("github.com/", "www.github.com/")
    )


def parse_issue_url(url: str, api: str | None = None) -> IssueRef:
    """``https://HOST/OWNER/REPO/issues/N`` (a ``#comment`` anchor or query is fine)."""
    api = api or api_url()
    host = web_host(api)
    text = url.strip()
    if not re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I):
        text = "https://" + text
    parts = urlsplit(text)
    expected = f"https://{host}/OWNER/REPO/issues/NUMBER"
    if parts.scheme.lower() not in ("http", "https"):
        raise InputError(f"{url!r} is not a GitHub issue URL: expected {expected}")
    got_host = parts.netloc.lower().removeprefix("www.")
    if got_host != host:
        hint = (
            f"for GitHub Enterprise set GITHUB_API_URL=https://{got_host}/api/v3"
            if host == "github.com"
            else f"GITHUB_API_URL is {api}: unset it for github.com, or point it at {got_host}"
        )
        raise InputError(f"the issue URL's host {got_host} is not GitHub's ({host}): {hint}")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise InputError(f"{url!r} is not a GitHub issue URL: expected {expected}")
    owner, name = segments[0], segments[1].removesuffix(".git")
    issue_url = f"{parts.scheme}://{parts.netloc}/{owner}/{name}/issues/NUMBER"
    if len(segments) == 2:
        raise InputError(
            f"{url!r} is a repository URL, not an issue: pass an issue of it, {issue_url}"
        )
    kind = segments[2]
    if kind in ("pull", "pulls"):
        raise InputError(
            f"{url!r} is a pull request URL, not an issue: pgs fixes issues; pass {issue_url}"
        )
    if kind != "issues" or len(segments) > 4:
        raise InputError(f"{url!r} is not a GitHub issue URL: expected {issue_url}")
    if len(segments) == 3:
        raise InputError(f"{url!r} names no issue: add its number, {issue_url}")
    if not segments[3].isdigit() or int(segments[3]) == 0:
        raise InputError(f"{url!r}: the issue number {segments[3]!r} is not a positive number")
    return IssueRef(owner, name, int(segments[3]))


# -- the REST API ------------------------------------------------------------------------------


class _ServerError(Exception):
    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _message(response: requests.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.reason or ""
    if not isinstance(data, dict):
        return response.reason or ""
    text = str(data.get("message") or response.reason or "")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        details = [e.get("message") or e.get("code") if isinstance(e, dict) else e for e in errors]
        text += " (" + "; ".join(str(d) for d in details if d) + ")"
    return text


def _reset_when(reset: str | None) -> str:
    """'resets at 14:05 (in 12 minutes)', in local time, from X-RateLimit-Reset (epoch s)."""
    try:
        at = float(reset or "")
    except ValueError:
        return "try again later"
    minutes = max(0, math.ceil((at - time.time()) / 60))
    clock = time.strftime("%H:%M", time.localtime(at))
    return f"it resets at {clock} (in {minutes} minute{'s' if minutes != 1 else ''})"


def _connection_reason(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, requests.Timeout):
        return "timed out"
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host not found"
    if "Network is unreachable" in text:
        return "network unreachable"
    return "connection failed"


class GitHub:
    """The part of the GitHub REST API pgs uses."""

    def __init__(
        self,
        api: str | None = None,
        token: str | None = None,
        retry: RetrySettings | None = None,
    ) -> None:
        self.api = (api or api_url()).rstrip("/")
        self.token = token
        self.retry = retry or RETRY
        self.session = requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": USER_AGENT,
            }
        )
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    @classmethod
    def from_env(cls) -> GitHub:
        return cls(api_url(), os.environ.get("GITHUB_TOKEN") or None)

    def request(
        self, method: str, path: str, what: str, *, missing_ok: bool = False, **kwargs: Any
    ) -> requests.Response:
        """One API call; ``what`` names the object for error messages ("the issue o/r#1");
        ``missing_ok``: a 404 is an answer (the caller reads its status), not an error."""
        url = path if path.startswith(("http://", "https://")) else self.api + path
        retried = method == "GET"
        retrying = Retrying(
            stop=stop_after_attempt(self.retry.attempts if retried else 1),
            wait=wait_exponential(min=self.retry.min_wait, max=self.retry.max_wait),
            retry=retry_if_exception_type(
                (requests.ConnectionError, requests.Timeout, _ServerError)
            ),
        )

        def once() -> requests.Response:
            response = self.session.request(method, url, timeout=TIMEOUT, **kwargs)
            if response.status_code >= 500 and retried:
                raise _ServerError(response)
            return response

        try:
            response = retrying(once)
        except RetryError as e:
            last = e.last_attempt.exception()
            if isinstance(last, _ServerError):
                response = last.response
            else:
                assert last is not None
                raise self._unreachable(last) from None
        except (requests.ConnectionError, requests.Timeout) as e:
            raise self._unreachable(e) from None
        if not (missing_ok and response.status_code == 404):
            self._raise_for(response, what, method)
        return response

    def _unreachable(self, error: BaseException) -> GitHubError:
        return GitHubError(
            f"cannot reach the GitHub API at {self.api} ({_connection_reason(error)}): check "
            "the network connection, or GITHUB_API_URL for GitHub Enterprise"
        )

    def _raise_for(self, response: requests.Response, what: str, method: str) -> None:
        status = response.status_code
        if status < 400:
            return
        headers = response.headers
        message = _message(response)
        token_hint = "" if self.token else "; set GITHUB_TOKEN for a higher limit"
        if status in (403, 429) and headers.get("X-RateLimit-Remaining") == "0":
            raise GitHubError(
                f"GitHub's API rate limit is used up ({headers.get('X-RateLimit-Limit', '?')} "
                f"requests an hour): {_reset_when(headers.get('X-RateLimit-Reset'))}{token_hint}"
            )
        if status == 429 or (status == 403 and "rate limit" in message.lower()):
            wait = headers.get("Retry-After")
            when = f"retry after {wait} s" if wait else "try again in a minute"
            raise GitHubError(f"GitHub's secondary rate limit was hit for {what}: {when}")
        if status == 401:
            if self.token:
                raise GitHubError(
                    f"GitHub refused GITHUB_TOKEN (401 {message}): check that the token is "
                    "valid and not expired"
                )
            raise GitHubError(f"GitHub asks for authentication for {what} (401): set GITHUB_TOKEN")
        if status in (403, 404) and not self.token:
            raise GitHubError(
                f"{what} was not found or is private ({status} {message}): check the URL; for "
                "a private repository set GITHUB_TOKEN to a token that can read it"
            )
        if status == 403:
            verb = "read" if method == "GET" else "write to"
            raise GitHubError(
                f"GITHUB_TOKEN may not {verb} {what} (403 {message}): give the token access "
                "to the repository"
            )
        if status == 404:
            raise GitHubError(
                f"{what} was not found (404): check the URL, and that GITHUB_TOKEN can read "
                "the repository"
            )
        if status == 422:
            raise GitHubError(f"GitHub refused {what} (422): {message}")
        if status >= 500:
            tries = self.retry.attempts if method == "GET" else 1
            raise GitHubError(
                f"GitHub answered {status} {message} for {what} ({tries} attempt"
                f"{'s' if tries != 1 else ''}): try again later"
            )
        raise GitHubError(f"GitHub answered {status} for {what}: {message}")

    def get(self, path: str, what: str) -> Any:
        return self.request("GET", path, what).json()

    def get_all(self, path: str, what: str, pages: int = 20) -> list[Any]:
        """Every item of a paginated list (100 per page, following Link: rel="next")."""
        items: list[Any] = []
        url: str | None = f"{path}?per_page=100"
        while url and pages > 0:
            response = self.request("GET", url, what)
            items.extend(response.json())
            url = response.links.get("next", {}).get("url")
            pages -= 1
        return items

    def post(self, path: str, what: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, what, json=body).json()

    # -- the objects pgs uses

    def repository(self, full_name: str) -> Repository:
        data = self.get(f"/repos/{full_name}", f"the repository {full_name}")
        perms = data.get("permissions")  # the token's, present when one was sent
        return Repository(
            full_name=data["full_name"],
            clone_url=data["clone_url"],
            default_branch=data.get("default_branch") or "main",
            private=bool(data.get("private")),
            can_push=bool(perms.get("push")) if isinstance(perms, dict) else None,
        )

    def branch_exists(self, full_name: str, branch: str) -> bool:
        what = f"the branch {branch} of {full_name}"
        response = self.request(
            "GET", f"/repos/{full_name}/branches/{branch}", what, missing_ok=True
        )
        return response.status_code != 404

    def create_pull(
        self, repo: Repository, *, title: str, head: str, base: str, body: str
    ) -> dict[str, Any]:
        data: dict[str, Any] = self.post(
            f"/repos/{repo.full_name}/pulls",
            f"a pull request on {repo.full_name}",
            {
                "title": title,
                "head": head,
                "base": base,
                "body": body,
                "draft": True,
                "maintainer_can_modify": True,
            },
        )
        return data

    def create_comment(self, ref: IssueRef, body: str) -> dict[str, Any]:
        data: dict[str, Any] = self.post(
            f"/repos/{ref.full_name}/issues/{ref.number}/comments",
            f"a comment on {ref}",
            {"body": body},
        )
        return data


@dataclass(frozen=True)
class Repository:
    full_name: str
    clone_url: str
    default_branch: str
    private: bool = False
    #: Whether the token may push (GitHub's ``permissions.push``); None without a token.
    can_push: bool | None = None


@dataclass(frozen=True)
class Comment:
    author: str
    created_at: str
    body: str


@dataclass(frozen=True)
class Issue:
    ref: IssueRef
    repo: Repository
    title: str
    body: str
    state: str
    locked: bool
    html_url: str
    labels: list[str] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)


def fetch_issue(client: GitHub, ref: IssueRef) -> Issue:
    repo = client.repository(ref.full_name)
    path = f"/repos/{ref.full_name}/issues/{ref.number}"
    data = client.get(path, f"the issue {ref}")
    if data.get("pull_request"):
        raise InputError(f"{ref} is a pull request, not an issue: pgs fixes issues")
    comments = (
        client.get_all(f"{path}/comments", f"the comments of {ref}")
        if data.get("comments", 1)
        else []
    )
    return Issue(
        ref=ref,
        repo=repo,
        title=data.get("title") or "",
        body=data.get("body") or "",
        state=data.get("state") or "open",
        locked=bool(data.get("locked")),
        html_url=data.get("html_url") or "",
        labels=[
            label["name"] if isinstance(label, dict) else str(label)
            for label in data.get("labels") or []
        ],
        comments=[
            Comment(
                author=(c.get("user") or {}).get("login", "someone"),
                created_at=(c.get("created_at") or "")[:10],
                body=c.get("body") or "",
            )
            for c in comments
        ],
    )


def problem_statement(issue: Issue) -> str:
    """The title, body, labels and comments, as the Generator and the Tester read them."""
    parts = [issue.title.strip(), issue.body.strip() or "(the issue has no description)"]
    if issue.labels:
        parts.append("Labels: " + ", ".join(issue.labels))
    if issue.comments:
        lines = ["Comments:"]
        for c in issue.comments:
            body = c.body.strip()
            if len(body) > COMMENT_LIMIT:
                body = body[:COMMENT_LIMIT] + "\n[... comment cut ...]"
            when = f" on {c.created_at}" if c.created_at else ""
            lines.append(f"\n@{c.author} wrote{when}:\n{body}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
