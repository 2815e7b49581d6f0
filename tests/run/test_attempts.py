"""``--attempts K``: several Generator attempts, one shared property set, the patch chosen by
the evidence (agent/pgs/attempts.py, agent/pgs/selection.py).

The selection order is tested on records; the whole feature through the real CLI, the scripted
model server and Docker on the bundled median example: three attempts that differ (one
over-fits the issue's example, one breaks a regression, one is right), resumed after the third
failed, and an early stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cli import main
from agent.pgs.selection import VERDICT_ORDER, choose, evidence
from agent.record.attempts import AttemptsRecord, Candidate
from agent.record.check import CheckReport, TestResult
from agent.record.pgs import Verdict
from tests.support.median import MEDIAN
from tests.support.textutil import cli_error

ISSUE_PROP = ".pgs/properties/test_median.py::test_median_of_even_count"
REGRESSION_PROP = ".pgs/properties/test_median.py::test_median_of_odd_count"
REPO_TEST = "tests/test_stats.py::test_median_odd"


def _result(nodeid: str, kind: str, failed: bool = False, example: str = "") -> TestResult:
    return TestResult.model_validate(
        {
            "nodeid": nodeid,
            "kind": kind,
            "outcome": "failed" if failed else "passed",
            "category": "property_violation" if failed else "pass",
            "example": example or None,
        }
    )


def _candidate(
    attempt: int,
    verdict: Verdict,
    *,
    issue_fails: bool = False,
    regression_fails: bool = False,
    repo_fails: bool = False,
    patch_lines: int = 2,
    example: str = "test_median_of_even_count(values=[1, 0])",
) -> Candidate:
    report = CheckReport(
        results=[
            _result(ISSUE_PROP, "issue", issue_fails, example),
            _result(REGRESSION_PROP, "regression", regression_fails, "odd([0, 0, 1])"),
            _result(REPO_TEST, "repo", repo_fails),
        ]
    )
    patch = "".join(f"+line {i}\n" for i in range(patch_lines))
    return evidence(attempt, patch, report, {ISSUE_PROP}, verdict, f"{verdict} because")


# -- the order, on records ---------------------------------------------------------------------


def test_the_verdict_decides_first_and_the_reason_names_it() -> None:
    overfit = _candidate(1, "failed", issue_fails=True)
    breaks = _candidate(2, "failed", regression_fails=True, repo_fails=True)
    right = _candidate(3, "passed", patch_lines=9)
    chosen, reason, ties = choose([overfit, breaks, right])
    assert chosen is right and ties == []
    assert reason.startswith("attempt 3 (passed): over attempt ")
    assert "over attempt 1 by verdict (verdict passed against verdict failed)" in reason


def test_among_failed_patches_more_issue_properties_passed_wins() -> None:
    overfit = _candidate(1, "failed", issue_fails=True)
    breaks = _candidate(2, "failed", regression_fails=True)
    chosen, reason, _ = choose([overfit, breaks])
    assert chosen is breaks
    assert "by issue properties passed (1 of 1 issue properties passed against 0 of 1" in reason


def test_then_fewer_regressions_broken() -> None:
    one = _candidate(1, "failed", issue_fails=True, regression_fails=True, repo_fails=True)
    two = _candidate(2, "failed", issue_fails=True, regression_fails=True)
    chosen, reason, _ = choose([one, two])
    assert chosen is two
    assert "by regression properties and repository tests broken (1 " in reason
    assert two.broken == [REGRESSION_PROP]


def test_then_agreement_on_the_generated_inputs() -> None:
    """Two candidates fail the issue property on the same input, a third on another: the two
    that agree outrank the odd one out, whatever their size."""
    a = _candidate(1, "failed", issue_fails=True, patch_lines=1, example="f(values=[2, 1])")
    b = _candidate(2, "failed", issue_fails=True, patch_lines=5)
    c = _candidate(3, "failed", issue_fails=True, patch_lines=5)
    chosen, reason, ties = choose([a, b, c])
    assert chosen is b and ties == [3]
    assert (a.agreement, b.agreement, c.agreement) == (2, 3, 3)
    assert "over attempt 1 by agreement with the other candidates" in reason
    assert reason.endswith("tied on the evidence with attempt 3")


def test_then_the_smaller_patch_and_a_tie_goes_to_the_earlier_attempt() -> None:
    big = _candidate(1, "passed", patch_lines=6)
    small = _candidate(2, "passed", patch_lines=2)
    same = _candidate(3, "passed", patch_lines=2)
    chosen, reason, ties = choose([big, small, same])
    assert chosen is small and ties == [3]
    assert "over attempt 1 by patch size (2 patch lines against 6 patch lines)" in reason
    assert "over attempt 3 by attempt number" in reason


def test_the_record_keeps_every_candidate_and_reads_back() -> None:
    right = _candidate(1, "passed")
    chosen, reason, ties = choose([right])
    assert chosen is right
    record = AttemptsRecord(candidates=[right], chosen=1, reason=reason, ties=ties, count=3)
    again = AttemptsRecord.model_validate(json.loads(json.dumps(record.model_dump(mode="json"))))
    assert again.candidates[0].verdict == "passed" and again.chosen == 1
    assert "only candidate" in again.reason
    assert "signature" not in record.model_dump(mode="json")["candidates"][0]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["passed", "tests-only", "failed"]),
            st.booleans(),
            st.booleans(),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=5,
    ),
    st.randoms(),
)
def test_the_choice_does_not_depend_on_the_order_the_candidates_come_in(
    specs: list[tuple[str, bool, bool, int]], rnd: Any
) -> None:
    def made() -> list[Candidate]:
        return [
            _candidate(k, verdict, issue_fails=i, regression_fails=r, patch_lines=n)  # type: ignore[arg-type]
            for k, (verdict, i, r, n) in enumerate(specs, start=1)
        ]

    first, reason, _ = choose(made())
    shuffled = made()
    rnd.shuffle(shuffled)
    again, reason_again, _ = choose(shuffled)
    assert first is not None and again is not None
    assert first.attempt == again.attempt and reason == reason_again
    best = min(VERDICT_ORDER.index(v) for v, *_ in specs)
    assert VERDICT_ORDER.index(first.verdict) == best


# -- what users read back: pgs inspect, pgs report ------------------------------------------

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


# -- bad flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--attempts", "0"], "--attempts 0: give 1 or more"),
        (["--attempt-temperatures", "0,hot"], "'hot' is not a number"),
        (["--attempts-stop-on", "great"], "'great' is no verdict"),
    ],
)
def test_bad_attempts_flags_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    from agent.cli import make_example_repo

    repo = make_example_repo(tmp_path / "stats")
    argv = ["run", "--repo", str(repo), "--issue", "median is wrong", "--model", "m", *flags]
    assert says in cli_error(capsys, *argv)


# -- end to end: the real CLI, the scripted server, Docker --------------------------------------

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


# -- the Ray executor's path: the attempt folders travel with the instance's files -------------


def test_a_detached_run_s_attempt_folders_land_in_the_output_folder(tmp_path: Path) -> None:
    """What a Ray task returns (``Finished.files``, by path relative to ``<id>/``) is written
    by the driver as the local run wrote it: the attempt folders beside the main files."""
    from agent.run.config import load_config
    from agent.swebench import Environments, Instance
    from agent.swebench.batch import Batch
    from agent.swebench.instance_run import Finished
    from agent.swebench.progress import Progress

    iid = "acme__lib-1"
    instance = Instance.from_record({"instance_id": iid, "repo": "acme/lib", "base_commit": "a"})
    batch = Batch(
        [instance],
        load_config(None, {"model": {"name": "m"}}),
        tmp_path,
        Environments(tmp_path, {}),
    )
    files = {
        f"{iid}.traj": json.dumps({"info": {"exit_status": "submitted"}}),
        f"{iid}.patch": "",
        f"attempt-1/{iid}.traj": json.dumps({"info": {"exit_status": "submitted"}}),
        f"attempt-1/{iid}.pred": "{}",
    }
    finished = Finished(
        instance_id=iid,
        exit_status="submitted",
        files=files,
        pred=None,
        cost=0.0,
        api_calls=0,
        seconds=1.0,
        worker="node:1",
    )
    assert batch.land(instance, finished, Progress(1, 1, batch.stats)) == "submitted"
    assert (tmp_path / iid / "attempt-1" / f"{iid}.pred").read_text() == "{}"
    assert (tmp_path / iid / f"{iid}.traj").exists()
