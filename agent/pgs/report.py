"""What a check of a candidate found: one :class:`TestResult` per test, in one :class:`CheckReport`.

Written by the pytest plugin inside the sandbox (``agent/pgs/pgs_pytest_plugin.py``) as JSON, read
here on the host. The categories follow the PGS paper's outcome classes (Appendix A.1), in the
priority order feedback uses (:data:`PRIORITY`), after one thing that outranks them all: a
repository test that passed on the original code and fails on the candidate
(:attr:`TestResult.regressed`) is ground truth, a property only a claim about it.

A test may fail on more than one input: a Hypothesis property whose explicit ``@example``
fails is run again without its explicit examples, so that the generated, shrunk counterexample
is found too, and the plugin keeps the other distinct inputs the test failed on while
Hypothesis generated and shrank. :attr:`TestResult.examples` holds every failing input
(:class:`FailingInput`);
reports written before that field existed load with it empty, and
:meth:`TestResult.failing_inputs` then gives the one input the result's own fields describe.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Category = Literal["property_violation", "wrong_answer", "runtime_error", "timeout", "pass"]
#: Feedback priority: the first category with a failure wins, after a repository test broken by
#: the patch (:attr:`TestResult.regressed`), which outranks them all.
PRIORITY: tuple[Category, ...] = ("property_violation", "wrong_answer", "runtime_error", "timeout")
#: issue: must fail on the original code; regression: must pass there; repo: a repository test.
Kind = Literal["issue", "regression", "repo"]
Outcome = Literal["passed", "failed", "error", "skipped", "timeout"]
#: The checker's note on a repository test that passed before the patch and fails now.
REGRESSION_NOTE = "passed before the patch"


class FailingInput(BaseModel):
    """One input a test failed on, and what the code did with it."""

    model_config = ConfigDict(extra="forbid")

    example: str | None = Field(
        None, description="the input as Hypothesis reports it, e.g. test_f(xs=[0]); None: the test"
    )
    explicit: bool = Field(False, description="the input came from an @example")
    category: Category
    returned: str | None = Field(None, description="what the code returned (assertion message)")
    exception: str | None = Field(None, description="'Type: message' of what was raised")
    trace: str | None = Field(None, description="a short traceback, a few lines")


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
    examples: list[FailingInput] = Field(
        default_factory=list,
        description="every failing input of this test, the one the fields above describe first "
        "(empty in reports written before the field existed)",
    )
    duration: float = 0.0

    @property
    def failed(self) -> bool:
        return self.category != "pass"

    @property
    def regressed(self) -> bool:
        """A repository test that passed on the original code and fails on the candidate."""
        return self.kind == "repo" and self.failed and self.note == REGRESSION_NOTE

    def failing_inputs(self) -> list[FailingInput]:
        """Every input this test failed on (none when it passed).

        ``examples`` when the plugin recorded them, else the one input the result's own fields
        describe. A repository regression keeps the checker's category on each input.
        """
        if not self.failed:
            return []
        if not self.examples:
            own = self.model_dump(include=set(FailingInput.model_fields))
            return [FailingInput.model_validate(own)]
        if self.regressed:
            return [e.model_copy(update={"category": self.category}) for e in self.examples]
        return list(self.examples)


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
