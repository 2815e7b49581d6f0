"""The ablation without filtering (``--no-pgs.filter``) filters nothing, end to end (scripted
models over HTTP, real Docker sandboxes of the DEDUPE example repository, real pytest and
Hypothesis): every property that runs is kept, a regression property that contradicts the
issue included, and the Tester gets no second turn from the validation report. With the
filter, the same properties are dropped and the second turn comes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.example_repos import DEDUPE, PROPERTY_DIR
from tests.support.pgs_session import (
    Example,
    Policy,
    _example,
    asked,
    candidate,
    is_tester,
    run_session,
    submit,
    write_files,
)

pytestmark = pytest.mark.docker

#: Pins the issue's own example to the buggy answer: it passes on the original code, and the
#: filter drops it as contradicting the issue property that states the same example.
PINNED = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from listutils.core import dedupe


@pytest.mark.pgs_regression("dedupe of the issue's example stays as it is")
@given(st.lists(st.integers(), max_size=0))
@example(xs=[1, 2, 1])
def test_issue_example_pinned(xs):
    assert dedupe(xs) == ([1, 2, 1] if xs == [1, 2, 1] else [])
"""
PINNED_ID = f"{PROPERTY_DIR}/test_pinned.py::test_issue_example_pinned"
PASSES_ID = f"{DEDUPE.property_path('issue_unsound_passes')}::test_keeps_every_element"
FAILS_ID = f"{DEDUPE.property_path('regression_unsound_fails')}::test_length_is_distinct_count"
#: The right fix, then (after feedback) the same again.
GENERATOR = [candidate(DEDUPE, DEDUPE.fixed, "skip what was seen"), submit("Fixed.")]


@pytest.fixture(scope="module")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(DEDUPE, tmp_path_factory)  # the image is cached by content


def policy(files: dict[str, str]) -> Policy:
    """The Tester writes ``files`` in every turn; the Generator fixes, then submits again."""

    def answer(request: dict[str, Any]) -> Any:
        n = asked(request)
        if is_tester(request):
            steps = [write_files(files, "properties"), submit("Written.")]
        else:
            steps = GENERATOR
        return steps[min(n, len(steps) - 1)]

    return answer


@pytest.mark.parametrize("filtered", [False, True])
def test_unfiltered_keeps_what_the_filter_drops(
    dedupe: Example, tmp_path: Path, filtered: bool
) -> None:
    files = {
        DEDUPE.property_path("issue_sound"): DEDUPE.properties["issue_sound"],
        DEDUPE.property_path("issue_unsound_passes"): DEDUPE.properties["issue_unsound_passes"],
        f"{PROPERTY_DIR}/test_pinned.py": PINNED,
    }
    options = {"filter": filtered, "rounds": 1, "fresh_probes": 0}
    run = run_session(dedupe, tmp_path, policy(files), options)
    validation = run.pgs["validation"]
    assert run.pgs["ablation"]["filter"] is filtered
    if filtered:
        dropped = {d["nodeid"]: d["reason"] for d in validation["dropped"]}
        assert set(dropped) == {PINNED_ID, PASSES_ID}
        assert "contradicts the issue" in dropped[PINNED_ID]
        assert run.pgs["verdict"] == "passed"
    else:
        assert validation["dropped"] == [] and {PINNED_ID, PASSES_ID} <= set(validation["kept"])
        # The pinned property punishes the right fix: the feedback names it, the verdict fails.
        assert run.feedback and PINNED_ID in run.feedback[0]
        assert run.pgs["verdict"] == "failed"


@pytest.mark.parametrize("filtered", [False, True])
def test_unfiltered_gives_the_tester_no_second_turn(
    dedupe: Example, tmp_path: Path, filtered: bool
) -> None:
    # No issue property shows the bug: one passes on the original, the regression one fails.
    files = {
        DEDUPE.property_path(role): DEDUPE.properties[role]
        for role in ("issue_unsound_passes", "regression_unsound_fails")
    }
    options = {"filter": filtered, "rounds": 1, "fresh_probes": 0}
    run = run_session(dedupe, tmp_path, policy(files), options)
    turns = [turn["why"] for turn in run.pgs["tester_turns"]]
    assert turns == (["first", "retry"] if filtered else ["first"])
    if not filtered:
        assert set(run.pgs["validation"]["kept"]) == {PASSES_ID, FAILS_ID}
