"""Checking a candidate (agent/pgs/check.py): what the original code failed too is not counted,
a test the patch breaks is a regression, issue tests count, in a real sandbox."""

from __future__ import annotations

import re
from pathlib import Path

from agent.pgs.baseline import Baseline
from agent.pgs.check import against_baseline, check_candidate, regressions
from agent.pgs.related import (
    changed_files,
    related_tests,
)
from agent.record.check import CheckReport
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import (
    SETTINGS,
    apply_patch,
    commit_files,
    result_of,
    write_properties,
)
from tests.support.example_repos import DEDUPE, RLE


def test_failures_the_original_had_are_not_counted_regressions_are() -> None:
    before = CheckReport(
        results=[
            result_of("t.py::old_bug", "wrong_answer"),
            result_of("t.py::fine", "pass"),
            result_of("t.py::crashes", "pass"),
        ],
        errors=["broken_test.py: ImportError"],
    )
    now = CheckReport(
        results=[
            result_of("t.py::old_bug", "wrong_answer"),
            result_of("t.py::fine", "wrong_answer"),
            result_of("t.py::crashes", "runtime_error"),
            result_of("t.py::new_test", "runtime_error"),
            result_of(".pgs/properties/test_p.py::test_p", "property_violation", "issue"),
        ],
        errors=["broken_test.py: ImportError", "other_test.py: SyntaxError"],
    )
    found = regressions(before, now)
    assert [(r.nodeid, r.category, r.note) for r in found] == [
        ("t.py::fine", "wrong_answer", "passed before the patch"),
        ("t.py::crashes", "wrong_answer", "passed before the patch"),
    ]
    counted = against_baseline(now, before)
    assert [r.nodeid for r in counted.failures()] == [
        "t.py::fine",
        "t.py::crashes",
        "t.py::new_test",
        ".pgs/properties/test_p.py::test_p",
    ]
    assert counted.errors == ["other_test.py: SyntaxError"]
    # What was left out is said, not silent: the report's coverage names it.
    assert counted.coverage is not None
    assert counted.coverage.not_counted == ["t.py::old_bug", "broken_test.py"]
    assert "not counted, as the original code fails them too: t.py::old_bug, broken_test.py" in (
        counted.coverage.describe()
    )
    assert against_baseline(now, None) == now


