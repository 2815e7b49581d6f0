"""``pgs inspect`` on files other writers made: SWE-agent's layout, an older SWE-agent file, a
file with almost nothing in it, a conversation only, a pgs record from before some fields, and
SWE-agent's batch folder with a summary kept elsewhere. Each renders, and the page says what
each lacks.

The test that opens its page in Chromium skips on a machine without it, and FAILS when CI=true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.inspect_pages import (
    SWE_PATCH,
    Browser,
    artifact,
    assert_self_contained,
    facts,
    inspect_cli,
    page_text,
    parse,
    squash,
    swe_agent_traj,
)


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
