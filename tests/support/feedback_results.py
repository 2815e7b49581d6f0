"""Check results for the tests of feedback (tests/pgs/test_feedback*.py): a property violation
with its example, a failure of any category, and the simple token counter they are measured by."""

from __future__ import annotations

from typing import Any

from agent.pgs.tokens import SimpleCounter
from agent.record.check import Category, TestResult

SIMPLE = SimpleCounter()


def violation(nodeid: str, xs: list[int], **extra: Any) -> TestResult:
    return TestResult(
        nodeid=nodeid,
        kind="issue",
        outcome="failed",
        category="property_violation",
        example=f"{nodeid.rsplit('::', 1)[-1]}(xs={xs!r})",
        **extra,
    )


def failure(
    category: Category, nodeid: str, example: str | None = None, **extra: Any
) -> TestResult:
    outcomes = {"timeout": "timeout", "pass": "passed", "runtime_error": "error"}
    outcome = outcomes.get(category, "failed")
    return TestResult(nodeid=nodeid, outcome=outcome, category=category, example=example, **extra)