def test_a_wrong_fix_breaking_a_passing_test_is_a_regression(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    properties = write_properties(dedupe, DEDUPE, "issue_sound", "regression_sound")
    apply_patch(dedupe, DEDUPE.wrong_patch)
    commit = dedupe.run("git rev-parse HEAD").output.strip()
    tests = related_tests(dedupe, changed_files(dedupe.diff()))
    cache = Baseline(tmp_path / "baseline.json")
    baseline = cache.ensure(dedupe, commit, tests, settings=SETTINGS)
    assert [r.category for r in baseline.results] == ["pass", "pass"]  # the original's results
    assert "sorted(set(xs))" in dedupe.read_file(DEDUPE.module).decode()  # candidate restored
    report = check_candidate(
        dedupe, properties=properties, repo_tests=tests, baseline=baseline, settings=SETTINGS
    )
    failures = {r.nodeid: r for r in report.failures()}
    assert set(failures) == {
        "tests/test_core.py::test_dedupe_example",
        f"{properties[1]}::test_order_of_first_occurrence",
    }
    regression = failures["tests/test_core.py::test_dedupe_example"]
    assert (regression.category, regression.note) == ("wrong_answer", "passed before the patch")
    violated = failures[f"{properties[1]}::test_order_of_first_occurrence"]
    assert violated.category == "property_violation"  # shrunk: two elements out of order
    assert re.fullmatch(
        r"test_order_of_first_occurrence\(xs=\[-?\d+, -?\d+\]\)", violated.example or ""
    )
    # Once per commit: a new cache on the same file answers without running anything.
    assert Baseline(tmp_path / "baseline.json").get(commit, tests) == baseline


def test_the_correct_fix_passes_everything(dedupe: DockerSandbox) -> None:
    properties = write_properties(
        dedupe, DEDUPE, "issue_sound", "issue_generated", "regression_sound"
    )
    commit = dedupe.run("git rev-parse HEAD").output.strip()
    apply_patch(dedupe, DEDUPE.correct_patch)
    tests = related_tests(dedupe, changed_files(DEDUPE.correct_patch))
    baseline = Baseline().ensure(dedupe, commit, tests, settings=SETTINGS)
    report = check_candidate(
        dedupe, properties=properties, repo_tests=tests, baseline=baseline, settings=SETTINGS
    )
    assert report.failures() == [] and report.errors == []
    assert len(report.results) == 5


def test_a_wrong_fix_that_hangs_is_a_timeout_with_its_input(rle: DockerSandbox) -> None:
    properties = write_properties(rle, RLE, "issue_generated", "regression_sound")
    apply_patch(rle, RLE.wrong_patch)
    report = check_candidate(
        rle, properties=properties, repo_tests=[RLE.related_test], baseline=None, settings=SETTINGS
    )
    (failure,) = report.failures()
    assert (failure.kind, failure.category) == ("issue", "timeout")
    assert failure.example and failure.example.startswith("test_round_trip_generated(s=")


def test_a_user_test_command_replaces_the_related_tests(dedupe: DockerSandbox) -> None:
    apply_patch(dedupe, DEDUPE.wrong_patch)
    settings = SETTINGS.model_copy(update={"test_cmd": "python3 -m pytest -q tests/test_core.py"})
    report = check_candidate(
        dedupe, properties=[], repo_tests=["tests/test_text.py"], baseline=None, settings=settings
    )
    (result,) = report.results
    assert (result.nodeid, result.category) == (f"test_cmd: {settings.test_cmd}", "wrong_answer")
    assert result.output and "1 failed, 1 passed" in result.output


_ISSUE_TEST = (
    "import pytest\n\nfrom listutils.core import dedupe\n\n\n"
    '@pytest.mark.parametrize("xs", [[1, 2, 1]])\n'
    "def test_no_repeat_at_the_end(xs):\n    assert dedupe(xs) == [1, 2]\n"
)


def test_issue_tests_count_though_the_original_failed_them_and_new_files_have_no_baseline(
    dedupe: DockerSandbox,
) -> None:
    commit = commit_files(dedupe, {"tests/test_issue.py": _ISSUE_TEST})
    dedupe.write_file(
        "tests/test_added.py", "from listutils import core\n\ndef test_a():\n    pass\n"
    )
    tests = related_tests(dedupe, [DEDUPE.module, "tests/test_added.py"])
    assert tests[:2] == ["tests/test_added.py", DEDUPE.related_test]
    assert "tests/test_issue.py" in tests
    baseline = Baseline().ensure(dedupe, commit, tests, settings=SETTINGS)
    assert dedupe.run("test -f tests/test_added.py").ok  # put back after the original's run
    assert not any(r.nodeid.startswith("tests/test_added.py") for r in baseline.results)
    issue = ["tests/test_issue.py::test_no_repeat_at_the_end"]

    def check() -> CheckReport:
        return check_candidate(
            dedupe,
            properties=[],
            repo_tests=tests,
            baseline=baseline,
            settings=SETTINGS,
            issue_tests=issue,
        )

    (failure,) = check().failures()  # the original code: the issue test still fails
    assert failure.nodeid == issue[0] + "[xs0]" and failure.kind == "issue"
    apply_patch(dedupe, DEDUPE.correct_patch)
    report = check()
    assert report.failures() == [] and report.cut is None
    assert report.by_id()[issue[0] + "[xs0]"].kind == "issue"
    assert "tests/test_added.py::test_a" in report.by_id()
