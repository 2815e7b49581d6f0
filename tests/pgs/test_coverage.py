"""How much of a check ran, and what it is compared with: the test command gets a baseline on
the original code like the related test files, and a check cut by its time budget to a small
share of its related test files is ``partial``, which ``--open-pr`` refuses without ``--force``.
Only the base commit's test files count, and only those whose tests ran
(:mod:`agent.pgs.coverage`): test files the patch adds and files that fail to import on both
sides never raise a verdict; a test command failing on the original code is compared test by
test, or gives ``partial``; a sandbox without Hypothesis or pytest is one error, no verdict.

The first tests are the coverage computation on fabricated reports; then PGS itself
(:class:`agent.pgs.reviewer.PGS`) in a real Docker sandbox of the DEDUPE repository, the
Tester's properties written beforehand (no Tester conversation: the model is never asked) and
validated on the original code, then the candidate checked as a run's last diff is; the
trajectory it saves is read back by the inspector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core.loop import RunResult
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.errors import CheckNotRun
from agent.github.pr import refusal
from agent.inspect.trajectory_view import load_trajectory
from agent.inspect.tui_pgs_text import pgs_text
from agent.models import ModelConfig, ReplayModel
from agent.pgs.check import check_candidate
from agent.pgs.config import PGSConfig
from agent.pgs.coverage import (
    check_not_run,
    compare_test_cmd,
    pytest_failures,
    related_coverage,
)
from agent.pgs.reviewer import PGS
from agent.pgs.tokens import SimpleCounter
from agent.pgs.verdict import judge
from agent.record.check import CheckReport, Coverage, TestResult
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import SETTINGS, commit_files, result_of, write_properties
from tests.support.example_repos import DEDUPE

ISSUE = ".pgs/properties/test_issue.py::test_no_repeats"
BROKEN = "tests/test_broken.py: ImportError while importing test module: No module named 'zzz'"


# --------------------------------------------------------------------------- fabricated reports


def test_files_the_patch_adds_are_run_but_never_counted() -> None:
    pads = [f"tests/test_pad_{i}.py" for i in range(12)]
    targets = [*pads, *(f"tests/test_{n}.py" for n in "abcdef")]
    now = CheckReport(results=[result_of(f"{p}::test_pad", "pass") for p in pads])
    coverage = related_coverage(
        targets, now, CheckReport(), base_files=set(targets) - set(pads), cut=targets[12:]
    )
    assert (coverage.related_found, coverage.related_run, coverage.related_cut) == (6, 0, 6)
    assert coverage.related_added == pads and coverage.partial
    assert coverage.describe() == (
        "checked: 0 properties, 0 of 6 related test files ran (6 left out by the time budget; "
        "12 added by the patch not counted)"
    )
    # Without the base commit's list (an older caller) the added files are not known.
    assert related_coverage(targets, now, None, base_files=None).related_run == 12


def test_a_file_runs_only_when_one_of_its_tests_passed_or_failed() -> None:
    targets = ["tests/test_ran.py", "tests/test_broken.py", "tests/test_skipped.py"]
    skipped = TestResult(nodeid="tests/test_skipped.py::t", outcome="skipped", category="pass")
    now = CheckReport(
        results=[result_of("tests/test_ran.py::t", "wrong_answer"), skipped], errors=[BROKEN]
    )
    coverage = related_coverage(targets, now, CheckReport(errors=[BROKEN]), base_files=set(targets))
    assert (coverage.related_found, coverage.related_run) == (3, 1)
    assert coverage.related_broken == ["tests/test_broken.py"]
    assert coverage.related_idle == ["tests/test_skipped.py"]
    said = coverage.model_copy(update={"not_counted": ["tests/test_broken.py"]}).describe()
    assert said == (
        "checked: 0 properties, 1 of 3 related test files ran (1 failed to import on the original "
        "code too: tests/test_broken.py; 1 ran no test: tests/test_skipped.py)"
    )
    # A file that fails to import on the patch only is the patch's failure, not "too".
    alone = related_coverage(targets, now, CheckReport(), base_files=set(targets))
    assert alone.related_broken == [] and "tests/test_broken.py" in alone.related_idle


def test_a_verdict_on_files_that_never_ran_is_partial_at_best() -> None:
    coverage = Coverage(
        properties=1, related_found=6, related_run=0, related_broken=[f"t{i}.py" for i in range(6)]
    )
    report = CheckReport(results=[result_of(ISSUE, "pass", "issue")], coverage=coverage)
    verdict, why = judge(report, {ISSUE})
    assert verdict == "partial", why
    assert why.startswith("fewer than 50% of the related test files ran; 1 issue property")
    assert "0 of 6 related test files ran (6 failed to import on the original code too" in why


PYTEST_OUT = (
    "F.F                                                                      [100%]\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_a.py::test_one - assert 1 == 2\n"
    "FAILED tests/test_a.py::test_three[x y] - AssertionError: no\n"
    "1 passed, 2 failed in 0.05s\n"
)


def test_pytest_output_gives_the_failing_tests_when_it_is_complete() -> None:
    assert pytest_failures(PYTEST_OUT) == {
        "tests/test_a.py::test_one",
        "tests/test_a.py::test_three[x y]",
    }
    cut = PYTEST_OUT.replace("FAILED tests/test_a.py::test_one - assert 1 == 2\n", "")
    assert pytest_failures(cut) is None  # two failures counted, one named
    assert pytest_failures("make: *** [test] Error 2\n") is None
    assert pytest_failures("1 error in 0.10s\nERROR tests/test_b.py\n") is None  # none ran
    verbose = "==== 1 failed, 3 passed, 1 warning in 1.20s ====\nFAILED a.py::t\n"
    assert pytest_failures(verbose) == {"a.py::t"}


def _command(output: str) -> TestResult:
    return TestResult(
        nodeid="test_cmd: make test",
        outcome="failed",
        category="wrong_answer",
        returned="the command exited with code 1",
        output=output,
    )


def test_a_test_command_failing_on_the_original_is_compared_test_by_test_or_whole() -> None:
    before = _command(PYTEST_OUT)
    assert compare_test_cmd(_command(PYTEST_OUT), before) == (None, "by test")
    worse = PYTEST_OUT.replace("1 passed, 2 failed", "3 failed").replace(
        "FAILED tests/test_a.py::test_one",
        "FAILED tests/test_a.py::test_two - x\nFAILED tests/test_a.py::test_one",
    )
    counted, how = compare_test_cmd(_command(worse), before)
    assert how == "by test" and counted is not None
    assert counted.returned == (
        "the command exited with code 1; failing now and not on the original code: "
        "tests/test_a.py::test_two"
    )
    # Output that is not pytest's, or a pytest run whose tests all pass: not comparable.
    assert compare_test_cmd(_command("Error 2"), _command("Error 2")) == (None, "whole")
    passing = "... [100%]\n3 passed in 0.01s\n"
    assert compare_test_cmd(_command(passing), _command(passing)) == (None, "whole")
    coverage = Coverage(properties=1, test_cmd="make test", test_cmd_baseline="whole")
    report = CheckReport(results=[result_of(ISSUE, "pass", "issue")], coverage=coverage)
    verdict, why = judge(report, {ISSUE})
    assert verdict == "partial"
    assert why.startswith(
        "the test command fails on the original code too and its output cannot be compared "
        "test by test; 1 issue property"
    )


def test_a_run_where_nothing_could_run_names_what_is_missing() -> None:
    no_pytest = CheckReport(
        errors=[
            "pytest wrote no report (exit code 1); its output ends:\n"
            "/opt/pgs/venv/bin/python3: No module named pytest\n"
        ],
        exit_code=1,
    )
    assert check_not_run(no_pytest) == (
        "pytest is not installed in the sandbox (/opt/pgs/venv/bin/python3: No module named pytest)"
    )
    no_hypothesis = CheckReport(
        errors=[
            ".pgs/properties/test_p.py: ImportError while importing test module\n"
            "E   ModuleNotFoundError: No module named 'hypothesis'"
        ]
    )
    missing = check_not_run(no_hypothesis)
    assert missing is not None and missing.startswith("hypothesis is not installed in the sandbox")
    plugin = CheckReport(
        errors=[
            "pytest wrote no report (exit code 1); its output ends:\n"
            'ImportError: Error importing plugin "pgs_pytest_plugin": No module named x'
        ],
        exit_code=1,
    )
    assert (check_not_run(plugin) or "").startswith("pgs's pytest plugin did not load")
    for report in (no_pytest, no_hypothesis, plugin):
        verdict, why = judge(report, set())
        assert verdict == "unchecked" and why.startswith("the check could not run: ")
        assert "every check passes" not in why
    # The code under test crashing the interpreter is the code's failure: the check ran.
    crash = CheckReport(
        errors=["pytest wrote no report (exit code -11); its output ends:\nSegmentation fault"],
        exit_code=-11,
    )
    assert check_not_run(crash) is None and judge(crash, set())[0] == "failed"
    assert check_not_run(CheckReport(errors=[BROKEN])) is None


# --------------------------------------------------------------------------- PGS in Docker


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
        "checked: 1 property, 0 of 3 related test files ran (3 left out by the time budget)"
        in reason
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
    assert "checked: 1 property, 0 of 3 related test files ran (3 left out by the time" in shown
    assert "reason: fails by its assertion on the original code: test_no_repeats(" in shown


def _added(path: str, text: str) -> str:
    """A patch that adds ``path`` holding ``text`` (lines ending in a newline)."""
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_padding_with_twelve_added_test_files_does_not_raise_the_verdict(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    more = "from listutils.core import dedupe\n\n\ndef test_more():\n    assert dedupe([]) == []\n"
    commit_files(dedupe, {"tests/test_core_more.py": more, "tests/test_core_extra.py": more})
    pads = "".join(
        _added(f"tests/test_pad_{i}.py", "def test_pad():\n    assert True\n") for i in range(12)
    )
    # The budget cuts every related file of the base commit; the added ones have no baseline
    # (the original code lacks them) and are never cut: before, they made it "12 of 15", passed.
    settings = SETTINGS.model_copy(update={"budget": 0.001})
    record = checked(dedupe, tmp_path, DEDUPE.correct_patch + pads, check=settings).record
    assert record.verdict == "partial", record.verdict_reason
    reason = record.verdict_reason or ""
    assert (
        "0 of 3 related test files ran (3 left out by the time budget; 12 added by the patch "
        "not counted)" in reason
    )
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    assert len(report.coverage.related_added) == 12
    assert "tests/test_pad_0.py::test_pad" in report.by_id()  # run all the same


BROKEN_FILE = (
    "from listutils.core import dedupe\nimport not_installed_anywhere\n\n\n"
    "def test_broken():\n    assert dedupe([]) == []\n"
)


def test_related_files_that_fail_to_import_on_both_sides_do_not_count_as_run(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    broken = {f"tests/test_core_broken_{i}.py": BROKEN_FILE for i in range(3)}
    commit_files(dedupe, broken)
    record = checked(dedupe, tmp_path, DEDUPE.correct_patch).record
    assert record.verdict == "partial", record.verdict_reason  # before: 4 of 4, passed
    reason = record.verdict_reason or ""
    assert reason.startswith("fewer than 50% of the related test files ran; ")
    assert (
        "1 of 4 related test files ran (3 failed to import on the original code too: "
        "tests/test_core_broken_0.py" in reason
    )
    assert "not counted, as the original code fails them too" not in reason  # said once
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    assert sorted(report.coverage.related_broken) == sorted(broken)


def test_a_test_command_failing_on_the_original_that_is_not_pytest_gives_partial(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    command = "echo 'make: *** [test] Error 2'; exit 2"
    record = checked(dedupe, tmp_path, DEDUPE.correct_patch, test_cmd=command).record
    assert record.verdict == "partial", record.verdict_reason  # before: passed
    reason = record.verdict_reason or ""
    assert reason.startswith(
        "the test command fails on the original code too and its output cannot be compared "
        "test by test; 1 issue property"
    )


def test_a_pytest_command_failing_on_the_original_is_compared_test_by_test(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    commit_files(dedupe, {"tests/test_known.py": KNOWN_FAILURE})
    # The wrong fix passes the issue property and breaks test_dedupe_example: before, the
    # command's failure was the original's too, not counted, and the verdict passed.
    command = f"{PYTEST} tests/test_known.py tests/test_core.py"
    record = checked(dedupe, tmp_path, DEDUPE.wrong_patch, test_cmd=command).record
    assert record.verdict == "failed", record.verdict_reason
    report = record.rounds[-1].report
    assert report is not None and report.coverage is not None
    (failure,) = report.failures()
    assert failure.nodeid == f"test_cmd: {command}"
    assert (failure.returned or "").endswith(
        "failing now and not on the original code: tests/test_core.py::test_dedupe_example"
    )
    assert report.coverage.test_cmd_baseline == "by test"


def test_a_sandbox_without_hypothesis_is_a_check_that_could_not_run(
    dedupe: DockerSandbox,
) -> None:
    properties = write_properties(dedupe, DEDUPE, "issue_sound")
    assert dedupe.run("python3 -m pip uninstall -q -y hypothesis").ok
    for kept in (properties, []):  # a property that cannot import it; no property at all
        try:
            report = check_candidate(
                dedupe,
                properties=kept,
                repo_tests=[DEDUPE.related_test],
                baseline=None,
                settings=SETTINGS,
            )
        except CheckNotRun as e:
            said = str(e)
        else:
            raise AssertionError(f"the check ran: {judge(report, set())}")
        assert said.startswith("the check could not run: hypothesis is not installed in the ")
        assert "\n" not in said
