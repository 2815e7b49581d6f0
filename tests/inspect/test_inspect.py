"""``pgs inspect``: what a person sees in a real browser, from real runs.

- The demo (``pgs demo``: the scripted model, Docker, the Tester's Hypothesis property) and a
  two-instance ``pgs batch`` graded by ``pgs eval`` are run once each; their pages are opened in
  headless Chromium (Debian's ``chromium``, installed by ``.ci/setup``) and the DOM after the
  scripts ran is read: the step count, the counterexample, the feedback as sent, the verdict,
  the batch table, its links, sorting and filtering. Screenshots are saved under
  ``tests/artifacts/inspect/`` (git-ignored by the ``.gitignore`` the suite writes there).
- No network: every page is parsed for URLs that would load anything, and Chromium's own
  network log is read for requests the page made (with a control page that does make one, so
  the check is known to see them).
- SWE-agent's layout, an older SWE-agent file and a file with almost nothing in it render, and
  the page says what each lacks.
- A 300-step run with 1 MB outputs: the page stays under 5 MB, outputs are folded and cut, and
  each cut links to a file holding the whole output (the time is measured in bench/inspector.py,
  not here).
- The command: bad PATHs are one error line; ``--serve`` serves the page over HTTP; ``--open``
  uses ``$BROWSER`` and says so when there is no browser.

Tests that need Chromium or Docker skip on a machine without them, and FAIL when CI=true.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cli import main
from agent.inspect.diff import interdiff, parse_diff
from agent.inspect.html import OBSERVATION_LIMIT
from agent.models.script_server import ScriptedServer
from tests.support.swe_dataset import Dataset, batch_args, make_dataset

ROOT = Path(__file__).resolve().parents[2]
PGS = [sys.executable, "-m", "agent.cli"]
IN_CI = os.environ.get("CI") == "true"
ARTIFACTS = ROOT / "tests" / "artifacts" / "inspect"
TESTER_PROMPT = "You are a test engineer"
MODEL = "scripted"


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


@pytest.fixture(scope="session")
def browser() -> Browser:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Browser(found)
    if IN_CI:
        pytest.fail("chromium is required in CI: .ci/setup installs it (apt-get install chromium)")
    pytest.skip("no chromium here: apt-get install --no-install-recommends chromium")


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


# --------------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    """The bundled demo's run folder: the recorded model, Docker, the Tester's properties."""
    out = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)
        mp.delenv("OPENAI_BASE_URL", raising=False)
        assert main(["demo", "--output-dir", str(out)]) == 0
    return out / "stats__issue"


SLUG_PROPERTY = """import pytest
from hypothesis import given
from hypothesis import strategies as st

from textkit.core import slugify


@pytest.mark.pgs_issue("slugify lower-cases every word")
@given(st.lists(st.text("abXY", min_size=1), min_size=1, max_size=4))
def test_slugify_lowercases(words):
    out = slugify(" ".join(words))
    assert out == out.lower(), f"returned {out!r}, expected {out.lower()!r}"
"""
COUNT_PROPERTY = """import pytest
from hypothesis import given
from hypothesis import strategies as st

from textkit.core import count_words


@pytest.mark.pgs_issue("count_words counts the words between any run of spaces")
@given(st.lists(st.text("ab", min_size=1), min_size=1, max_size=4), st.integers(1, 3))
def test_count_words(words, gap):
    out = count_words((" " * gap).join(words))
    assert out == len(words), f"returned {out!r}, expected {len(words)!r}"
