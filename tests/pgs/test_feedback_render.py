"""Feedback: the message the model reads. What a property failure says (its rule, input, result
and round), each category's instruction, pytest's output and source cut to size, replaced
templates, and the io mode's examples. Choosing the failure is in test_feedback.py."""

from __future__ import annotations

import pytest

from agent.pgs.feedback import MAX_TRACE_LINES, render_feedback, select_failure
from agent.record.check import CheckReport, TestResult
from tests.support.feedback_results import SIMPLE, failure, violation


def long_pytest_output(trace_lines: int) -> str:
    """What pytest -vv prints for one failing Hypothesis property, verbatim in shape."""
    source = "\n".join(f"    {line}" for line in LONG_SOURCE.splitlines())
    frames = "\n".join(
        f"src/lib/module_{i % 7}.py:{100 + i}: in helper_{i}\n"
        f"    return helper_{i + 1}(items, key=key, reverse=reverse, cache=cache)"
        for i in range(trace_lines // 2)
    )
    return (
        "=================================== FAILURES ===================================\n"
        "_______________________________ test_sort_is_sorted ______________________________\n"
        "\n"
        "    @given(st.lists(st.integers()))\n"
        f">   def test_sort_is_sorted(xs):\n{source}\n"
        "\n"
        ".pgs/properties/test_sort.py:12: \n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
        f"{frames}\n"
        "E   AssertionError: assert [1, 0] == [0, 1]\n"
        "E     At index 0 diff: 1 != 0\n"
        "E     Full diff:\n"
        "E     - [0, 1]\n"
        "E     + [1, 0]\n"
        "E   Falsifying example: test_sort_is_sorted(\n"
        "E       xs=[1, 0],\n"
        "E   )\n"
        "\n"
        "You can reproduce this example by temporarily adding @reproduce_failure('6.100.0', "
        "b'AXicY2BgYGAEIgYGAAAVAAM=') as a decorator on your test case\n"
        "=========================== short test summary info ============================\n"
        "FAILED .pgs/properties/test_sort.py::test_sort_is_sorted - AssertionError: assert"
        " [1, 0] == [0, 1]\n"
        "============================== 1 failed in 0.84s ===============================\n"
    )


LONG_SOURCE = """\
result = sort_items(xs)
# every neighbouring pair is in order
for a, b in zip(result, result[1:]):
    assert a <= b, f"{result} is not sorted"
assert sorted(result) == sorted(xs)
assert len(result) == len(xs)
"""


def sorted_violation(trace_lines: int) -> TestResult:
    raw = long_pytest_output(trace_lines)
    return TestResult(
        nodeid=".pgs/properties/test_sort.py::test_sort_is_sorted",
        kind="issue",
        rule="sorting returns the items in non-decreasing order",
        outcome="failed",
        category="property_violation",
        example="test_sort_is_sorted(\n    xs=[1, 0],\n)",
        returned="assert [1, 0] == [0, 1]",
        trace="\n".join(f"src/lib/m.py:{i}: in helper_{i}" for i in range(trace_lines)),
        output=raw,
    )


def test_property_feedback_says_rule_input_result_and_round_in_few_lines() -> None:
    result = sorted_violation(100)
    chosen = select_failure(CheckReport(results=[result]), "property-min", SIMPLE)
    assert chosen is not None

    message = render_feedback(chosen, "property-min", 2, 5)

    assert message.startswith("Round 2 of 5.")
    assert "Property violated: sorting returns the items in non-decreasing order" in message
    assert "Input: xs=[1, 0]" in message
    assert "Got: assert [1, 0] == [0, 1]" in message
    trace = [line for line in message.splitlines() if "in helper_" in line]
    assert len(trace) == MAX_TRACE_LINES and trace[-1].strip() == "src/lib/m.py:99: in helper_99"
    assert "Make the rule hold for every valid input" in message
    assert "\n\n\n" not in message and message == message.strip()

    raw_tokens = SIMPLE.count(result.output or "")
    assert raw_tokens / SIMPLE.count(message) >= 3


def test_each_category_gets_its_own_instruction() -> None:
    cases: list[tuple[TestResult, list[str]]] = [
        (
            failure("wrong_answer", "tests/test_a.py::test_old", returned="assert 3 == 4"),
            ["Got: assert 3 == 4", "passed before your change"],
        ),
        (
            failure(
                "runtime_error",
                "p.py::test_div",
                "test_div(n=0)",
                exception="ZeroDivisionError: division by zero",
            ),
            ["Input: n=0", "Raised: ZeroDivisionError: division by zero", "crashed"],
        ),
        (
            failure("timeout", "p.py::test_fib", "test_fib(n=90)", duration=10.0),
            ["Input: n=90", "Too slow on this input (stopped after 10.0 s)", "faster"],
        ),
    ]
    for result, says in cases:
        chosen = select_failure(CheckReport(results=[result]), "property", SIMPLE)
        assert chosen is not None
        message = render_feedback(chosen, "property", 1, 5)
        for phrase in says:
            assert phrase in message, (phrase, message)
        assert "Property violated" not in message


def test_without_a_rule_the_test_name_says_it() -> None:
    result = failure("property_violation", "p.py::test_roundtrip_keeps_text[utf8]", "t(s='é')")
    chosen = select_failure(CheckReport(results=[result]), "property-min", SIMPLE)
    assert chosen is not None
    assert "Property violated: roundtrip keeps text" in render_feedback(chosen, "property", 1, 1)


def test_templates_can_be_replaced_and_rounds_are_checked() -> None:
    chosen = select_failure(CheckReport(results=[violation("p::t", [3])]), "property", SIMPLE)
    assert chosen is not None
    custom = "{{ round }}/{{ rounds }} {{ input }} {{ category }}"
    assert render_feedback(chosen, "property", 3, 4, custom) == "3/4 xs=[3] property_violation"
    with pytest.raises(ValueError, match="round 6"):
        render_feedback(chosen, "property", 6, 5)


def example_test(nodeid: str, statement: str, output: str) -> TestResult:
    """An issue example as the extraction turn writes it: a concrete test (no Hypothesis
    input) whose pgs_issue mark states the input and the expected output."""
    return failure("wrong_answer", nodeid, kind="issue", rule=statement, output=output)


def test_io_feeds_back_a_failing_issue_example_with_its_input_expected_and_actual() -> None:
    long = example_test(
        ".pgs/properties/test_examples.py::test_long",
        "median([10, 20, 30, 40, 50, 60]) should return 35.0",
        "E   AssertionError: returned 40, expected 35.0",
    )
    short = example_test(
        ".pgs/properties/test_examples.py::test_short",
        "median([1, 2]) should return 1.5",
        "E   AssertionError: returned 2, expected 1.5",
    )
    repo = failure("wrong_answer", "tests/test_stats.py::test_odd", output="E   assert 2 == 3")
    report = CheckReport(results=[long, short, repo])

    io = select_failure(report, "io", SIMPLE)
    assert io is not None and io.result == long and io.candidates == 3
    assert io.input == "median([10, 20, 30, 40, 50, 60])"  # the input, as the mark states it
    message = render_feedback(io, "io", 1, 5)
    lines = message.splitlines()
    assert lines[0] == (
        "Round 1 of 5: the issue's example .pgs/properties/test_examples.py::test_long failed."
    )
    # Self-Edit's comment: the input and the expected output, then what the code gave.
    assert lines[1] == (
        "Example (input and expected output, as the issue states them): "
        "median([10, 20, 30, 40, 50, 60]) should return 35.0"
    )
    assert "returned 40, expected 35.0" in message
    assert lines[-1] == "Rewrite the code so that this test passes."

    # io-min: the failing example whose input has the fewest tokens (Table 7's second row).
    smallest = select_failure(report, "io-min", SIMPLE)
    assert smallest is not None and smallest.result == short and smallest.mode == "io-min"
    assert smallest.input == "median([1, 2])" and smallest.tokens == SIMPLE.count("median([1, 2])")
    assert smallest.tokens < SIMPLE.count(io.input)
    assert "fewest" not in smallest.why and "tokens" in smallest.why
    assert "median([1, 2]) should return 1.5" in render_feedback(smallest, "io-min", 2, 5)


def test_io_min_among_repository_tests_alone_picks_the_shortest_node_id() -> None:
    a = failure("wrong_answer", "tests/test_a_long_name.py::test_b", output="E   assert 1 == 2")
    b = failure("runtime_error", "tests/t.py::c", output="E   ValueError")
    chosen = select_failure(CheckReport(results=[a, b]), "io-min", SIMPLE)
    assert chosen is not None and chosen.result == b
    message = render_feedback(chosen, "io-min", 1, 5)
    assert message.startswith("Round 1 of 5: tests/t.py::c failed. Its pytest output:")
