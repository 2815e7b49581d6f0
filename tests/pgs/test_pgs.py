"""PGS end to end: the Generator and the Tester over the scripted server (the real openai client
over HTTP), real Docker sandboxes of the planted-bug repositories of ``example_repos``, real
pytest and Hypothesis inside them.

Each session is scripted with a policy that tells the two conversations apart by their system
prompt (the Tester's starts with "You are a test engineer") and answers each by how far it has
got, so the order in which the two ask does not matter. Every test looks at what a user sees:
the ``.traj`` (``pgs``: validation, rounds, selection, feedback, verdict), the messages each
model received, the printed output, the ``.patch`` and ``.properties.patch`` files. The
scripting and running are tests/support/pgs_session.py's.

The DEDUPE session used by most tests (``main``, through ``pgs run``):

- the Tester writes sound, unsound and broken property files, plus a stray edit to a source file;
- the Generator's first candidate (``sorted(set(xs))`` for five elements or more) loses the
  order, which the repository's example tests miss: two properties find it, one with a
  five-element counterexample, one that only draws lists of twenty or more;
- its second candidate is the correct fix.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.checking import assert_unsound_dropped, without_durations
from tests.support.example_repos import DEDUPE, PROPERTY_DIR, RLE
from tests.support.pgs_session import (
    CHECK,
    GENERATOR_SECRET,
    MODEL,
    SEED,
    SORTS_LONG_LISTS,
    TESTER_MODEL,
    TESTER_PROMPT,
    TESTER_SECRET,
    Example,
    Run,
    _example,
    asked,
    call,
    candidate,
    counterexample,
    is_tester,
    only_the_generator,
    only_the_tester,
    pgs_run,
    run_session,
    session,
    submit,
    writing_properties,
)

pytestmark = pytest.mark.docker

HANGS = {"check": {**CHECK, "test_timeout": 10}}

#: A regression property that only draws long lists: the wrong fix fails it too, but its
#: shrunk counterexample still has twenty elements. Sorted before test_regression_sound.py, so
#: it is the first failure in report order (what --feedback property and io pick).
LONG_LISTS = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from listutils.core import dedupe


@pytest.mark.pgs_regression("distinct elements of a long list come out in the order they occur")
@given(st.lists(st.integers(0, 9), min_size=20, max_size=30))
def test_long_list_order(xs):
    firsts = [x for i, x in enumerate(xs) if x not in xs[:i]]
    out = dedupe(xs)
    assert [x for i, x in enumerate(out) if x not in out[:i]] == firsts
"""
DEDUPE_PROPERTIES = {
    **{
        DEDUPE.property_path(role): DEDUPE.properties[role]
        for role in (
            "issue_sound",
            "regression_sound",
            "issue_unsound_passes",
            "regression_unsound_fails",
            "name_error",
            "import_error",
            "bad_strategy",
        )
    },
    f"{PROPERTY_DIR}/test_long_lists.py": LONG_LISTS,
}
SOUND = ("issue_sound", "regression_sound")


# --------------------------------------------------------------------------- scripting


#: The Generator: a fix that loses the order, then (after feedback) the correct one.
DEDUPE_GENERATOR = [
    candidate(DEDUPE, SORTS_LONG_LISTS, "a set cannot hold a repeat; sort it for a stable order"),
    submit("Fixed."),
    candidate(DEDUPE, DEDUPE.fixed, "keep the order of first occurrence; skip what was seen"),
    submit("Fixed, keeping the order."),
]
#: The Tester, with an edit outside the properties folder (a fix of its own, and a note).
STRAY = "notes-from-the-tester.txt"
DEDUPE_TESTER = [
    *writing_properties(DEDUPE, DEDUPE_PROPERTIES)[:2],
    call(
        "bash",
        f"{TESTER_SECRET}: try a fix to see the properties pass.",
        command=f"sed -i 's/xs\\[:-1\\]/xs/' {DEDUPE.module} && echo '# tester' >> "
        f"{DEDUPE.module} && echo stray > {STRAY}",
    ),
    submit("Properties written."),
]


# --------------------------------------------------------------------------- running


@pytest.fixture(scope="session")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(DEDUPE, tmp_path_factory)