"""
#: textkit-1: lower-cases but joins with "_" (a repository test breaks), then the right fix.
SLUG_WRONG = ('"-".join(text.split())', '"_".join(text.lower().split())')
SLUG_RIGHT = ('"_".join(text.lower().split())', '"-".join(text.lower().split())')


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": f"{name}.", "tool_calls": [{"name": name, "arguments": arguments}]}


def batch_policy(request: dict[str, Any]) -> dict[str, Any]:
    """Tester: one issue property for its issue, then submit. Generator: textkit-1 fixes it
    wrongly, then rightly after the feedback; textkit-2 submits without changing anything."""
    messages = request["messages"]
    replies = sum(m["role"] == "assistant" for m in messages)
    slug = "slugify" in str(messages[1]["content"])
    if str(messages[0]["content"]).startswith(TESTER_PROMPT):
        if replies == 0:
            name, text = (
                ("test_slug.py", SLUG_PROPERTY) if slug else ("test_count.py", COUNT_PROPERTY)
            )
            command = f"mkdir -p .pgs/properties && cat > .pgs/properties/{name} <<'EOF'\n{text}EOF"
            return call("bash", command=command)
        return call("submit")
    if not slug:
        return call("submit")
    path = "/testbed/textkit/core.py"
    edits = [
        call("str_replace_editor", command="str_replace", path=path, old_str=a, new_str=b)
        for a, b in (SLUG_WRONG, SLUG_RIGHT)
    ]
    steps = [edits[0], call("submit"), edits[1]]
    return steps[replies] if replies < len(steps) else call("submit")


@dataclass
class BatchRun:
    out: Path
    dataset: Dataset


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> BatchRun:
    """``pgs batch`` over both test instances (one feedback round), graded by ``pgs eval``."""
    dataset = make_dataset(tmp_path_factory.mktemp("swe"))
    out = tmp_path_factory.mktemp("batch") / "run"
    common = ["--instances", str(dataset.instances_file), "--repos-dir", str(dataset.repos_dir)]
    with ScriptedServer(batch_policy) as server:
        code = main(
            batch_args(dataset, server.url, out, "--rounds", "1", feedback=None, model=MODEL)
        )
    assert code == 0
    code = main(
        [
            "eval",
            "--predictions",
            str(out / "preds.json"),
            *common,
            "--report-dir",
            str(out / "eval"),
            "--run-id",
            "inspect",
        ]
    )
    assert code == 0
    return BatchRun(out, dataset)


# --------------------------------------------------------------------------- the demo's page


@pytest.mark.docker
def test_the_demo_page_shows_its_steps_counterexample_feedback_and_verdict(
    demo: Path, browser: Browser, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((demo / "stats__issue.traj").read_text())
    page = inspect_cli(capsys, str(demo))
    assert page == demo / "stats__issue.html"  # the default: beside the .traj
    html = page.read_text()
    assert_self_contained(html)

    dom = browser.dom(page.as_uri())
    body = dom.one("body")
    steps = data["trajectory"]
    assert squash(body.one(id="step-count").text()) == f"{len(steps)} steps"
    assert len(dom.one(id="step-list").all("section", class_="step")) == len(steps)
    for step in steps:  # every action, as the model sent it
        assert step["action"].strip().splitlines()[0] in body.text()
    assert squash(body.one(id="verdict").text()) == f"verdict: {data['pgs']['verdict']}"
    assert data["pgs"]["verdict"] == "passed"
    assert squash(data["pgs"]["verdict_reason"]) in squash(body.one(id="pgs-verdict").text())

    # Round 1: the failure that was fed back, its shrunk counterexample, and the message.
    first = data["pgs"]["rounds"][0]
    round1 = dom.one(id="round-1")
    chosen = round1.one("tr", class_="chosen")
    assert first["selection"]["chosen"]["example"] in chosen.text()
    assert "values=[0, 0, 1, 0]" in first["selection"]["chosen"]["example"]
    assert "★ chosen" in chosen.text()
    assert squash(first["selection"]["why"]) in squash(round1.text())
    sent = round1.one("div", class_="feedback").all("pre")[0].text()
    assert sent == first["feedback"]  # the message as the Generator got it, whole
    history = [m["content"] for m in data["history"] if m.get("message_type") == "feedback"]
    assert history == [first["feedback"]]
    # Round 2: what changed since round 1, as a diff, and its verdict.
    round2 = dom.one(id="round-2")
    removed = [squash(r.text()) for r in round2.all("tr", class_="removed")]
    added = [squash(r.text()) for r in round2.all("tr", class_="added")]
    assert any("(values[middle - 1] + values[middle])" in r for r in removed)
    assert any("(ordered[middle - 1] + ordered[middle])" in a for a in added)
    assert "passed" in round2.one("h3").text()

    # The properties with their rule sentences, kind and status; the final diff; the chart.
    for nodeid in data["pgs"]["validation"]["kept"]:
        row = next(r for r in dom.all("tr", class_="property") if nodeid in r.text())
        assert "kept" in row.text()
    rule = data["pgs"]["validation"]["report"]["results"][0]["rule"]
    assert rule in body.text()
    assert any(
        "return (ordered[middle - 1] + ordered[middle]) / 2" in r.text()
        for r in dom.all("tr", class_="added")
    )
    chart = next(s for s in dom.all("svg") if s.attrs.get("aria-label") == "tokens per step")
    assert len(chart.all("rect")) == len(steps)

    shot = browser.screenshot(page.as_uri(), artifact("demo.png"), size="1280,2600")
    assert shot.is_file()
    shutil.copy(page, artifact("demo.html"))


@pytest.mark.docker
def test_the_page_makes_no_network_request(demo: Path, browser: Browser, tmp_path: Path) -> None:
    page = demo / "stats__issue.html"
    if not page.exists():
        assert main(["inspect", str(demo)]) == 0
    assert browser.page_requests(page.as_uri()) == []
    # The control: a page that does load an image is seen doing it.
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://pgs-inspect.invalid/x.png"></body></html>')
    assert browser.page_requests(control.as_uri()) == ["http://pgs-inspect.invalid/x.png"]


@pytest.mark.docker
def test_the_filter_hides_the_steps_that_do_not_match(
    demo: Path, browser: Browser, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((demo / "stats__issue.traj").read_text())
    page = inspect_cli(capsys, str(demo / "stats__issue.traj"))
    needle = "pytest"
    expected = [
        i + 1
        for i, s in enumerate(data["trajectory"])
        if needle in (s["action"] + s["observation"] + s["thought"]).lower()
    ]
    assert 0 < len(expected) < len(data["trajectory"])
    dom = browser.dom(page.as_uri() + f"?q={needle}")
    steps = dom.one(id="step-list").all("section", class_="step")
    shown = [int(s.attrs["id"].split("-")[1]) for s in steps if not s.hidden]
    assert shown == expected
    count = squash(dom.one(id="q-count").text())
    assert count == f"{len(expected)} of {len(steps)} steps match"


# --------------------------------------------------------------------------- a batch


@pytest.mark.docker
def test_the_batch_page_lists_every_instance_with_its_results_and_links(
    batch_run: BatchRun, browser: Browser, capsys: pytest.CaptureFixture[str]
) -> None:
    out = batch_run.out
    index = inspect_cli(capsys, str(out))
    assert index == out / "inspect" / "index.html"
    assert_self_contained(index.read_text())
    preds = json.loads((out / "preds.json").read_text())
    summary = json.loads((out / "eval" / f"{MODEL}.inspect.json").read_text())
    trajs = {iid: json.loads((out / iid / f"{iid}.traj").read_text()) for iid in preds}
    assert summary["resolved_ids"] == ["acme__textkit-1"]
    assert summary["empty_patch_ids"] == ["acme__textkit-2"]

    dom = browser.dom(index.as_uri())
    rows = dom.one(id="rows").all("tr")
    assert [r.attrs["data-id"] for r in rows] == sorted(preds)
    expected_resolved = {"acme__textkit-1": "resolved", "acme__textkit-2": "empty patch"}
    for row in rows:
        iid = row.attrs["data-id"]
        cells = [squash(c.text()) for c in row.all("td")]
        instance, status, steps, _cost, _time, verdict, mode, rounds, resolved = cells
        assert instance == iid
        assert status == trajs[iid]["info"]["exit_status"] == "submitted"
        assert int(steps) == len(trajs[iid]["trajectory"])
        assert verdict == preds[iid]["pgs_verdict"]
        assert mode == preds[iid]["pgs_mode"] == "property-min"
        assert int(rounds) == preds[iid]["pgs_rounds"] == 1
        assert float(row.all("td")[3].attrs["data-v"]) == pytest.approx(preds[iid]["cost"])
        assert resolved == expected_resolved[iid]
        # Its link works from file:// and leads to its own page.
        href = row.one("a").attrs["href"]
        target = Path(unquote(urlparse(urljoin(index.as_uri(), href)).path))
        assert target.is_file() and target.parent == index.parent
        assert squash(browser.dom(target.as_uri()).one("h1").text()) == iid
    assert {preds[i]["pgs_verdict"] for i in preds} == {"passed", "failed"}

    totals = squash(dom.one(id="totals").text())
    assert "2 instances" in totals and "1/2 resolved" in totals
    for label in ("histogram of cost", "histogram of steps"):
        svg = next(s for s in dom.all("svg") if s.attrs.get("aria-label") == label)
        titles = ["".join(map(str, r.one("title").children)) for r in svg.all("rect")]
        counts = [int(t.rsplit(": ", 1)[1].split()[0]) for t in titles]
        assert sum(counts) == 2, titles

    # Sorted by steps, most first; filtered by a word of one row.
    by_steps = sorted(preds, key=lambda i: len(trajs[i]["trajectory"]), reverse=True)
    assert len({len(t["trajectory"]) for t in trajs.values()}) == 2
    sorted_dom = browser.dom(index.as_uri() + "?sort=steps&order=desc")
    assert [r.attrs["data-id"] for r in sorted_dom.one(id="rows").all("tr")] == by_steps
    filtered = browser.dom(index.as_uri() + "?q=empty+patch")
    visible = [r.attrs["data-id"] for r in filtered.one(id="rows").all("tr") if not r.hidden]
    assert visible == ["acme__textkit-2"]

    # The instance that drew a feedback round shows it, and the failed one says why.
    page1 = browser.dom((index.parent / "acme__textkit-1.html").as_uri())
    first = trajs["acme__textkit-1"]["pgs"]["rounds"][0]
    assert (
        first["feedback"]
        == page1.one(id="round-1").one("div", class_="feedback").all("pre")[0].text()
    )
    page2 = browser.dom((index.parent / "acme__textkit-2.html").as_uri())
    assert "no feedback: all 1 rounds used" in page2.one(id="round-2").text()
    browser.screenshot(index.as_uri(), artifact("batch.png"), size="1280,1000")


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


def test_a_swe_agent_trajectory_renders_with_what_it_lacks(
    tmp_path: Path, browser: Browser, capsys: pytest.CaptureFixture[str]
) -> None:
    traj = tmp_path / "marshmallow-1867" / "marshmallow-1867.traj"
    traj.parent.mkdir()
    traj.write_text(json.dumps(swe_agent_traj()))
    page = inspect_cli(capsys, str(traj), "-o", str(tmp_path / "pages"))
    assert page == tmp_path / "pages" / "marshmallow-1867.html"
    assert_self_contained(page.read_text())
    dom = browser.dom(page.as_uri())
    body = dom.one("body")
    assert squash(dom.one("h1").text()) == "marshmallow-1867"
    assert squash(body.one(id="step-count").text()) == "4 steps"
    assert "`serialize(345, 1000)` returns 0" in body.text()  # the issue, cut out of its tags
    assert "<pr_description>" not in body.text()
    assert "submitted (exit_cost)" in body.text() and "cost limit" in body.text()
    assert "gpt-4o" in body.text() and "$2.00" in body.text()  # the model and its cost limit
    added = [squash(r.one("td", class_="code").text()) for r in dom.all("tr", class_="added")]
    assert added == ["+ return int(round(value / unit))"]
    assert facts(dom)["written by"].startswith("swe-agent")
    assert facts(dom)["limit hit"] == "cost limit"
    assert "missing: pgs" in body.one(id="pgs").parent.text()  # type: ignore[union-attr]
    browser.screenshot(page.as_uri(), artifact("swe-agent.png"))


def test_older_and_foreign_files_render_and_say_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SWE-agent 0.7: no replay_config, no execution_time, a state as a string, the issue
    # inside its instance template, a demonstration before it.
    older = {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "ls\n",
                "observation": "setup.py\n",
                "response": "Look.",
                "thought": "Look.",
                "state": '{"open_file": "n/a", "working_dir": "/repo"}\n',
            },
        ],
        "history": [
            {"role": "user", "content": "demonstration", "is_demo": "True", "agent": "primary"},
            {
                "role": "user",
                "content": "ISSUE:\nls is empty\n\nINSTRUCTIONS:\nfix it",
                "agent": "primary",
            },
        ],
        "info": {
            "exit_status": "submitted",
            "submission": "",
            "model_stats": {"total_cost": 0.5, "instance_cost": 0.5},
        },
    }
    path = tmp_path / "older.traj"
    path.write_text(json.dumps(older))
    text = page_text(inspect_cli(capsys, str(path)))
    assert "1 step" in text and "ls is empty" in text and "fix it" not in text
    assert "missing: replay_config (the run's configuration)" in text
    assert "missing: execution_time (in 1 of 1 steps)" in text
    assert "working_dir: /repo" in text

    # Almost nothing: steps without thoughts or outputs, no info, no history.
    bare = tmp_path / "bare.traj"
    bare.write_text(json.dumps({"trajectory": [{"action": "ls"}, "not a step"]}))
    text = page_text(inspect_cli(capsys, str(bare)))
    for note in (
        "missing: info (exit status, submission, model stats)",
        "missing: history (the conversation)",
        "missing: the issue text",
        "missing: info.exit_status",
        "missing: info.submission",
        "missing: observation (in 1 of 2 steps)",
        "missing: the step itself (not a JSON object) (in 1 of 2 steps)",
        "missing: pgs",
    ):
        assert note in text, note
    assert "2 steps" in text

    # A conversation only: the steps are rebuilt from it, and the page says so.
    chat = tmp_path / "chat.traj"
    chat.write_text(
        json.dumps(
            {
                "history": [
                    {"role": "user", "content": "<issue>\nthe bug\n</issue>"},
                    {"role": "assistant", "content": "Look.", "action": "ls"},
                    {"role": "user", "content": "a.py"},
                ]
            }
        )
    )
    tree = parse(inspect_cli(capsys, str(chat)).read_text())
    assert "missing: trajectory (the steps); shown from the history instead" in page_text(
        chat.with_suffix(".html")
    )
    step = tree.one("section", id="step-1")
    assert [p.text() for p in step.all("pre")] == ["Look.", "ls", "a.py"]

    # A pgs file from before some fields: rounds without reports or selections.
    old_pgs = {
        "trajectory": [],
        "history": [],
        "info": {"exit_status": "submitted", "submission": ""},
        "replay_config": {"sandbox": {}, "tools": {}},
        "pgs": {"mode": "property-min", "rounds": [{"round": 1, "feedback": "Round 1 of 5."}]},
    }
    path = tmp_path / "old-pgs.traj"
    path.write_text(json.dumps(old_pgs))
    text = page_text(inspect_cli(capsys, str(path)))
    for note in (
        "missing: pgs.verdict",
        "missing: pgs.validation (which properties were kept and why)",
        "missing: the candidate's patch",
        "missing: the check's report (which tests ran and failed)",
        "missing: info.model_stats (tokens and cost)",
    ):
        assert note in text, note
    assert "Round 1 of 5." in text


def test_a_swe_agent_batch_folder_and_a_summary_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SWE-agent's batch layout (``<id>/<id>.traj``, preds.json, results.json beside them),
    with one unreadable trajectory and one prediction whose trajectory is gone."""
    batch = tmp_path / "swe-run"
    for iid in ("a__x-1", "a__x-2", "a__x-3"):
        (batch / iid).mkdir(parents=True)
    (batch / "a__x-1" / "a__x-1.traj").write_text(json.dumps(swe_agent_traj()))
    (batch / "a__x-2" / "a__x-2.traj").write_text("{ cut short")
    preds = {
        iid: {"instance_id": iid, "model_name_or_path": "gpt-4o", "model_patch": SWE_PATCH}
        for iid in ("a__x-1", "a__x-2", "a__x-3")
    }
    (batch / "preds.json").write_text(json.dumps(preds))
    results = {
        "resolved_ids": ["a__x-1"],
        "unresolved_ids": ["a__x-3"],
        "submitted_ids": list(preds),
    }
    (batch / "results.json").write_text(json.dumps(results))
    index = inspect_cli(capsys, str(batch), "-o", str(tmp_path / "pages"))
    assert index == tmp_path / "pages" / "index.html"
    tree = parse(index.read_text())
    rows = {r.attrs["data-id"]: r for r in tree.one(id="rows").all("tr")}
    assert list(rows) == ["a__x-1", "a__x-2", "a__x-3"]
    cells = {iid: [squash(c.text()) for c in row.all("td")] for iid, row in rows.items()}
    assert cells["a__x-1"][1:4] == ["submitted (exit_cost)", "4", "$2.01"]
    assert cells["a__x-1"][-1] == "resolved"
    assert "missing: a readable trajectory" in cells["a__x-2"][0]
    assert "missing: the trajectory (a__x-3/a__x-3.traj)" in cells["a__x-3"][0]
    assert cells["a__x-3"][-1] == "unresolved"
    assert (tmp_path / "pages" / "a__x-1.html").is_file()
    assert not (tmp_path / "pages" / "a__x-2.html").exists()

    # Our own summary, kept elsewhere, given with --eval (it wins over results.json).
    summary = tmp_path / "logs" / "gpt-4o.run7.json"
    summary.parent.mkdir()
    summary.write_text(
        json.dumps(
            {
                **results,
                "resolved_ids": [],
                "error_ids": ["a__x-1"],
                "errors": {"a__x-1": "patch does not apply"},
            }
        )
    )
    index = inspect_cli(
        capsys, str(batch), "-o", str(tmp_path / "pages"), "--eval", str(summary.parent)
    )
    row = parse(index.read_text()).one("tr", data_id="a__x-1")
    assert squash(row.all("td")[-1].text()) == "error patch does not apply"
    assert str(summary) in page_text(index)


