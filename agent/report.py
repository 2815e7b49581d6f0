"""What a check of a candidate found: one :class:`TestResult` per test, in one :class:`CheckReport`.

Written by the pytest plugin inside the sandbox (``agent/pgs_pytest_plugin.py``) as JSON, read
here on the host. The categories follow the PGS paper's outcome classes (Appendix A.1), in the
priority order feedback uses.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Category = Literal["property_violation", "wrong_answer", "runtime_error", "timeout", "pass"]
#: Feedback priority: the first category with a failure wins.
PRIORITY: tuple[Category, ...] = ("property_violation", "wrong_answer", "runtime_error", "timeout")
#: issue: must fail on the original code; regression: must pass there; repo: a repository test.
Kind = Literal["issue", "regression", "repo"]
Outcome = Literal["passed", "failed", "error", "skipped", "timeout"]


class TestResult(BaseModel):
    """One test (a property, an explicit example, or a repository test) on one version of code."""

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest test class

    nodeid: str = Field(description="pytest node id, e.g. .pgs/properties/test_p.py::test_sorted")
    kind: Kind = "repo"
    rule: str | None = Field(None, description="the property's rule in one sentence")
    outcome: Outcome
    category: Category
    example: str | None = Field(
        None, description="the failing input as Hypothesis reports it, e.g. test_f(xs=[0])"
    )
    explicit: bool = Field(False, description="the failing input came from an @example")
    returned: str | None = Field(None, description="what the code returned (assertion message)")
    exception: str | None = Field(None, description="'Type: message' of what was raised")
    trace: str | None = Field(None, description="a short traceback, a few lines")
    output: str | None = Field(None, description="raw pytest output of this test (for io mode)")
    note: str | None = Field(
        None, description="what the checker adds, e.g. 'passed before the patch' (a regression)"
    )
    duration: float = 0.0

    @property
    def failed(self) -> bool:
        return self.category != "pass"


class CheckReport(BaseModel):
    """All tests run against one version of the code."""

    model_config = ConfigDict(extra="forbid")
    results: list[TestResult] = Field(default_factory=list)
    #: Collection errors and crashes of pytest itself (a file that does not import).
    errors: list[str] = Field(default_factory=list)
    exit_code: int = 0
    duration: float = 0.0
    #: What a time budget left out (``--pgs.check.budget``), said in the report, never silent.
    cut: str | None = None

    def failures(self) -> list[TestResult]:
        return [r for r in self.results if r.failed]

    def by_id(self) -> dict[str, TestResult]:
        return {r.nodeid: r for r in self.results}
