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

Other writers' files are in test_inspect_foreign.py, a large run in test_inspect_large.py, the
command's flags in test_inspect_command.py, diffs in test_inspect_diff.py and the loaders in
test_inspect_load.py.

Tests that need Chromium or Docker skip on a machine without them, and FAIL when CI=true.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.inspect_pages import (
    Browser,
    artifact,
    assert_self_contained,
    inspect_cli,
    squash,
)
from tests.support.swe_dataset import Dataset, batch_args, make_dataset

TESTER_PROMPT = "You are a test engineer"
MODEL = "scripted"


# --------------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def demo(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo's run folder (the recorded model, Docker, the Tester's properties): a
    copy of the suite's one (tests/conftest.py), which the pages are written beside."""
    return Path(shutil.copytree(demo_run, tmp_path_factory.mktemp("demo") / demo_run.name))


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
    # Shrunk from the run's own random draw: a minimal four-element list of 0s and 1s, [0, 0, 1,
    # 0] or [1, 0, 0, 1] (both local minima; tests/cli/test_ladder.py says why).
    assert re.search(r"values=\[[01](, [01]){3}\]", first["selection"]["chosen"]["example"])
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
