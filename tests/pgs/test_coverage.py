"""How much of a check ran, and what it is compared with: the test command gets a baseline on
the original code like the related test files, and a check cut by its time budget to a small
share of its related test files is ``partial``, which ``--open-pr`` refuses without ``--force``.

PGS itself (:class:`agent.pgs.reviewer.PGS`) in a real Docker sandbox of the DEDUPE repository,
the Tester's properties written beforehand (no Tester conversation: the model is never asked)
and validated on the original code, then the candidate checked as a run's last diff is; the
trajectory it saves is read back by the inspector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core.loop import RunResult
from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory
from agent.github.pr import refusal
from agent.inspect.trajectory import load_trajectory
from agent.inspect.tui_text import pgs_text
from agent.models import ModelConfig, ReplayModel
from agent.pgs.reviewer import PGS, PGSConfig
from agent.pgs.tokens import SimpleCounter
from envs.docker_sandbox import DockerSandbox
from tests.pgs.checking import SETTINGS, commit_files, write_properties
from tests.support.example_repos import DEDUPE


def checked(sandbox: DockerSandbox, tmp_path: Path, patch: str, **options: Any) -> PGS:
    """PGS with DEDUPE's sound issue property, validated on the original code, after checking
    ``patch`` as the diff a run ends with."""
    (path,) = write_properties(sandbox, DEDUPE, "issue_sound")
    pgs = PGS(
        PGSConfig(**{"check": SETTINGS, **options}),
        sandbox=sandbox,
        toolset=Toolset.from_paths(None),
        tester_model=ReplayModel(ModelConfig(name="replay"), script=[]),
        counter=SimpleCounter(),
        trajectory=Trajectory(tmp_path / "run.traj", replay_config={}),
        problem_statement=DEDUPE.issue,
    )
    pgs.properties = {path: DEDUPE.properties["issue_sound"]}
    pgs.guard.take(sandbox)  # kept as the end of a Tester turn keeps its files
    pgs.validate()
    assert pgs.shows_bug  # the property fails on the original code
    pgs.final_check(patch, "test")
    return pgs


KNOWN_FAILURE = "def test_known():\n    assert False, 'a failure the original code has'\n"
PYTEST = "python3 -m pytest -q -p no:cacheprovider"


def test_a_test_command_that_fails_on_the_original_code_too_does_not_fail_the_patch(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    commit_files(dedupe, {"tests/test_known.py": KNOWN_FAILURE})
    command = f"{PYTEST} tests/test_known.py"
    record = checked(dedupe, tmp_path, DEDUPE.correct_patch, test_cmd=command).record
    assert record.verdict == "passed", record.verdict_reason
    reason = record.verdict_reason or ""
    assert f"the test command `{command}` (it fails on the original code too" in reason
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    assert report.coverage.not_counted == [f"test_cmd: {command}"]
    assert report.coverage.test_cmd == command and report.coverage.properties == 1


def test_a_test_command_that_passed_on_the_original_code_and_fails_now_fails_the_patch(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    # The wrong fix (sorted(set(xs))) passes the issue property but breaks the example test.
    command = f"{PYTEST} tests/test_core.py"
    record = checked(dedupe, tmp_path, DEDUPE.wrong_patch, test_cmd=command).record
    assert record.verdict == "failed"
    reason = record.verdict_reason or ""
    assert reason.startswith(f"1 check failing on the patch, first test_cmd: {command}")
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    assert report.coverage.not_counted == []
    (failure,) = report.failures()
    assert failure.note == "passed before the patch"  # a regression, compared with the original


def test_a_check_cut_by_its_budget_to_few_related_test_files_is_partial_and_opens_no_pr(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    more = "from listutils.core import dedupe\n\n\ndef test_more():\n    assert dedupe([]) == []\n"
    commit_files(dedupe, {"tests/test_core_more.py": more, "tests/test_core_extra.py": more})
    # A budget of a millisecond: the first related file's run is stopped at it, the other two
    # are never started. Nothing newly fails; the issue property passes on the patch.
    settings = SETTINGS.model_copy(update={"budget": 0.001})
    pgs = checked(dedupe, tmp_path, DEDUPE.correct_patch, check=settings)
    record = pgs.record
    assert record.verdict == "partial", record.verdict_reason
    reason = record.verdict_reason or ""
    assert reason.startswith("fewer than 50% of the related test files ran; ")
    assert (
        "checked: 1 property, 0 of 3 related test files (3 left out by the time budget)" in reason
    )
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    assert (report.coverage.related_found, report.coverage.related_run) == (3, 0)

    result = RunResult(
        exit_status="submitted", submission=DEDUPE.correct_patch, steps=1, trajectory=pgs.traj
    )
    refused = refusal(result, force=False)
    assert refused is not None and refused.startswith("the PGS verdict is partial, not passed")
    assert refusal(result, force=True) is None

    # The inspector shows the verdict, how much of the check ran and why the property was kept.
    shown = pgs_text(load_trajectory(tmp_path / "run.traj")).plain
    assert "partial" in shown
    assert "checked: 1 property, 0 of 3 related test files (3 left out by the time budget)" in shown
    assert "reason: fails by its assertion on the original code: test_no_repeats(" in shown
