"""``--attempts K`` end to end: the real CLI, the scripted model server and Docker on the bundled
median example. Three attempts that differ (one over-fits the issue's example, one breaks a
regression, one is right), resumed after the third failed, and an early stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.record.attempts import AttemptsRecord
from tests.support.attempt_records import REGRESSION_PROP
from tests.support.median import MEDIAN

EXAMPLE = Path(__file__).resolve().parents[2] / "agent" / "examples" / "median"
ORIGINAL = "    return ordered[len(ordered) // 2]\n"
OVERFIT = (  # the issue's example passes; unsorted lists do not
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (values[middle - 1] + values[middle]) / 2\n"
)
BREAKS_ODD = (  # every even count right; every odd count broken
    "    middle = len(ordered) // 2\n    return (ordered[middle - 1] + ordered[middle]) / 2\n"
)
RIGHT = (
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) / 2\n"
)


def _generator(new_str: str) -> list[dict[str, Any]]:
    edit = {"command": "str_replace", "path": "/repo/stats.py"}
    return [
        {
            "content": "I fix median.",
            "tool_calls": [
                {
                    "name": "str_replace_editor",
                    "arguments": {**edit, "old_str": ORIGINAL, "new_str": new_str},
                }
            ],
        },
        {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
    ]


TESTER = [
    {
        "content": "The rules of the issue.",
        "tool_calls": [
            {
                "name": "str_replace_editor",
                "arguments": {
                    "command": "create",
                    "path": "/repo/.pgs/properties/test_median.py",
                    "file_text": MEDIAN,
                },
            }
        ],
    },
    {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
]


def _run(repo: Path, out: Path, steps: list[dict[str, Any]], *flags: str) -> tuple[int, Any]:
    from agent.models.script_server import ScriptedServer

    with ScriptedServer(steps) as server:
        code = main(
            [
                "run",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "issue.md"),
                "--model",
                "scripted",
                "--base-url",
                server.url,
                "--model.prices",
                json.dumps({"scripted": [1e-6, 1e-6]}),
                "--model.retries",
                json.dumps({"attempts": 1}),
                "--rounds",
                "0",
                "--pgs.seed",
                "7",
                "--pgs.check",
                json.dumps({"max_examples": 20, "deadline_ms": 0}),
                "--output-dir",
                str(out),
                *flags,
            ]
        )
        return code, server


def _traj(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.docker
def test_three_attempts_resumed_choose_the_right_patch_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    """Attempt 1 over-fits the issue's example, attempt 2 breaks odd counts, attempt 3 is
    right. The first run ends when the model fails in attempt 3; the second resumes it: the
    first two attempts are kept (the Tester is not asked again), the third runs, and the
    selection check chooses it, by its verdict, over the other two."""
    from agent.cli import make_example_repo

    repo = make_example_repo(tmp_path / "stats")
    out = tmp_path / "out"
    iid = "stats__issue"
    first = [*_generator(OVERFIT), *TESTER, *_generator(BREAKS_ODD)]
    code, _ = _run(repo, out, first, "--attempts", "3")
    err = capsys.readouterr().err
    assert code == 1, err
    assert "script exhausted" in err and "attempt-3" in err
    assert not (out / iid / f"{iid}.pred").exists()  # no choice made yet
    for k in (1, 2):
        assert _traj(out / iid / f"attempt-{k}" / f"{iid}.traj")["info"]["exit_status"] == (
            "submitted"
        )

    code, server = _run(repo, out, _generator(RIGHT), "--attempts", "3")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(server.requests) == 2  # attempt 3's two steps: no Tester, no attempts 1 and 2
    assert "+        return ordered[middle]" in captured.out  # the chosen patch, on stdout
    assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in captured.out
    assert "attempts: 3 of 3 ran" in captured.err
    assert "properties written once, by attempt 1" in captured.err
    assert "chosen: attempt 3 (passed): over attempt " in captured.err
    assert "by verdict (verdict passed against verdict failed)" in captured.err

    main_traj = _traj(out / iid / f"{iid}.traj")
    record = AttemptsRecord.model_validate(main_traj["attempts"])
    assert record.chosen == 3 and record.changed and record.shared_from == 1
    by_k = {c.attempt: c for c in record.candidates}
    assert [by_k[k].verdict for k in (1, 2, 3)] == ["failed", "failed", "passed"]
    assert by_k[1].issue_passed == 0 and by_k[1].broken == []  # over-fit: the issue fails
    assert by_k[2].issue_passed == 1 and REGRESSION_PROP in by_k[2].broken  # a regression
    assert by_k[3].issue_passed == 1 and by_k[3].broken == []
    assert by_k[1].tester_cost > 0 and by_k[2].tester_cost == by_k[3].tester_cost == 0
    assert record.total_cost == pytest.approx(sum(c.cost for c in record.candidates))
    # The later attempts adopted attempt 1's properties: no Tester conversation of their own.
    later = _traj(out / iid / "attempt-3" / f"{iid}.traj")["pgs"]
    assert later["shared_from_attempt"] == 1 and later["tester_turns"] == []
    assert later["verdict"] == "passed"
    pred = _traj(out / iid / f"{iid}.pred")
    assert pred["attempts"] == 3 and pred["attempt_chosen"] == 3 and pred["selection_changed"]
    assert pred["model_patch"] == (out / iid / f"{iid}.patch").read_text()
    assert pred["cost"] == pytest.approx(record.total_cost)


@pytest.mark.docker
def test_attempts_stop_early_once_one_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    """The first attempt passes: the other two never start (their model steps are not asked
    for), and the record says why."""
    from agent.cli import make_example_repo

    repo = make_example_repo(tmp_path / "stats")
    out = tmp_path / "out"
    iid = "stats__issue"
    steps = [*_generator(RIGHT), *TESTER, *_generator(OVERFIT), *_generator(BREAKS_ODD)]
    code, server = _run(repo, out, steps, "--attempts", "3")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(server.requests) == 4  # attempt 1 and its Tester only
    assert "attempts: 1 of 3 ran (attempt 1's verdict is passed (early stop))" in captured.err
    assert not (out / iid / "attempt-2").exists()
    record = AttemptsRecord.model_validate(_traj(out / iid / f"{iid}.traj")["attempts"])
    assert record.ran == 1 and record.chosen == 1 and not record.changed
