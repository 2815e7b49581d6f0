"""``--attempts K``: what users read back. ``pgs inspect`` shows the attempts side by side with
the interdiff; ``pgs report`` counts attempts, changed choices, and where the chosen patch
resolves as an attempt does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.pgs.selection import choose
from agent.record.attempts import AttemptsRecord
from tests.support.attempt_records import _candidate

PATCH_RIGHT = (
    "diff --git a/stats.py b/stats.py\n--- a/stats.py\n+++ b/stats.py\n"
    "@@ -1,3 +1,4 @@\n a = 1\n-b = 2\n+b = 3\n+c = 4\n d = 5\n"
)
PATCH_WRONG = (
    "diff --git a/stats.py b/stats.py\n--- a/stats.py\n+++ b/stats.py\n"
    "@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 9\n d = 5\n"
)


def _run_folder(tmp_path: Path) -> Path:
    """A run folder as `pgs run --attempts 2` writes it (the main files only)."""
    wrong = _candidate(1, "failed", issue_fails=True).model_copy(update={"patch": PATCH_WRONG})
    right = _candidate(2, "passed").model_copy(update={"patch": PATCH_RIGHT, "cost": 0.5})
    chosen, reason, ties = choose([wrong, right])
    assert chosen is right
    record = AttemptsRecord(
        count=2,
        ran=2,
        candidates=[wrong, right],
        chosen=2,
        reason=reason,
        ties=ties,
        shared_from=1,
        changed=True,
        total_cost=0.75,
    )
    iid = "stats__issue"
    folder = tmp_path / "run"
    traj = {
        "trajectory": [],
        "history": [],
        "info": {"exit_status": "submitted", "submission": PATCH_RIGHT},
        "replay_config": {"model": {"name": "m"}, "pgs": {"feedback": "property-min"}},
        "pgs": {"mode": "property-min", "verdict": "passed"},
        "attempts": record.model_dump(mode="json"),
    }
    (folder / iid / "attempt-1").mkdir(parents=True)
    (folder / iid / f"{iid}.traj").write_text(json.dumps(traj))
    (folder / iid / "attempt-1" / f"{iid}.traj").write_text(json.dumps({**traj, "attempts": 0}))
    pred = {"instance_id": iid, "model_name_or_path": "m", "model_patch": PATCH_RIGHT}
    (folder / iid / f"{iid}.pred").write_text(json.dumps(pred))
    return folder


def test_inspect_shows_the_attempts_side_by_side_with_the_interdiff(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path)
    page = tmp_path / "page.html"
    assert main(["inspect", str(folder / "stats__issue"), "-o", str(page)]) == 0
    html = page.read_text()
    assert "Attempts: 2 of 2 ran, attempt 2 chosen" in html
    assert "attempt 2 (chosen)" in html and "over attempt 1 by verdict" in html
    assert "attempt 1: changes from the chosen patch (interdiff)" in html
    assert "b = 9" in html  # the interdiff from the chosen patch to attempt 1's


def test_report_counts_attempts_and_changed_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _run_folder(tmp_path)
    assert main(["report", str(folder), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["attempts"] == {"instances": 1, "total": 2, "changed": 1}
    assert row["cost"]["total"] == pytest.approx(0.75)  # every attempt's cost
    assert main(["report", str(folder)]) == 0
    assert (
        "1 of 1 instances ran several attempts (2 attempts in all); the selection changed "
        "the patch of 1" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("chosen_resolves", "attempts_resolved", "counts", "says"),
    [
        (True, [2], (1, 1), "chosen resolves 1 of 1 where an attempt does"),
        (False, [1], (1, 0), "chosen resolves 0 of 1 where an attempt does"),
        (False, [], (0, 0), "chosen resolves 0 of 0 where an attempt does"),
    ],
)
def test_report_counts_where_the_chosen_patch_resolves_as_an_attempt_does(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    chosen_resolves: bool,
    attempts_resolved: list[int],
    counts: tuple[int, int],
    says: str,
) -> None:
    """The summary `pgs eval --attempts` writes (attempts_resolved) beside the attempts' own
    summaries, which are not taken for the run's even when newer."""
    import os

    folder = _run_folder(tmp_path)
    iid = "stats__issue"
    evals = folder / "eval"
    evals.mkdir()
    summary = {
        "submitted_ids": [iid],
        "resolved_ids": [iid] if chosen_resolves else [],
        "attempts_resolved": {iid: attempts_resolved},
    }
    (evals / "m.t.json").write_text(json.dumps(summary))
    for k in (1, 2):
        resolves = k in attempts_resolved
        attempt = {"submitted_ids": [iid], "resolved_ids": [iid] if resolves else []}
        newer = evals / f"m@attempt-{k}.t.json"
        newer.write_text(json.dumps(attempt))
        os.utime(newer, (2e9, 2e9))
    assert main(["report", str(folder), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    row = result["rows"][0]
    assert result["runs"][0]["eval_report"] == str(evals / "m.t.json")
    assert row["resolved"] == int(chosen_resolves)
    assert row["attempts"] == {
        "instances": 1,
        "total": 2,
        "changed": 1,
        "graded": 1,
        "any_resolved": counts[0],
        "chosen_resolved": counts[1],
    }
    assert main(["report", str(folder)]) == 0
    err = capsys.readouterr().err
    assert f"property-min: {says} (1 instances with their attempts graded)" in err


def test_report_without_graded_attempts_says_nothing_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _run_folder(tmp_path)
    summary = {"submitted_ids": ["stats__issue"], "resolved_ids": ["stats__issue"]}
    (folder / "m.t.json").write_text(json.dumps(summary))
    assert main(["report", str(folder), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["resolved"] == 1 and "graded" not in row["attempts"]
    assert main(["report", str(folder)]) == 0
    assert "where an attempt does" not in capsys.readouterr().err
