"""Feedback: choosing the one failure to show. The message the model reads is in
test_feedback_render.py."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import TokenizerUnavailable
from agent.pgs import feedback
from agent.pgs.feedback import failure_input, render_feedback, select_failure
from agent.record.check import PRIORITY, CheckReport, FailingInput, TestResult
from tests.support.feedback_results import SIMPLE, failure, violation

# --------------------------------------------------------------------------- the input


def test_failure_input_is_the_examples_arguments() -> None:
    assert failure_input(violation("p.py::test_f", [0, 0])) == "xs=[0, 0]"
    multi = failure("property_violation", "p.py::test_g", "test_g(\n    xs=[0],\n    s='a',\n)")
    assert failure_input(multi) == "xs=[0], s='a'"
    prefixed = failure("property_violation", "p.py::t", "Falsifying example: t(n=3)")
    assert failure_input(prefixed) == "n=3"
    assert failure_input(failure("wrong_answer", "tests/test_a.py::test_b")) == (
        "tests/test_a.py::test_b"
    )


# --------------------------------------------------------------------------- selection


def test_property_min_picks_the_input_with_fewest_tokens() -> None:
    big = violation("p.py::test_sorted", list(range(100, 120)))
    small = violation("p.py::test_sorted", [7])
    middle = violation("p.py::test_unique", [1, 1])
    report = CheckReport(results=[big, middle, small, failure("pass", "p.py::test_ok")])

    chosen = select_failure(report, "property-min", SIMPLE)

    assert chosen is not None
    assert chosen.result == small and chosen.input == "xs=[7]"
    assert chosen.category == "property_violation" and chosen.candidates == 3
    assert chosen.tokens == 5 and chosen.counter == "simple"  # xs = [ 7 ]
    assert chosen.why == (
        "3 property violations; chose the one whose input has 5 tokens (simple counter)"
    )


def test_a_property_violation_beats_a_runtime_error_with_a_smaller_input() -> None:
    crash = failure("runtime_error", "t.py::test_c", "test_c(n=0)", exception="ZeroDivisionError")
    report = CheckReport(results=[crash, violation("p.py::test_sorted", list(range(20)))])
    for mode in ("property", "property-min"):
        chosen = select_failure(report, mode, SIMPLE)
        assert chosen is not None and chosen.category == "property_violation"


def test_property_mode_takes_the_first_and_io_the_first_whatever_its_category() -> None:
    crash = failure("runtime_error", "t.py::test_c", output="RAW CRASH OUTPUT")
    big = violation("p.py::test_sorted", list(range(20)))
    small = violation("p.py::test_sorted", [1])
    report = CheckReport(results=[crash, big, small])

    chosen = select_failure(report, "property", SIMPLE)
    assert chosen is not None and chosen.result == big
    assert "chose the first in report order" in chosen.why

    io = select_failure(report, "io", SIMPLE)
    assert io is not None and io.result == crash and io.candidates == 3
    message = render_feedback(io, "io", 2, 5)
    assert message.splitlines()[0] == "Round 2 of 5: t.py::test_c failed. Its pytest output:"
    assert "RAW CRASH OUTPUT" in message
    assert "Property" not in message and "Input" not in message


def test_nothing_failed_means_no_feedback_but_a_collection_error_is_a_runtime_error() -> None:
    assert select_failure(CheckReport(results=[failure("pass", "t.py::a")]), "io") is None
    broken = CheckReport(errors=["ERROR collecting t.py\nImportError: cannot import name 'x'"])
    chosen = select_failure(broken, "property-min")
    assert chosen is not None and chosen.category == "runtime_error"
    assert chosen.result.exception == "ImportError: cannot import name 'x'"


def test_a_counter_that_fails_part_way_is_replaced_by_simple_for_every_candidate() -> None:
    class Flaky:
        name = "vllm:flaky"
        calls = 0

        def count(self, text: str) -> int:
            self.calls += 1
            if self.calls > 1:
                raise TokenizerUnavailable("server went away")
            return 1000

    report = CheckReport(results=[violation("p::a", list(range(9))), violation("p::b", [1])])
    chosen = select_failure(report, "property-min", Flaky())
    assert chosen is not None and chosen.counter == "simple" and chosen.input == "xs=[1]"


categories = st.sampled_from([*PRIORITY, "pass"])
results = st.builds(
    lambda category, xs, i: failure(category, f"t.py::test_{i}", f"test_{i}(xs={xs!r})"),
    categories,
    st.lists(st.integers(-(10**6), 10**6), max_size=6),
    st.integers(0, 5),
)
reports = st.lists(results, max_size=12).map(lambda rs: CheckReport(results=rs))


@settings(max_examples=200)
@given(reports, st.sampled_from(["property", "property-min"]))
def test_no_lower_priority_failure_is_chosen_while_a_higher_one_exists(
    report: CheckReport, mode: feedback.FeedbackMode
) -> None:
    chosen = select_failure(report, mode, SIMPLE)
    present = [r.category for r in report.failures()]
    if not present:
        assert chosen is None
        return
    assert chosen is not None
    assert chosen.category == chosen.result.category
    assert PRIORITY.index(chosen.category) == min(PRIORITY.index(c) for c in present)


@settings(max_examples=200)
@given(reports)
def test_property_min_choice_has_the_minimum_count_of_its_category(report: CheckReport) -> None:
    chosen = select_failure(report, "property-min", SIMPLE)
    if chosen is None:
        return
    pool = [r for r in report.failures() if r.category == chosen.category]
    assert chosen.candidates == len(pool)
    assert chosen.tokens == SIMPLE.count(chosen.input)
    assert chosen.tokens == min(SIMPLE.count(failure_input(r)) for r in pool)
    assert select_failure(report, "property-min", SIMPLE) == chosen  # deterministic


# --------------------------------------------------------------------------- several inputs

LONG = [3, 1, 3, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 3]


def explicit_and_generated(nodeid: str = ".pgs/properties/test_d.py::test_dedupe") -> TestResult:
    """What the plugin records when an explicit @example fails and so does a generated input."""
    name = nodeid.rsplit("::", 1)[-1]
    explicit = FailingInput(
        example=f"{name}(xs={LONG!r})",
        explicit=True,
        category="wrong_answer",
        returned=f"returned {LONG!r}, expected [3, 1, 2, 5]\nassert 9 == 7",
        trace=f"{nodeid.split('::')[0]}:9 in {name}\n    assert out == expected",
    )
    generated = FailingInput(
        example=f"{name}(\n    xs=[0, 0],\n)",
        category="property_violation",
        returned="returned [0, 0], expected [0]\nassert [0, 0] == [0]\n"
        "  \n  Use -v to get more diff",
        trace="listutils/core.py:4 in dedupe\n    return xs",
    )
    return TestResult(
        nodeid=nodeid,
        kind="issue",
        rule="every element once, in the order of first occurrence",
        outcome="failed",
        **explicit.model_dump(),
        examples=[explicit, generated],
    )


def test_property_min_chooses_among_every_input_of_every_result() -> None:
    result = explicit_and_generated()
    other = violation("p.py::test_sorted", [5, 4, 3])
    report = CheckReport(results=[other, result])
    for mode in ("property", "property-min"):
        chosen = select_failure(report, mode, SIMPLE)
        assert chosen is not None
        if mode == "property":  # the first property violation in report order
            assert chosen.result == other
            continue
        assert chosen.result == result and chosen.chosen == result.examples[1]
        assert chosen.input == "xs=[0, 0]" and chosen.category == "property_violation"
        assert chosen.candidates == 2  # the two property violations; the explicit ranks lower
        assert chosen.issue_example == f"xs={LONG!r}"


def test_the_explicit_example_is_chosen_when_it_is_the_smallest() -> None:
    small = FailingInput(example="t(xs=[1])", explicit=True, category="property_violation")
    big = FailingInput(example=f"t(xs={LONG!r})", category="property_violation")
    result = TestResult(
        nodeid="p.py::t", outcome="failed", category="property_violation", examples=[big, small]
    )
    chosen = select_failure(CheckReport(results=[result]), "property-min", SIMPLE)
    assert chosen is not None and chosen.chosen == small and chosen.issue_example is None
    message = render_feedback(chosen, "property-min", 1, 5)
    assert "Input (from the issue): xs=[1]" in message and "also fails" not in message


def test_a_report_written_before_examples_existed_still_loads_and_selects() -> None:
    old = {
        "results": [
            {
                "nodeid": ".pgs/properties/test_p.py::test_p",
                "kind": "issue",
                "rule": "no repeats",
                "outcome": "failed",
                "category": "property_violation",
                "example": "test_p(xs=[0, 0])",
                "explicit": False,
                "returned": "assert 2 == 1",
                "trace": None,
                "output": "raw",
                "note": None,
                "duration": 0.1,
            }
        ],
        "errors": [],
        "exit_code": 1,
        "duration": 1.0,
    }
    report = CheckReport.model_validate_json(json.dumps(old))
    (result,) = report.results
    assert result.examples == []
    (only,) = result.failing_inputs()
    assert (only.example, only.category, only.returned) == (
        "test_p(xs=[0, 0])",
        "property_violation",
        "assert 2 == 1",
    )
    chosen = select_failure(report, "property-min", SIMPLE)
    assert chosen is not None and chosen.input == "xs=[0, 0]" and chosen.chosen == only
    assert "Got: assert 2 == 1" in render_feedback(chosen, "property-min", 1, 5)


def test_a_repository_test_broken_by_the_patch_outranks_a_property_violation() -> None:
    broken = failure(
        "wrong_answer",
        "tests/test_core.py::test_dedupe_example",
        returned="assert [1, 2, 3] == [3, 1, 2]",
        note="passed before the patch",
        examples=[FailingInput(category="runtime_error", exception="KeyError: 3")],
    )
    report = CheckReport(results=[violation("p.py::test_sorted", [1]), broken])
    for mode in ("property", "property-min"):
        chosen = select_failure(report, mode, SIMPLE)
        assert chosen is not None and chosen.result == broken, mode
        assert chosen.category == "wrong_answer"  # the checker's category, not the plugin's
        assert chosen.why.startswith("1 repository test broken by the patch; chose")
        message = render_feedback(chosen, mode, 1, 5, rerun="python -m pytest x")
        assert message.splitlines()[:2] == [
            "Round 1 of 5. Regression.",
            "Test: tests/test_core.py::test_dedupe_example",
        ]
        assert "This passed before your change and fails now" in message
    io = select_failure(report, "io", SIMPLE)
    assert io is not None and io.result.nodeid == "p.py::test_sorted"  # report order
    # A repository test that did not pass before (a new test) has no such rank.
    new = failure("wrong_answer", "tests/test_new.py::test_x", returned="assert 1 == 2")
    unranked = CheckReport(results=[new, violation("p.py::test_sorted", [1])])
    chosen = select_failure(unranked, "property-min", SIMPLE)
    assert chosen is not None and chosen.category == "property_violation"


def test_feedback_names_the_test_the_input_the_rerun_and_the_issues_example_in_one_line() -> None:
    result = explicit_and_generated()
    chosen = select_failure(CheckReport(results=[result]), "property-min", SIMPLE)
    assert chosen is not None
    rerun = (
        "PYTHONPATH=/root/.pgs_plugin python3 -m pytest -p pgs_pytest_plugin -q "
        "'.pgs/properties/test_d.py::test_dedupe'"
    )
    message = render_feedback(chosen, "property-min", 1, 5, rerun=rerun)
    lines = message.splitlines()
    assert lines[0] == (
        "Round 1 of 5. Property violated: every element once, in the order of first occurrence"
    )
    assert lines[1] == "Test: .pgs/properties/test_d.py::test_dedupe"
    assert lines[2] == "Input: xs=[0, 0]"
    assert lines[3:5] == ["Got: returned [0, 0], expected [0]", "assert [0, 0] == [0]"]
    assert "Use -v" not in message
    also = [line for line in lines if "also fails" in line]
    assert also == [f"The issue's own example also fails: xs={LONG!r}"]
    assert f"Rerun it alone: {rerun}" in lines
    assert "listutils/core.py:4 in dedupe" in message  # the generated input's own trace
    assert len(lines) <= 12
    without = render_feedback(chosen, "property-min", 1, 5)
    assert "Rerun it alone" not in without and "Test: .pgs/" in without


def test_io_feedback_reads_as_self_edits_execution_feedback() -> None:
    result = explicit_and_generated()
    result.output = "E   AssertionError: returned [3, 1, 3], expected [3, 1]\nE   Failing explicit"
    chosen = select_failure(CheckReport(results=[result]), "io", SIMPLE)
    assert chosen is not None and chosen.chosen == result.examples[0]  # the first, as reported
    message = render_feedback(chosen, "io", 1, 5, rerun="ignored")
    assert message.splitlines()[0] == (
        "Round 1 of 5: .pgs/properties/test_d.py::test_dedupe failed. Its pytest output:"
    )
    assert "returned [3, 1, 3], expected [3, 1]" in message
    assert message.splitlines()[-1] == "Rewrite the code so that this test passes."
    assert "ignored" not in message


inputs = st.builds(
    lambda category, xs, explicit: FailingInput(
        example=f"t(xs={xs!r})", explicit=explicit, category=category
    ),
    st.sampled_from(PRIORITY),
    st.lists(st.integers(-(10**6), 10**6), max_size=6),
    st.booleans(),
)
multi = st.builds(
    lambda i, examples, regressed: TestResult(
        nodeid=f"t.py::test_{i}",
        outcome="failed",
        category=examples[0].category,
        example=examples[0].example,
        note="passed before the patch" if regressed else None,
        examples=examples,
    ),
    st.integers(0, 5),
    st.lists(inputs, min_size=1, max_size=3),
    st.booleans(),
)


@settings(max_examples=200)
@given(st.lists(multi, min_size=1, max_size=6))
def test_property_min_takes_the_fewest_tokens_among_the_inputs_of_the_top_rank(
    results: list[TestResult],
) -> None:
    report = CheckReport(results=results)
    chosen = select_failure(report, "property-min", SIMPLE)
    assert chosen is not None
    regressed = [r for r in results if r.regressed]
    if regressed:
        assert chosen.result.regressed
        pool = [f for r in regressed for f in r.failing_inputs()]
    else:
        every = [f for r in results for f in r.failing_inputs()]
        best = min(PRIORITY.index(f.category) for f in every)
        pool = [f for f in every if PRIORITY.index(f.category) == best]
        assert chosen.category == PRIORITY[best]
    assert chosen.candidates == len(pool)
    assert chosen.chosen in chosen.result.failing_inputs()
    assert chosen.tokens == min(SIMPLE.count(failure_input(chosen.result, f)) for f in pool)
    assert select_failure(report, "property-min", SIMPLE) == chosen
