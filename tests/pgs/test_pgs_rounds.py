"""PGS rounds beyond the first check, end to end (scripted models over HTTP, real Docker
sandboxes of the DEDUPE example repository, real pytest and Hypothesis):

- the Tester's second turn, with the validation report, when no issue property survives;
- fresh probes: once every kept property passes, the Tester looks for new rules (never seeing
  the patch) and the candidate must meet those too;
- a diff left when a limit ends the run is checked, and its verdict recorded;
- ``--feedback io`` is Self-Edit: the issue's example as a test, the raw output of a failing
  repository test.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.example_repos import DEDUPE, PROPERTY_DIR
from tests.support.pgs_session import (
    SORTS_LONG_LISTS,
    Example,
    Policy,
    _example,
    asked,
    candidate,
    is_tester,
    pgs_run,
    run_session,
    submit,
    writing_properties,
)

pytestmark = pytest.mark.docker

RETRY_WORDS = "NO issue property survived"
PROBE_WORDS = "The properties already in the folder state these rules"
#: The issue property without its pgs mark: validation drops it ("neither ... marker").
UNMARKED = DEDUPE.properties["issue_sound"].replace(
    'pytestmark = pytest.mark.pgs_issue("the result holds no element twice")\n', ""
)
ISSUE_ONLY = {DEDUPE.property_path("issue_sound"): DEDUPE.properties["issue_sound"]}
ORDER = {DEDUPE.property_path("regression_sound"): DEDUPE.properties["regression_sound"]}
FIX_AT_ONCE = [candidate(DEDUPE, DEDUPE.fixed, "skip what was seen"), submit("Fixed.")]
NOTHING_NEW = [submit("Nothing to add.")]


@pytest.fixture(scope="module")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(DEDUPE, tmp_path_factory)  # the image is cached by content


def first_message(request: Mapping[str, Any]) -> str:
    return str(request["messages"][1]["content"])


def by_turn(
    generator: list[dict[str, Any]],
    first: list[dict[str, Any]],
    retry: list[dict[str, Any]] | None = None,
    probe: list[dict[str, Any]] | None = None,
) -> Policy:
    """The Generator's steps, and the Tester's by which turn asks (the turn's first message)."""

    def policy(request: dict[str, Any]) -> Any:
        if not is_tester(request):
            steps = generator
        elif RETRY_WORDS in first_message(request):
            steps = retry or NOTHING_NEW
        elif PROBE_WORDS in first_message(request):
            steps = probe or NOTHING_NEW
        else:
            steps = first
        n = asked(request)
        return steps[n] if n < len(steps) else None

    return policy


def conversations(requests: list[dict[str, Any]]) -> list[str]:
    """The first user message of each Tester conversation, in order."""
    firsts = [first_message(r) for r in requests if is_tester(r) and asked(r) == 0]
    return list(dict.fromkeys(firsts))


def test_when_every_issue_property_is_dropped_the_tester_gets_the_reasons_and_a_second_turn(
    dedupe: Example, tmp_path: Path
) -> None:
    unmarked = writing_properties(DEDUPE, {DEDUPE.property_path("issue_sound"): UNMARKED})
    policy = by_turn(FIX_AT_ONCE, unmarked, retry=writing_properties(DEDUPE, ISSUE_ONLY))
    run = pgs_run(dedupe, tmp_path, policy)

    pgs = run.pgs
    turns = pgs["tester_turns"]
    assert [t["why"] for t in turns[:2]] == ["first", "retry"]
    assert turns[0]["kept"] == [] and "neither a pgs_issue" in turns[0]["dropped"][0]["reason"]
    issue_id = f"{DEDUPE.property_path('issue_sound')}::test_no_repeats"
    assert turns[1]["kept"] == [issue_id]
    # The retry's first message holds the issue and the validation report's own lines.
    retry = [m for m in conversations(run.requests) if RETRY_WORDS in m]
    assert len(retry) == 1 and DEDUPE.issue in retry[0]
    assert f"- {turns[0]['dropped'][0]['nodeid']}: it has neither a pgs_issue" in retry[0]
    # Both conversations are in the trajectory; the patch passed the second set.
    assert pgs["tester"]["history"] and pgs["tester_2"]["history"]
    assert pgs["verdict"] == "passed"
    assert "1 issue property that failed on the original code pass" in pgs["verdict_reason"]
    assert "verdict: passed" in run.stderr and "why: 1 issue property" in run.stderr


def test_a_run_whose_properties_are_all_dropped_twice_ends_tests_only(
    dedupe: Example, tmp_path: Path
) -> None:
    unmarked = writing_properties(DEDUPE, {DEDUPE.property_path("issue_sound"): UNMARKED})
    run = pgs_run(dedupe, tmp_path, by_turn(FIX_AT_ONCE, unmarked, retry=unmarked))

    pgs = run.pgs
    assert [t["why"] for t in pgs["tester_turns"]][:2] == ["first", "retry"]
    assert pgs["validation"]["kept"] == []
    assert pgs["verdict"] == "tests-only"
    assert (
        "no issue property took part; 0 regression properties and 2 related"
        in (pgs["verdict_reason"])
    )
    assert "verdict: tests-only" in run.stderr
    assert run.code == 0  # the run itself submitted


def test_a_fresh_probe_finds_what_the_first_properties_missed(
    dedupe: Example, tmp_path: Path
) -> None:
    generator = [
        candidate(DEDUPE, SORTS_LONG_LISTS, "skip what was seen"),
        submit("Fixed."),
        *FIX_AT_ONCE,
    ]
    policy = by_turn(
        generator,
        writing_properties(DEDUPE, ISSUE_ONLY),
        probe=writing_properties(DEDUPE, ORDER),
    )
    run = run_session(dedupe, tmp_path, policy, {})

    pgs = run.pgs
    first = pgs["rounds"][0]
    order_id = f"{DEDUPE.property_path('regression_sound')}::test_order_of_first_occurrence"
    assert first["probes"] == [{"new_kept": [order_id]}]
    assert first["verdict"] == "failed" and first["selection"]["result"]["nodeid"] == order_id
    (message,) = run.feedback
    assert "distinct elements come out in the order they first occur" in message
    # The probe's Tester saw the rules already written, never the patch.
    probe = [m for m in conversations(run.requests) if PROBE_WORDS in m]
    assert len(probe) == 1 and "the result holds no element twice" in probe[0]
    tester_text = json.dumps([r for r in run.requests if is_tester(r)])
    assert "sorted(set(xs))" not in tester_text
    # One probe only (fresh_probes 1): the second candidate passes both and is accepted.
    assert [t["why"] for t in pgs["tester_turns"]] == ["first", "probe"]
    assert pgs["rounds"][1]["verdict"] == "passed" and "probes" not in pgs["rounds"][1]
    assert pgs["verdict"] == "passed"


def test_a_diff_left_by_the_step_limit_is_checked_and_its_verdict_recorded(
    dedupe: Example, tmp_path: Path
) -> None:
    generator = [candidate(DEDUPE, DEDUPE.wrong, "sort the set")]
    policy = by_turn(generator, writing_properties(DEDUPE, ISSUE_ONLY | ORDER))
    run = pgs_run(dedupe, tmp_path, policy, "--agent.step-limit", "1")

    assert run.traj["info"]["exit_status"] == "submitted (exit_step_limit)"
    (last,) = run.pgs["rounds"]
    assert last["note"].startswith("the run ended (exit_step_limit)")
    assert last["failures"] > 0 and "feedback" not in last
    assert run.pgs["verdict"] == "failed"
    assert "verdict: failed" in run.stderr


#: The extraction turn's test of the issue's own example (a concrete test, no Hypothesis).
ISSUE_EXAMPLE = {
    f"{PROPERTY_DIR}/test_examples.py": (
        "import pytest\n\nfrom listutils.core import dedupe\n\n\n"
        '@pytest.mark.pgs_issue("dedupe([1, 2, 1]) should return [1, 2]")\n'
        "def test_the_issue_example():\n"
        "    out = dedupe([1, 2, 1])\n"
        '    assert out == [1, 2], f"returned {out!r}, expected [1, 2]"\n'
    )
}


def test_feedback_io_is_self_edit_the_issue_example_and_a_failing_repository_test(
    dedupe: Example, tmp_path: Path
) -> None:
    """The extraction turn writes the issue's example (kept: it fails on the original code);
    the wrong fix passes it but breaks a repository test: that test is fed back raw."""
    generator = [candidate(DEDUPE, DEDUPE.wrong, "sort the set"), submit("Fixed."), *FIX_AT_ONCE]
    run = run_session(
        dedupe,
        tmp_path,
        by_turn(generator, writing_properties(DEDUPE, ISSUE_EXAMPLE)),
        {"feedback": "io"},
    )
    pgs = run.pgs
    # One Tester turn, the extraction turn: its own prompt, no property prompt.
    (first,) = conversations(run.requests)
    assert "Write the issue's examples as tests" in first and DEDUPE.issue in first
    assert [t["why"] for t in pgs["tester_turns"]] == ["examples"]
    example = f"{PROPERTY_DIR}/test_examples.py::test_the_issue_example"
    assert pgs["validation"]["kept"] == [example]
    selection = pgs["rounds"][0]["selection"]
    assert selection["result"]["nodeid"] == "tests/test_core.py::test_dedupe_example"
    (message,) = run.feedback
    assert message.startswith("Round 1 of 5: tests/test_core.py::test_dedupe_example")
    assert "assert [1, 2, 3] == [3, 1, 2]" in message
    assert PROPERTY_DIR not in message
    # The right fix passes the issue's example, which failed on the original code: passed.
    assert pgs["verdict"] == "passed" and len(pgs["rounds"]) == 2
