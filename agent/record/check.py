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

import re
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
    replay: str | None = Field(
        None,
        description="the input in a form the plugin feeds again (its drawn arguments, pickled, "
        "base64; read only in the sandbox): the inputs an issue property failed on when it was "
        "validated are replayed in every later check",
    )
    from_replay: bool | None = Field(
        None, description="True: an input replayed from the validation, not drawn by this check"
    )

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(self, handler, ("replay", "from_replay"))


#: Where a pooled input came from: drawn by Hypothesis (``generated``), drawn from the input
#: generator's shared hard inputs (``hard``), the Tester's own ``@example`` (``explicit``), an
#: input of the validation fed again (``replayed``), a step of Hypothesis's shrinking
#: (``shrinking``), the input a shrink ended on (``shrunk``), or a plain test (``test``).
PoolSource = Literal["generated", "hard", "explicit", "replayed", "shrinking", "shrunk", "test"]
#: The pool's drawn inputs, those the paper's pool holds (the shrink steps are pgs's own), and
#: a failing plain test as its one input (``test``, the plugin's ``PGS_POOL_TESTS``).
DRAWN: tuple[PoolSource, ...] = ("generated", "hard", "explicit", "replayed", "test")


class PoolInput(FailingInput):
    """One distinct failing input of a test's pool, with the three measures of the PGS
    paper's Table 1 (line coverage, runtime, token count): every strategy of the table can be
    computed again from them (:mod:`agent.pgs.pool`)."""

    source: PoolSource = Field("generated", description="where the input came from")
    runtime: float | None = Field(
        None, description="seconds the test ran on this input (untraced; None: not measured)"
    )
    lines: int | None = Field(
        None,
        description="lines of the repository's code (not test files) a rerun of a copy of the "
        "input ran (None: no tracer, see the result's pool_note, or the input does not copy)",
    )
    tokens: int | None = Field(
        None,
        description="tokens of the input's arguments under the Generator's tokenizer, counted "
        "on the host (the report's pool_counter; None: not counted yet)",
    )

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(self, handler, ("replay", "from_replay"))


def _without_unset(
    model: BaseModel, handler: SerializerFunctionWrapHandler, names: tuple[str, ...]
) -> dict[str, Any]:
    """``model``'s JSON without the fields ``names`` while None (or an empty list): reports and
    records written before those fields existed are written back as they were."""
    data: dict[str, Any] = handler(model)
    for name in names:
        if name in data and data[name] in (None, []):
            del data[name]
    return data


class Contradiction(BaseModel):
    """An issue property that fails although every call it made was answered with what the
    issue states the fixed code gives (the oracle of the issue's examples: the soundness
    filter's public tests)."""

    model_config = ConfigDict(extra="forbid")
    stated: str = Field(
        description="the stated example, e.g. stats.median([1, 2, 3, 4]) returns 2.5"
    )
    example_test: str = Field(description="the node id of the issue example that states it")
    input: str | None = Field(None, description="the property's input that failed")
    failure: str = Field(description="what the property's check said")


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
    replayed: int | None = Field(
        None,
        description="how many inputs of the validation on the original code this check fed the "
        "property again beside its fresh ones (None: none were to replay)",
    )
    pool: list[PoolInput] = Field(
        default_factory=list,
        description="the counterexample pool: every distinct failing input (by value) of this "
        "test, in the order first seen, from its run, the pool pass that runs every input to "
        "the end, and shrinking, each with its measures (empty: passed, not a Hypothesis test, "
        "or a report from before the pool)",
    )
    pool_lines_by: str | None = Field(
        None, description="how the pool's lines were measured: coverage.py or settrace"
    )
    pool_note: str | None = Field(
        None,
        description="what the pool lacks: the pass cut by the time limit, no line coverage "
        "and why, inputs left out, the input pick-then-shrink picked",
    )
    pool_ran: int | None = Field(
        None, description="inputs the pool pass ran to the end (None: no pool pass)"
    )
    pool_failed: int | None = Field(None, description="of those, the inputs that failed")
    hard_inputs: int | None = Field(
        None,
        description="inputs of this test that drew the input generator's shared hard inputs "
        "(None: none)",
    )
    contradicts: Contradiction | None = Field(
        None,
        description="with the issue's stated examples as an oracle: the first input on which "
        "the property failed although every call was answered as the issue states",
    )
    duration: float = 0.0

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(
            self,
            handler,
            (
                "origin",
                "replayed",
                "pool",
                "pool_lines_by",
                "pool_note",
                "pool_ran",
                "pool_failed",
                "hard_inputs",
                "contradicts",
            ),
        )

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
        return [*self.examples, *self.pooled_inputs()]

    def pooled_inputs(self) -> list[PoolInput]:
        """The pool's inputs that are not among ``examples`` (compared without spaces)."""
        known = {_squeezed(e.example) for e in self.examples}
        return [p for p in self.pool if _squeezed(p.example) not in known]


def _squeezed(example: str | None) -> str:
    return re.sub(r"\s+", "", example or "")


#: How a test command that fails on the original code too was compared: ``by test`` (its
#: output is pytest's: the tests failing now failed there too), ``whole`` (its output cannot be
#: compared test by test: its failure is left out, and the verdict is at best ``partial``).
TestCmdBaseline = Literal["by test", "whole"]


