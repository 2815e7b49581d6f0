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

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

Category = Literal["property_violation", "wrong_answer", "runtime_error", "timeout", "pass"]
#: Feedback priority: the first category with a failure wins, after a repository test broken by
#: the patch (:attr:`TestResult.regressed`), which outranks them all.
PRIORITY: tuple[Category, ...] = ("property_violation", "wrong_answer", "runtime_error", "timeout")
#: issue: must fail on the original code; regression: must pass there; repo: a repository test.
Kind = Literal["issue", "regression", "repo"]
Outcome = Literal["passed", "failed", "error", "skipped", "timeout"]
#: The checker's note on a repository test that passed before the patch and fails now.
REGRESSION_NOTE = "passed before the patch"
#: Where an exception was raised: in the test's own file (or a helper beside it), in the
#: repository's code, or outside both (the standard library, an installed package).
Where = Literal["test", "repo", "outside"]
#: A check that ran fewer than this share of its related test files is ``partial``: the files
#: it did not run outnumber those it did, so "nothing newly fails" says less than it leaves out.
PARTIAL_BELOW = 0.5
#: The node id of the test command's one result: the prefix, then the command.
TEST_CMD_PREFIX = "test_cmd: "


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


def _without_unset(
    model: BaseModel, handler: SerializerFunctionWrapHandler, names: tuple[str, ...]
) -> dict[str, Any]:
    """``model``'s JSON without the fields ``names`` while None: reports and records written
    before those fields existed are written back as they were."""
    data: dict[str, Any] = handler(model)
    for name in names:
        if data.get(name, "") is None:
            del data[name]
    return data


class Origin(BaseModel):
    """Where a failing test's exception was raised, as the plugin saw the traceback: frames of
    pytest, pluggy and Hypothesis are left out (``pytest.fail`` and ``pytest.raises`` raise
    there on the test's behalf)."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="the exception's class name, e.g. ValueError")
    file: str = Field(description="the file of the frame that raised (relative to the root)")
    line: int = Field(0, description="its line")
    function: str = Field("", description="its function")
    where: Where = Field(description="test, repo or outside: whose code that frame is")
    via: str | None = Field(
        None,
        description="the innermost repository frame between the test's last frame and the "
        "raise, 'path:line in function' (None: the test reached the raise without passing "
        "through the repository's code)",
    )


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
    origin: Origin | None = Field(
        None, description="where the failure the fields above describe was raised"
    )
    duration: float = 0.0

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(self, handler, ("origin",))

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


class Coverage(BaseModel):
    """How much of a check ran: what a verdict rests on, said in every verdict's reason."""

    model_config = ConfigDict(extra="forbid")

    properties: int = Field(0, description="the Tester's properties run")
    issue_tests: int = Field(0, description="repository tests standing for the issue run")
    related_found: int = Field(0, description="related repository test files found")
    related_run: int = Field(0, description="of those, the files run")
    related_cut: int = Field(0, description="of those, the files a time budget left out")
    test_cmd: str | None = Field(None, description="the test command run instead, if any")
    not_counted: list[str] = Field(
        default_factory=list,
        description="repository failures not counted: the original code fails them too",
    )

    @property
    def partial(self) -> bool:
        """Fewer than :data:`PARTIAL_BELOW` of the related test files ran."""
        found = self.related_found
        return found > 0 and self.related_run < PARTIAL_BELOW * found

    def describe(self) -> str:
        """One sentence, e.g. ``checked: 3 properties, 1 of 285 related test files (284 left
        out by the time budget)``."""
        parts = [_count(self.properties, "property", "properties")]
        if self.issue_tests:
            parts.append(_count(self.issue_tests, "issue test"))
        others = list(self.not_counted)
        if self.test_cmd:
            command = f"the test command `{self.test_cmd}`"
            if TEST_CMD_PREFIX + self.test_cmd in others:
                others.remove(TEST_CMD_PREFIX + self.test_cmd)
                command += " (it fails on the original code too: its failure is not counted)"
            parts.append(command)
        elif self.related_found:
            ran = f"{self.related_run} of {self.related_found} related test files"
            if self.related_cut:
                ran += f" ({self.related_cut} left out by the time budget)"
            parts.append(ran)
        else:
            parts.append("no related test file found")
        said = "checked: " + ", ".join(parts)
        if others:
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            said += f"; not counted, as the original code fails them too: {', '.join(others[:3])}"
            said += more
        return said


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


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
    #: How much of the check ran (None: not a candidate's check, e.g. a baseline).
    coverage: Coverage | None = None

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(self, handler, ("coverage",))

    def failures(self) -> list[TestResult]:
        return [r for r in self.results if r.failed]

    def by_id(self) -> dict[str, TestResult]:
        return {r.nodeid: r for r in self.results}
