"""PGS end to end when the Tester's property carries a long explicit ``@example`` (the scripted
server, real Docker, real pytest and Hypothesis in the repository's Python 3.9).

Hypothesis stops at a failing explicit example: it neither generates nor shrinks. A Generator
that special-cases the issue's own two-element example still fails the Tester's fourteen-element
``@example``, and that long input was all the feedback could show. The plugin now searches on
without the explicit examples, so the feedback carries the short, shrunk counterexample, names
the test and the command that reruns it, and mentions the long example in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.example_repos import DEDUPE, PROPERTY_DIR
from tests.support.pgs_session import (
    Example,
    _example,
    asked,
    candidate,
    counterexample,
    run_session,
    session,
    submit,
    writing_properties,
)

pytestmark = pytest.mark.docker

#: The buggy dedupe keeps a repeated last element; fourteen elements, the last a repeat.
LONG = [3, 1, 3, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 3]
PROPERTY_FILE = f"{PROPERTY_DIR}/test_first_occurrences.py"
NODEID = f"{PROPERTY_FILE}::test_each_element_once_in_order"
PROPERTY = f"""\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from listutils.core import dedupe


@pytest.mark.pgs_issue("every element once, in the order of first occurrence")
@given(st.lists(st.integers()))
@example(xs={LONG!r})
def test_each_element_once_in_order(xs):
    out = dedupe(xs)
    expected = list(dict.fromkeys(xs))
    assert out == expected, f"returned {{out!r}}, expected {{expected!r}}"
"""

#: The issue's own example, special-cased in front of the buggy code.
SPECIAL_CASED = DEDUPE.files[DEDUPE.module].replace(
    "    seen = set()\n",
    "    if xs == [1, 2, 1]:\n        return [1, 2]\n    seen = set()\n",
    1,
)
GENERATOR = [
    candidate(DEDUPE, SPECIAL_CASED, "the issue's input gives the issue's answer"),
    submit("Fixed the issue's case."),
    candidate(DEDUPE, DEDUPE.fixed, "skip every element already seen"),
    submit("Fixed for every input."),
]
TESTER = writing_properties(DEDUPE, {PROPERTY_FILE: PROPERTY})


@pytest.fixture(scope="module")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(DEDUPE, tmp_path_factory)


def test_feedback_carries_the_shrunk_counterexample_not_the_long_explicit_one(
    dedupe: Example, tmp_path: Path
) -> None:
    assert DEDUPE.files[DEDUPE.module] != SPECIAL_CASED
    run = run_session(dedupe, tmp_path, session(GENERATOR, TESTER), {"fresh_probes": 0})
    assert run.pgs["validation"]["kept"] == [NODEID]
    first = run.pgs["rounds"][0]
    (result,) = [r for r in first["report"]["results"] if r["nodeid"] == NODEID]
    # The report holds the failing inputs: the explicit example pytest reported, the generated
    # one, shrunk, then the others the search failed on.
    assert [(e["explicit"], e["category"]) for e in result["examples"]][:2] == [
        (True, "wrong_answer"),
        (False, "property_violation"),
    ]
    assert all(not e["explicit"] for e in result["examples"][1:])
    assert counterexample(result["examples"][0]["example"]) == LONG
    short = counterexample(result["examples"][1]["example"])
    assert 2 <= len(short) <= 3

    selection = first["selection"]
    assert selection["category"] == "property_violation"
    assert selection["chosen"]["explicit"] is False
    assert counterexample(selection["input"]) == short
    assert selection["issue_example"] == f"xs={LONG!r}"

    (message,) = run.feedback
    lines = message.splitlines()
    assert lines[0] == (
        "Round 1 of 5. Property violated: every element once, in the order of first occurrence"
    )
    assert f"Test: {NODEID}" in lines
    assert f"Input: xs={short!r}" in lines
    assert any(line.startswith(f"Got: returned {short!r}, expected [") for line in lines)
    # The long example, in one line of its own, and nowhere else.
    long_text = str(LONG)[1:-1]
    assert [line for line in lines if long_text in line] == [
        f"The issue's own example also fails: xs={LONG!r}"
    ]
    (rerun,) = [line for line in lines if line.startswith("Rerun it alone: ")]
    assert "pgs_pytest_plugin_start.py" in rerun and NODEID in rerun  # the check's launcher
    assert len(lines) <= 12, message
    # The Generator's model received exactly that message in its conversation.
    after = [r for r in run.generator_requests if asked(r) == 2]
    assert after and after[0]["messages"][-1]["content"] == message
    assert run.pgs["verdict"] == "passed" and len(run.pgs["rounds"]) == 2