@pytest.fixture(scope="session")
def rle(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(RLE, tmp_path_factory)


@pytest.fixture(scope="module")
def main_run(dedupe: Example, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The DEDUPE session through ``pgs run --keep-properties`` (feedback property-min)."""
    out = tmp_path_factory.mktemp("main")
    return pgs_run(dedupe, out, session(DEDUPE_GENERATOR, DEDUPE_TESTER), "--keep-properties")


# --------------------------------------------------------------------------- the DEDUPE session


def test_unsound_properties_are_dropped_with_the_reason(main_run: Run) -> None:
    validation = main_run.pgs["validation"]
    kept = {nodeid.split("::")[0] for nodeid in validation["kept"]}
    assert kept == {
        *(DEDUPE.property_path(role) for role in SOUND),
        f"{PROPERTY_DIR}/test_long_lists.py",
    }
    reasons = {d["nodeid"].split("::")[0]: d["reason"] for d in validation["dropped"]}
    assert_unsound_dropped(reasons)
    # Why each was kept is recorded too.
    why = {nodeid.split("::")[0]: reason for nodeid, reason in validation["why_kept"].items()}
    assert set(why) == kept
    assert why[DEDUPE.property_path("issue_sound")].startswith(
        "fails by its assertion on the original code: test_no_repeats(xs=[1, 2, 1])"
    )
    assert (
        why[DEDUPE.property_path("regression_sound")] == "regression: passes on the original code"
    )
    # The files the Tester wrote are recorded, and the printed summary counts the decisions.
    assert set(main_run.pgs["properties"]) == set(DEDUPE_PROPERTIES)
    assert "PGS (property-min): 3 properties kept, 5 dropped" in main_run.stderr


def test_feedback_names_the_minimal_counterexample(main_run: Run) -> None:
    first = main_run.pgs["rounds"][0]
    selection = first["selection"]
    assert selection["category"] == "property_violation"
    # The five-element and the twenty-element failures, and the others their searches saw.
    assert selection["candidates"] >= 2
    assert selection["why"].startswith(
        f"{selection['candidates']} property violations; chose the one whose input has"
    )
    assert "tokens" in selection["why"]
    assert len(counterexample(selection["input"])) == 5
    # The twenty-element input failed too: it is in the round's report, not in the feedback.
    failed = {r["nodeid"].split("::")[0]: r for r in first["report"]["results"] if r["example"]}
    long_input = failed[f"{PROPERTY_DIR}/test_long_lists.py"]["example"]
    assert len(counterexample(long_input)) >= 20
    # What the Generator's model received next: this message, in its own conversation.
    (message,) = main_run.feedback
    after = [r for r in main_run.generator_requests if asked(r) == 2]
    assert after and after[0]["messages"][-1]["content"] == message
    assert message.startswith("Round 1 of 5. Property violated: ")
    assert "Property violated: distinct elements come out in the order they first occur" in message
    assert len(counterexample(message)) == 5
    assert str(counterexample(long_input))[1:-1] not in message


def test_the_correct_candidate_passes_and_the_loop_stops(main_run: Run) -> None:
    pgs = main_run.pgs
    assert [r["round"] for r in pgs["rounds"]] == [1, 2]
    assert pgs["rounds"][1]["failures"] == 0 and "feedback" not in pgs["rounds"][1]
    assert pgs["verdict"] == "passed"
    assert main_run.traj["info"]["exit_status"] == "submitted"
    assert main_run.code == 0
    assert "2 candidates checked, 1 feedback messages; verdict: passed" in main_run.stderr
    assert re.search(r"round 1: \d+ property violations; chose the one", main_run.stderr)
    # No Generator request after its second submit: the loop stopped there.
    assert max(asked(r) for r in main_run.generator_requests) == 3


def test_the_patch_excludes_the_properties_which_keep_properties_writes_apart(
    main_run: Run, dedupe: Example, tmp_path: Path
) -> None:
    patch = main_run.paths.patch.read_text()
    assert patch == main_run.stdout  # what `pgs run` printed
    assert ".pgs" not in patch and "diff --git a/listutils/core.py" in patch
    assert "+    for x in xs:" in patch
    kept = main_run.paths.properties.read_text()
    added = re.findall(r"^\+\+\+ b/(\S+)", kept, re.MULTILINE)
    assert sorted(added) == [
        "tests/pgs_properties/test_issue_sound.py",
        "tests/pgs_properties/test_long_lists.py",
        "tests/pgs_properties/test_regression_sound.py",
    ]
    assert ".pgs/" not in kept
    # Both apply to the user's repository and the kept properties pass on the fixed code.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(dedupe.path), str(clone)], check=True)
    for text in (patch, kept):
        subprocess.run(["git", "apply", "-"], cwd=clone, input=text, text=True, check=True)
    assert (clone / "tests/pgs_properties/test_long_lists.py").read_text() == LONG_LISTS


def test_the_testers_edits_outside_the_properties_folder_are_reverted(main_run: Run) -> None:
    stray = [s for s in main_run.pgs["tester"]["trajectory"] if STRAY in s["action"]]
    assert [s["exit_code"] for s in stray] == [0]  # the edit was made in the sandbox
    patch = main_run.paths.patch.read_text()
    assert STRAY not in patch and "# tester" not in patch
    # Its own fix of the source did not reach the validation: the issue property still
    # failed on the original code and was kept.
    kept = main_run.pgs["validation"]["kept"]
    assert f"{DEDUPE.property_path('issue_sound')}::test_no_repeats" in kept
    # And the candidates were checked as the Generator wrote them.
    first = main_run.pgs["rounds"][0]["patch"]
    assert re.findall(r"^diff --git a/(\S+)", first, re.MULTILINE) == [DEDUPE.module]
    assert "return sorted(set(xs))" in first and "# tester" not in first


def test_the_tester_never_sees_the_generators_reasoning(main_run: Run) -> None:
    tester = [r for r in main_run.requests if is_tester(r)]
    assert tester and all(GENERATOR_SECRET not in json.dumps(r) for r in tester)
    assert all(TESTER_SECRET not in json.dumps(r) for r in main_run.generator_requests)
    history = main_run.pgs["tester"]["history"]
    assert history[0]["content"].startswith(TESTER_PROMPT)
    assert DEDUPE.issue in history[1]["content"]


# --------------------------------------------------------------------------- --feedback modes


def test_feedback_none_makes_no_tester_request(dedupe: Example, tmp_path: Path) -> None:
    generator = DEDUPE_GENERATOR[:2]
    run = run_session(dedupe, tmp_path, session(generator, DEDUPE_TESTER), {"feedback": "none"})
    assert run.result is not None and run.result.exit_status == "submitted"
    assert run.requests and not any(is_tester(r) for r in run.requests)
    assert len(run.requests) == 2
    assert run.pgs == {"mode": "none"}
    assert "sorted(set(xs))" in run.paths.patch.read_text()  # the wrong fix, unchallenged


SMALL_TESTER = writing_properties(
    DEDUPE,
    {
        **{DEDUPE.property_path(role): DEDUPE.properties[role] for role in SOUND},
        f"{PROPERTY_DIR}/test_long_lists.py": LONG_LISTS,
    },
)


def test_feedback_property_takes_any_failing_example_and_rounds_1_stops_after_one(
    dedupe: Example, tmp_path: Path
) -> None:
    wrong_again = [
        candidate(DEDUPE, DEDUPE.wrong.replace("sorted(set(xs))", "list(set(xs))"), "unsorted"),
        submit("Fixed again."),
    ]
    generator = [*DEDUPE_GENERATOR[:2], *wrong_again]
    run = run_session(
        dedupe,
        tmp_path,
        session(generator, SMALL_TESTER),
        {"feedback": "property", "rounds": 1},
    )
    pgs = run.pgs
    assert pgs["mode"] == "property"
    (message,) = run.feedback
    assert message.startswith("Round 1 of 1. Property violated: ")
    assert "Property violated: distinct elements of a long list" in message
    assert len(counterexample(message)) >= 20  # the first failure, not the smallest
    assert "chose the first in report order" in pgs["rounds"][0]["selection"]["why"]
    assert len(pgs["rounds"]) == 2 and pgs["rounds"][1]["failures"] > 0
    assert pgs["rounds"][1]["note"] == "no feedback: all 1 rounds used"
    assert pgs["verdict"] == "failed"
    assert run.result is not None and run.result.exit_status == "submitted"
    assert max(asked(r) for r in run.generator_requests) == 3  # no request after round 2


def test_rounds_0_checks_the_candidate_but_sends_no_feedback(
    dedupe: Example, tmp_path: Path
) -> None:
    run = run_session(dedupe, tmp_path, session(DEDUPE_GENERATOR, SMALL_TESTER), {"rounds": 0})
    pgs = run.pgs
    assert pgs["mode"] == "property-min"
    assert run.feedback == [] and len(pgs["rounds"]) == 1
    assert pgs["rounds"][0]["failures"] > 0 and pgs["verdict"] == "failed"
    assert pgs["rounds"][0]["note"] == "no feedback: all 0 rounds used"
    assert len(run.generator_requests) == 2
    assert "sorted(set(xs))" in run.paths.patch.read_text()


# --------------------------------------------------------------------------- timeouts


def test_a_hanging_candidate_is_fed_back_as_a_timeout_naming_the_input(
    rle: Example, tmp_path: Path
) -> None:
    generator = [
        candidate(RLE, RLE.wrong, "read every digit of the count"),
        submit("Fixed."),
        candidate(RLE, RLE.fixed, "the inner loop must advance j"),
        submit("Fixed the hang."),
    ]
    files = {RLE.property_path(role): RLE.properties[role] for role in SOUND}
    run = run_session(rle, tmp_path, session(generator, writing_properties(RLE, files)), HANGS)
    first = run.pgs["rounds"][0]
    selection = first["selection"]
    assert selection["category"] == "timeout"
    assert selection["input"] == "s='aaaaaaaaaa'"
    (message,) = run.feedback
    assert message.startswith("Round 1 of 5. Timeout")
    assert "Input (from the issue): s='aaaaaaaaaa'" in message
    assert "Too slow on this input" in message and "faster" in message
    assert run.pgs["verdict"] == "passed" and len(run.pgs["rounds"]) == 2


# --------------------------------------------------------------------------- determinism


def test_the_check_reports_are_identical_on_two_runs_of_the_same_session(
    dedupe: Example, main_run: Run, tmp_path: Path
) -> None:
    again = run_session(dedupe, tmp_path, session(DEDUPE_GENERATOR, DEDUPE_TESTER), {})
    reports = [without_durations(r["report"]) for r in again.pgs["rounds"]]
    assert reports == [without_durations(r["report"]) for r in main_run.pgs["rounds"]]
    assert without_durations(again.pgs["validation"]) == without_durations(
        main_run.pgs["validation"]
    )
    assert again.feedback == main_run.feedback
    selections = [without_durations(r.get("selection")) for r in again.pgs["rounds"]]
    assert selections == [without_durations(r.get("selection")) for r in main_run.pgs["rounds"]]
    # The same --pgs.seed replays the same seeds: one per check, each its own.
    seeds = [main_run.pgs["validation"]["seed"], *(r["seed"] for r in main_run.pgs["rounds"])]
    assert main_run.pgs["seed"] == SEED and len(set(seeds)) == len(seeds) == 3
    assert [again.pgs["validation"]["seed"], *(r["seed"] for r in again.pgs["rounds"])] == seeds


# --------------------------------------------------------------------------- a second model


def test_a_separate_tester_model_gets_its_own_server(dedupe: Example, tmp_path: Path) -> None:
    run = run_session(
        dedupe,
        tmp_path,
        only_the_generator(DEDUPE_GENERATOR),
        {},
        tester_policy=only_the_tester(DEDUPE_TESTER),
    )
    # The Tester's first turn, then its fresh probe once the second candidate passes.
    assert len(run.tester_requests) == 2 * len(DEDUPE_TESTER)
    assert all(r["model"] == TESTER_MODEL for r in run.tester_requests)
    assert len(run.requests) == len(DEDUPE_GENERATOR)
    assert all(r["model"] == MODEL for r in run.requests)
    # Neither conversation holds the other's reasoning; the Generator gets only the feedback.
    tester_text = json.dumps(run.tester_requests)
    generator_text = json.dumps(run.requests)
    assert GENERATOR_SECRET not in tester_text and TESTER_SECRET not in generator_text
    assert "You are a test engineer" not in generator_text
    (message,) = run.feedback
    assert run.requests[2]["messages"][-1]["content"] == message
    assert run.pgs["verdict"] == "passed"
    assert run.pgs["tester"]["info"]["model_stats"]["api_calls"] == len(DEDUPE_TESTER)
