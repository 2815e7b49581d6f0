"""Reading the pages ``pgs inspect`` writes, for the tests of tests/inspect/: a small DOM built
from the HTML (as written, or as headless Chromium left it after its scripts ran), the check that
a page loads nothing from anywhere, a headless Chromium to open pages in, and trajectories in
SWE-agent's layout (another writer's files)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI") == "true"
ARTIFACTS = ROOT / "tests" / "artifacts" / "inspect"


# --------------------------------------------------------------------------- a DOM to read


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    @property
    def hidden(self) -> bool:
        node: Node | None = self
        while node is not None:
            if "hidden" in node.attrs:
                return True
            node = node.parent
        return False

    def text(self) -> str:
        """The text a person sees (scripts, styles and hidden elements left out)."""
        if "hidden" in self.attrs or self.tag in ("script", "style", "title"):
            return ""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        found = []
        for child in self.children:
            if isinstance(child, Node):
                if (tag is None or child.tag == tag) and all(
                    (v in child.attrs.get(k.rstrip("_"), "").split())
                    if k.rstrip("_") == "class"
                    else child.attrs.get(k.rstrip("_").replace("_", "-")) == v
                    for k, v in attrs.items()
                ):
                    found.append(child)
                found.extend(child.all(tag, **attrs))
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag} {attrs}> found"
        return found[0]


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class _Builder(HTMLParser):
    def __init__(self, source: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.current = self.root
        self.source = source

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, parent=self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        if self.source and self.current.tag == "pre" and not self.current.children:
            data = data.removeprefix("\n")  # as a browser parses it
        self.current.children.append(data)


def parse(html: str, *, source: bool = True) -> Node:
    """``html`` as a tree; ``source``: a file as written (a browser drops the newline that
    opens a <pre>), not a DOM serialised by the browser (where it is gone already)."""
    builder = _Builder(source)
    builder.feed(html)
    return builder.root


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def facts(tree: Node) -> dict[str, str]:
    """The page's summary: each <dt> with the <dd> after it."""
    out = {}
    for dl in tree.all("dl", class_="facts"):
        items = [c for c in dl.children if isinstance(c, Node)]
        for dt, dd in zip(items[::2], items[1::2], strict=True):
            out[squash(dt.text())] = squash(dd.text())
    return out


# --------------------------------------------------------------------------- self-contained


#: Attributes that make a browser fetch something (or go somewhere on click).
FETCHING = {"src", "srcset", "href", "action", "data", "poster", "background", "formaction"}


REMOTE = re.compile(r"^\s*(https?:|ftp:|//)", re.I)


def assert_self_contained(html: str) -> None:
    """Nothing on the page loads anything from anywhere; links only to files beside it."""
    tree = parse(html)
    for node in tree.all():
        for name, value in node.attrs.items():
            if name in FETCHING:
                assert not REMOTE.match(value), f"<{node.tag} {name}={value!r}>"
        assert not (node.tag == "script" and "src" in node.attrs), "an external script"
        assert not (node.tag == "link" and "stylesheet" in node.attrs.get("rel", "")), (
            "a stylesheet"
        )
        assert node.tag not in ("iframe", "object", "embed", "img", "video", "audio")
    for style in tree.all("style"):
        css = "".join(c for c in style.children if isinstance(c, str))
        assert "@import" not in css and "@font-face" not in css
        assert not re.search(r"url\(", css), "a url() in the stylesheet"
    for script in tree.all("script"):
        js = "".join(c for c in script.children if isinstance(c, str))
        for call in (
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
            "EventSource",
            "sendBeacon",
            "import(",
        ):
            assert call not in js, f"the script may make requests: {call}"
    csp = [m for m in tree.all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0].attrs["content"]


# --------------------------------------------------------------------------- Chromium


