"""Attempt records for the tests of ``--attempts K`` (tests/run/test_attempts*.py): a check
result and a candidate of the median example, built by hand."""

from __future__ import annotations

from agent.pgs.selection import evidence
from agent.record.attempts import Candidate
from agent.record.check import CheckReport, TestResult
from agent.record.pgs import Verdict

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