# --------------------------------------------------------------------------- large runs


def test_a_300_step_run_with_1_mb_outputs_stays_small_and_links_every_full_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def output(i: int) -> str:
        line = f"step {i:03d}: " + "x" * 50 + "\n"
        return (line * (1_000_000 // len(line) + 1))[:1_000_000]

    steps = 300
    data = {
        "trajectory": [
            {
                "action": f"cat big_{i}.log",
                "observation": output(i),
                "thought": f"Read log {i}.",
                "response": f"Read log {i}.",
                "execution_time": 0.1,
                "state": {},
            }
            for i in range(1, steps + 1)
        ],
        "history": [{"role": "user", "content": "<issue>\nlogs are long\n</issue>"}],
        "info": {
            "exit_status": "submitted",
            "submission": "",
            "model_stats": {"instance_cost": 1.0},
        },
        "replay_config": {},
    }
    traj = tmp_path / "big" / "big.traj"
    traj.parent.mkdir()
    traj.write_text(json.dumps(data))
    del data
    try:
        page = inspect_cli(capsys, str(traj))
        html = page.read_text()
        assert len(html.encode()) < 5_000_000
        dom = parse(html)
        sections = dom.one(id="step-list").all("section", class_="step")
        assert len(sections) == steps
        for i, section in enumerate(sections, start=1):
            details = section.one("details")
            assert "open" not in details.attrs  # folded
            head, tail = (p.text() for p in details.all("pre"))  # the start and the end
            whole = output(i)
            assert whole.startswith(head) and whole.endswith(tail) and head and tail
            assert len(head) + len(tail) <= OBSERVATION_LIMIT
            cut = details.one("p", class_="cut")
            assert "not shown here" in cut.text()
            link = cut.one("a").attrs["href"]
            full = Path(unquote(urlparse(urljoin(page.as_uri(), link)).path))
            assert full.parent == page.with_name("big.files")
            if i in (1, 150, steps):  # read whole: the full text, as the run recorded it
                assert full.read_text(encoding="utf-8-sig") == output(i)
            else:
                assert full.stat().st_size == 1_000_000 + 3  # and its BOM
    finally:
        shutil.rmtree(tmp_path / "big", ignore_errors=True)


# --------------------------------------------------------------------------- the command


def test_what_cannot_be_inspected_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_json = tmp_path / "notes.traj"
    not_json.write_text("not json")
    other_json = tmp_path / "config.json"
    other_json.write_text('{"model": "gpt-4o"}')
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        str(tmp_path / "nowhere"): "does not exist",
        str(not_json): "is not JSON",
        str(other_json): "is JSON but not a trajectory",
        str(empty): "holds no .traj file and no preds.json",
    }
    for path, words in cases.items():
        capsys.readouterr()
        assert main(["inspect", path]) == 2
        out, err_text = capsys.readouterr()
        lines = err_text.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pgs: error: ") and words in lines[0]
        assert out == ""
    assert list(tmp_path.glob("**/*.html")) == []


def small_traj(folder: Path) -> Path:
    data = swe_agent_traj()
    data["trajectory"][1]["observation"] = "line\n" * 2000  # long: cut, with its full text
    path = folder / "run" / "run.traj"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def pgs_process() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_serves_the_page_and_its_full_texts_on_localhost(
    tmp_path: Path, pgs_process: list[subprocess.Popen[str]]
) -> None:
    traj = small_traj(tmp_path)
    proc = subprocess.Popen(
        [*PGS, "inspect", str(traj), "--serve", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pgs_process.append(proc)
    assert proc.stdout is not None
    wrote = proc.stdout.readline()
    assert wrote.startswith(f"wrote {traj.with_suffix('.html')}")
    serving = proc.stdout.readline()
    match = re.match(r"serving (http://127\.0\.0\.1:(\d+)/run\.html) \(Ctrl-C stops\)", serving)
    assert match, serving
    with urllib.request.urlopen(match.group(1), timeout=10) as response:
        html = response.read().decode()
    assert response.status == 200 and "marshmallow-1867" in html
    link = parse(html).one("p", class_="cut").one("a").attrs["href"]
    with urllib.request.urlopen(urljoin(match.group(1), link), timeout=10) as response:
        assert response.read().decode("utf-8-sig") == "line\n" * 2000
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert "stopped" in proc.stderr.read()  # type: ignore[union-attr]


def test_open_uses_the_browser_there_is_and_says_when_there_is_none(tmp_path: Path) -> None:
    traj = small_traj(tmp_path)
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "browser.py"
    fake.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "TERM")}
    done = subprocess.run(
        [*PGS, "inspect", str(traj), "--open"],
        cwd=ROOT,
        env={**env, "BROWSER": f"{sys.executable} {fake} %s"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert opened.read_text() == traj.with_suffix(".html").resolve().as_uri()

    env.pop("BROWSER", None)
    bare = tmp_path / "bin"  # git (GitPython wants it), and no browser
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    done = subprocess.run(
        [*PGS, "inspect", str(traj), "--open"],
        cwd=ROOT,
        env={**env, "PATH": str(bare)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "no web browser found here; open file://" in done.stderr


# --------------------------------------------------------------------------- diffs


LINES = st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=25)


def unified(old: list[str], new: list[str]) -> str:
    lines = difflib.unified_diff(old, new, "a/f.py", "b/f.py", n=3, lineterm="")
    text = "\n".join(lines)
    return text + "\n" if text else ""


def apply(lines: list[str], patch: str) -> list[str]:
    """A patch applied by the line numbers it states (what git apply does without fuzz)."""
    diff = parse_diff(patch)
    out = list(lines)
    for file in diff.files:
        for hunk in reversed(file.hunks):
            start = int(re.match(r"@@ -(\d+),(\d+)", hunk.header).group(1))  # type: ignore[union-attr]
            source = [line.text for line in hunk.lines if line.kind in ("context", "removed")]
            target = [line.text for line in hunk.lines if line.kind in ("context", "added")]
            at = start - 1 if source else start
            assert out[at : at + len(source)] == source
            out[at : at + len(source)] = target
    return out


@given(base=LINES, first=LINES, second=LINES)
def test_the_change_between_two_candidates_turns_one_into_the_other(
    base: list[str], first: list[str], second: list[str]
) -> None:
    change = interdiff(unified(base, first), unified(base, second))
    assert apply(first, change) == second
    if first == second:
        assert change == ""


@given(old=LINES, new=LINES)
def test_a_parsed_diff_counts_and_numbers_its_lines(old: list[str], new: list[str]) -> None:
    diff = parse_diff(unified(old, new))
    assert diff.error is None
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    if old == new:
        assert diff.empty and diff.files == []
        return
    added = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in ("insert", "replace"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in ("delete", "replace"))
    assert (diff.added, diff.removed) == (added, removed)
    for line in (x for f in diff.files for h in f.hunks for x in h.lines):
        if line.old is not None:
            assert old[line.old - 1] == line.text
        if line.new is not None:
            assert new[line.new - 1] == line.text


def test_the_loaders_stay_importable_from_agent_inspect_load() -> None:
    """load.py re-exports what moved to trajectory_view.py and batch_view.py (issues 14, 34)."""
    import agent.inspect
    from agent.inspect import batch_view as batch
    from agent.inspect import lenient as fields
    from agent.inspect import trajectory_view as trajectory

    load = importlib.import_module("agent.inspect.load")  # the package's `load` is the function
    assert load.load_trajectory is trajectory.load_trajectory is agent.inspect.load_trajectory
    assert load.load_batch is batch.load_batch and load.InspectError is fields.InspectError
    assert all(hasattr(load, name) for name in load.__all__)


def test_a_batch_row_with_a_damaged_pgs_record_still_loads(tmp_path: Path) -> None:
    """A hand-edited or truncated record (a round that is not a table) must not stop the batch
    page: the row keeps what the trajectory itself says."""
    from agent.inspect.batch_view import load_batch

    data = json.loads((ROOT / "tests" / "data" / "pgs-demo-bce24f8.traj").read_text())
    data["pgs"]["rounds"] = ["not a round"]
    run = tmp_path / "batch" / "median-1"
    run.mkdir(parents=True)
    (run / "median-1.traj").write_text(json.dumps(data))
    [row] = load_batch(tmp_path / "batch").rows
    assert row.instance_id == "median-1"
    assert row.exit_status == "submitted"