@dataclass
class Browser:
    binary: str
    flags: tuple[str, ...] = (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-features=Translate,OptimizationHints,MediaRouter,SpellCheck",
        # Even a request that got out would not resolve.
        "--host-resolver-rules=MAP * ~NOTFOUND",
    )

    def run(self, url: str, *extra: str) -> str:
        with tempfile.TemporaryDirectory(prefix="pgs-chromium-") as profile:
            done = subprocess.run(
                [self.binary, *self.flags, f"--user-data-dir={profile}", *extra, url],
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def dom(self, url: str) -> Node:
        html = self.run(url, "--dump-dom")
        tree = parse(html, source=False)
        assert tree.one("html").attrs.get("data-ready") == "1", "the page's script did not run"
        return tree

    def screenshot(self, url: str, path: Path, size: str = "1280,2000") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run(url, f"--screenshot={path}", f"--window-size={size}")
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
        return path

    def page_requests(self, url: str) -> list[str]:
        """URLs the page asked for (the browser's own background requests left out), from
        Chromium's network log."""
        with tempfile.TemporaryDirectory(prefix="pgs-netlog-") as tmp:
            log = Path(tmp) / "net.json"
            self.run(url, f"--log-net-log={log}", "--dump-dom")
            data = json.loads(log.read_text())
        names = {v: k for k, v in data["constants"]["logEventTypes"].items()}
        return [
            e["params"]["url"]
            for e in data["events"]
            if names.get(e["type"]) == "URL_REQUEST_START_JOB"
            and "url" in e.get("params", {})
            and e["params"].get("initiator") != "not an origin"
        ]


def artifact(name: str) -> Path:
    """``tests/artifacts/inspect/<name>``; the folder keeps itself out of git."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ignore = ARTIFACTS.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# screenshots and pages the tests save for people to look at\n*\n")
    return ARTIFACTS / name


def inspect_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Path:
    """``pgs inspect ARGV``: exit code 0, and the page it says it wrote."""
    capsys.readouterr()
    code = main(["inspect", *argv])
    out, err_text = capsys.readouterr()
    assert code == 0, err_text
    match = re.match(r"wrote (.+?\.html) \(", out)
    assert match, out
    page = Path(match.group(1))
    assert page.is_file()
    return page


# --------------------------------------------------------------------------- other writers


SWE_PATCH = (
    "diff --git a/src/timedelta.py b/src/timedelta.py\r\n"
    "--- a/src/timedelta.py\r\n+++ b/src/timedelta.py\r\n"
    "@@ -1,3 +1,3 @@\r\n def serialize(value, unit):\r\n"
    "-    return int(value / unit)\r\n+    return int(round(value / unit))\r\n"
    " # end\r\n"
)


def swe_agent_traj() -> dict[str, Any]:
    """A trajectory in SWE-agent 1.x's layout, written from its documented format
    (``sweagent/types.py``: TrajectoryStep, HistoryItem, AgentInfo; ``replay_config`` as JSON)."""
    issue = (
        "TimeDelta serialization precision\n\n`serialize(345, 1000)` returns 0, not 0.345 rounded."
    )
    replay = {
        "agent": {"model": {"name": "gpt-4o", "per_instance_cost_limit": 2.0}},
        "problem_statement": {"text": issue, "id": "marshmallow-1867", "type": "text"},
        "env": {"deployment": {"type": "docker"}},
    }
    steps = [
        ("find_file timedelta.py", "Found 1 matches:\r\n/testbed/src/timedelta.py\r\n"),
        ("open src/timedelta.py", "[File: src/timedelta.py (3 lines total)]\r\n1:def serialize"),
        ("edit 2:2\n    return int(round(value / unit))\nend_of_edit", "File updated."),
        ("submit", SWE_PATCH),
    ]
    return {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": action,
                "observation": observation,
                "response": f"I run {action.split()[0]}.",
                "thought": f"I run {action.split()[0]}.",
                "execution_time": "0.25",  # older files write a string
                "state": {"open_file": "/testbed/src/timedelta.py", "working_dir": "/testbed"},
                "query": [{"role": "system", "content": "You are an autonomous programmer"}],
                "extra_info": {},
            }
            for action, observation in steps
        ],
        "history": [
            {
                "role": "system",
                "content": "SETTING: ...",
                "agent": "main",
                "message_type": "system_prompt",
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"<pr_description>\n{issue}\n</pr_description>"}
                ],
                "agent": "main",
                "message_type": "observation",
            },
        ],
        "info": {
            "exit_status": "submitted (exit_cost)",
            "submission": SWE_PATCH,
            "model_stats": {
                "instance_cost": 2.01,
                "tokens_sent": 401_000,
                "tokens_received": 3_100,
                "api_calls": 4,
            },
            "swe_agent_version": "1.1.0",
        },
        "replay_config": json.dumps(replay),
    }


def page_text(page: Path) -> str:
    return squash(parse(page.read_text()).one("body").text())