class Coverage(BaseModel):
    """How much of a check ran: what a verdict rests on, said in every verdict's reason.

    Only test files of the base commit count (``related_found``); one counts as run only when
    one of its tests passed or failed on the patch. A file the patch adds is the patch's own
    evidence (``related_added``), one that fails to import on the original code and the patch
    alike ran nothing (``related_broken``): neither raises the share that ran (see
    :mod:`agent.pgs.coverage`).
    """

    model_config = ConfigDict(extra="forbid")

    properties: int = Field(0, description="the Tester's properties run")
    issue_tests: int = Field(0, description="repository tests standing for the issue run")
    related_found: int = Field(
        0, description="related repository test files found that the base commit has"
    )
    related_run: int = Field(0, description="of those, the files one test of which ran")
    related_cut: int = Field(0, description="of those, the files a time budget left out")
    related_broken: list[str] = Field(
        default_factory=list,
        description="of those, the files that fail to import on the original code and the patch",
    )
    related_idle: list[str] = Field(
        default_factory=list,
        description="of those, the other files none of whose tests ran (all skipped, none "
        "collected, or the file fails to import on the patch only)",
    )
    related_added: list[str] = Field(
        default_factory=list,
        description="related test files the patch adds: run, never counted",
    )
    test_cmd: str | None = Field(None, description="the test command run instead, if any")
    test_cmd_baseline: TestCmdBaseline | None = Field(
        None,
        description="the test command fails on the original code too: compared 'by test' or "
        "left out 'whole' (None: it passed there, or no command)",
    )
    not_counted: list[str] = Field(
        default_factory=list,
        description="repository failures not counted: the original code fails them too",
    )

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(
            self, handler, ("related_broken", "related_idle", "related_added", "test_cmd_baseline")
        )

    @property
    def partial(self) -> bool:
        """Fewer than :data:`PARTIAL_BELOW` of the related test files ran, or the test
        command fails on the original code in a way that cannot be compared test by test."""
        return self.partial_reason() is not None

    def partial_reason(self) -> str | None:
        """Why a check that would pass is only ``partial`` (None: it is not)."""
        if self.test_cmd and self.test_cmd_baseline == "whole":
            return (
                "the test command fails on the original code too and its output cannot be "
                "compared test by test"
            )
        found = self.related_found
        if found > 0 and self.related_run < PARTIAL_BELOW * found:
            return f"fewer than {PARTIAL_BELOW:.0%} of the related test files ran"
        return None

    def describe(self) -> str:
        """One sentence, e.g. ``checked: 3 properties, 2 of 6 related test files ran (1 left
        out by the time budget; 3 failed to import on the original code too: ...; 12 added by
        the patch not counted)``."""
        parts = [_count(self.properties, "property", "properties")]
        if self.issue_tests:
            parts.append(_count(self.issue_tests, "issue test"))
        broken = set(self.related_broken)
        others = [n for n in self.not_counted if n not in broken]
        if self.test_cmd:
            parts.append(self._command(others))
        elif self.related_found or self.related_added:
            parts.append(self._related())
        else:
            parts.append("no related test file found")
        said = "checked: " + ", ".join(parts)
        if others:
            said += f"; not counted, as the original code fails them too: {_some(others)}"
        return said

    def _command(self, others: list[str]) -> str:
        command = f"the test command `{self.test_cmd}`"
        own = TEST_CMD_PREFIX + (self.test_cmd or "")
        if own in others:
            others.remove(own)
        if self.test_cmd_baseline == "by test":
            command += " (it fails on the original code too: compared test by test)"
        elif self.test_cmd_baseline == "whole":
            command += (
                " (it fails on the original code too and its output cannot be compared test "
                "by test: its failure is not counted)"
            )
        return command

    def _related(self) -> str:
        if self.related_found:
            ran = f"{self.related_run} of {self.related_found} related test files ran"
        else:
            ran = "no related test file of the base commit"
        notes = []
        if self.related_cut:
            notes.append(f"{self.related_cut} left out by the time budget")
        if self.related_broken:
            notes.append(
                f"{len(self.related_broken)} failed to import on the original code too: "
                + _some(self.related_broken)
            )
        if self.related_idle:
            notes.append(f"{len(self.related_idle)} ran no test: {_some(self.related_idle)}")
        if self.related_added:
            notes.append(f"{len(self.related_added)} added by the patch not counted")
        return ran + (f" ({'; '.join(notes)})" if notes else "")


def _some(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


class OracleReport(BaseModel):
    """What the oracle of the issue's stated examples had in place in one run."""

    model_config = ConfigDict(extra="forbid")
    stated: list[str] = Field(default_factory=list, description="every stated example read")
    installed: list[str] = Field(default_factory=list, description="the callables it answered")
    unresolved: list[str] = Field(
        default_factory=list, description="named callables it could not find (not answered)"
    )


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
    imported: list[str] | None = Field(
        None,
        description="dotted names of the repository's modules the run loaded (what its tests "
        "import, directly or not; None: not recorded)",
    )
    pool_counter: str | None = Field(
        None, description="the token counter the pool's tokens were counted with (host side)"
    )
    oracle: OracleReport | None = Field(
        None, description="a run with the issue's stated examples as an oracle (PGS_ORACLE)"
    )

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(self, handler, ("coverage", "imported", "pool_counter", "oracle"))

    def failures(self) -> list[TestResult]:
        return [r for r in self.results if r.failed]

    def by_id(self) -> dict[str, TestResult]:
        return {r.nodeid: r for r in self.results}
