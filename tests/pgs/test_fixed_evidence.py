"""``passed`` rests on fixed evidence (agent/pgs/evidence.py): the inputs a kept issue property
failed on when validated on the original code must all have been replayed, and the patch must
change a module the properties import."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.pgs.evidence import exercised, held_to_evidence, replay_inputs
from agent.pgs.verdict import judge
from agent.record.check import CheckReport, FailingInput, TestResult
from tests.support.example_repos import CFGLINE, DEDUPE

ISSUE_PATH = CFGLINE.property_path("issue_sound")
ISSUE_NODE = f"{ISSUE_PATH}::test_quoted_value_is_kept"

NODE = ".pgs/properties/test_quoted.py::test_quoted"
FORMS = ["form-a", "form-b"]


def failed_on_original() -> CheckReport:
    inputs = [
        FailingInput(example=f"test_quoted(value={n!r})", category="property_violation", replay=f)
        for n, f in zip(("a#", "b#"), FORMS, strict=True)
    ]
    inputs.append(FailingInput(example="test_quoted(value=f)", category="property_violation"))
    explicit = FailingInput(
        example="test_quoted(value='x#')", explicit=True, category="wrong_answer", replay="form-x"
    )
    inputs.append(explicit)  # the property's own @example: every check runs it anyway
    result = TestResult(
        nodeid=NODE,
        kind="issue",
        outcome="failed",
        category="property_violation",
        example=inputs[0].example,
        examples=inputs,
    )
    return CheckReport(results=[result], imported=["cfgline", "cfgline.parse"])


def passing(replayed: int | None) -> CheckReport:
    result = TestResult(
        nodeid=NODE, kind="issue", outcome="passed", category="pass", replayed=replayed
    )
    return CheckReport(results=[result])


def held(report: CheckReport, changed: list[str]) -> tuple[str, str]:
    original = failed_on_original()
    verdict, why = judge(report, {NODE})
    return held_to_evidence(
        verdict,
        why,
        report,
        replay=replay_inputs(original, {NODE}),
        changed=changed,
        imported=original.imported,
    )


def test_the_inputs_to_replay_are_every_kept_form_of_the_kept_issue_properties() -> None:
    original = failed_on_original()
    assert replay_inputs(original, {NODE}) == {NODE: FORMS}
    assert replay_inputs(original, set()) == {}


def test_a_pass_that_did_not_replay_the_failing_inputs_is_not_passed() -> None:
    assert judge(passing(None), {NODE})[0] == "passed"  # what the verdict was before
    verdict, why = held(passing(None), ["cfgline/parse.py"])
    assert verdict == "unchecked"
    assert f"did not replay the 2 input(s) on which {NODE} failed on the original code" in why
    verdict, _ = held(passing(1), ["cfgline/parse.py"])
    assert verdict == "unchecked"


def test_a_pass_that_replayed_every_failing_input_stays_passed_and_says_so() -> None:
    verdict, why = held(passing(2), ["cfgline/parse.py"])
    assert verdict == "passed"
    assert "2 input(s) that failed on the original code were replayed and pass" in why


def test_a_patch_that_changes_no_module_the_properties_import_is_not_passed() -> None:
    verdict, why = held(passing(2), ["NOTES.md"])
    assert verdict == "unchecked"
    assert "the patch changes no code the issue properties exercise" in why
    assert "NOTES.md" in why and "cfgline.parse" in why
    verdict, _ = held(passing(2), ["cfgline/__init__.py", "NOTES.md"])
    assert verdict == "passed"


def test_what_the_properties_import_decides_only_when_it_was_recorded() -> None:
    assert exercised(["src/cfgline/parse.py"], ["cfgline.parse"]) is True
    assert exercised(["docs/x.md", "other.py"], ["cfgline"]) is False
    assert exercised(["NOTES.md"], None) is None


def test_a_failing_check_is_failed_whatever_was_replayed() -> None:
    failed = failed_on_original()
    verdict, _ = held(failed, ["cfgline/parse.py"])
    assert verdict == "failed"


# --------------------------------------------------------------------------- end to end
# The seed case of issue 30, through run_task: the scripted Tester writes the issue property of
# the CFGLINE example (a `#` between quotes is part of the value), the scripted Generator
# submits one patch; rounds 0, so one check decides the verdict. Real Docker, pytest and
# Hypothesis in the container. The over-fit patch special-cases the issue's own line; about
# half the checks' fresh inputs miss every other quoted `#`: only the replayed inputs of the
# validation fail it every time.

#: Seeds (--pgs.seed) of the runs; docs/pgs.md gives the figures over ten.
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def cfgline(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.pgs.test_pgs import _example

    return _example(CFGLINE, tmp_path_factory)


def seed_case(example: Any, out: Path, code: str, seed: int) -> dict[str, Any]:
    """The ``pgs`` record of one run submitting ``code`` for the CFGLINE module."""
    from tests.pgs.test_pgs import candidate, run_session, session, submit, writing_properties

    tester = writing_properties(CFGLINE, {ISSUE_PATH: CFGLINE.properties["issue_sound"]})
    generator = [candidate(CFGLINE, code, "handle the quoted #"), submit("Fixed.")]
    run = run_session(example, out, session(generator, tester), {"rounds": 0, "seed": seed})
    return run.pgs


@pytest.mark.docker
@pytest.mark.parametrize("seed", SEEDS)
def test_the_over_fit_patch_never_gets_passed(cfgline: Any, tmp_path: Path, seed: int) -> None:
    pgs = seed_case(cfgline, tmp_path, CFGLINE.wrong, seed)
    assert pgs["verdict"] != "passed", pgs["verdict_reason"]
    (round_record,) = pgs["rounds"]
    (result,) = [r for r in round_record["report"]["results"] if r["nodeid"] == ISSUE_NODE]
    assert result["category"] != "pass" and result["replayed"] >= 1


@pytest.mark.docker
@pytest.mark.parametrize("seed", SEEDS)
def test_the_right_fix_gets_passed_on_the_replayed_inputs(
    cfgline: Any, tmp_path: Path, seed: int
) -> None:
    pgs = seed_case(cfgline, tmp_path, CFGLINE.fixed, seed)
    assert pgs["verdict"] == "passed", pgs["verdict_reason"]
    assert "were replayed and pass" in pgs["verdict_reason"]


# A probe only adds: the Tester's probe writes a new property and rewrites the kept issue
# property into one that passes (as a confused Tester might); the probe's validation runs only
# the new file, and the issue property kept before stays kept, in its validated version.
DEDUPE_ISSUE = DEDUPE.property_path("issue_sound")
DEDUPE_ORDER = DEDUPE.property_path("regression_sound")
PASSES_ALWAYS = (
    "import pytest\n\n"
    'pytestmark = pytest.mark.pgs_issue("the result holds no element twice")\n\n\n'
    "def test_no_repeats():\n"
    "    assert True\n"
)


@pytest.fixture(scope="module")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.pgs.test_pgs import _example

    return _example(DEDUPE, tmp_path_factory)


@pytest.mark.docker
def test_a_probe_validates_only_its_own_files_and_never_drops_a_kept_property(
    dedupe: Any, tmp_path: Path
) -> None:
    from tests.pgs.test_pgs import candidate, run_session, submit
    from tests.pgs.test_pgs_rounds import by_turn, writing_properties

    generator = [candidate(DEDUPE, DEDUPE.fixed, "skip what was seen"), submit("Fixed.")]
    probe = writing_properties(
        DEDUPE,
        {DEDUPE_ORDER: DEDUPE.properties["regression_sound"], DEDUPE_ISSUE: PASSES_ALWAYS},
    )
    first = {DEDUPE_ISSUE: DEDUPE.properties["issue_sound"]}
    run = run_session(
        dedupe, tmp_path, by_turn(generator, writing_properties(DEDUPE, first), probe=probe), {}
    )

    pgs = run.pgs
    issue_id = f"{DEDUPE_ISSUE}::test_no_repeats"
    order_id = f"{DEDUPE_ORDER}::test_order_of_first_occurrence"
    validation = pgs["validation"]
    assert validation["kept"] == [issue_id, order_id]
    assert pgs["properties"][DEDUPE_ISSUE] == DEDUPE.properties["issue_sound"]
    assert pgs["rounds"][0]["probes"] == [{"new_kept": [order_id]}]
    assert [t["kept"] for t in pgs["tester_turns"]] == [[issue_id], [issue_id, order_id]]
    # The issue property's validation on the original code stands (it failed there).
    results = {r["nodeid"]: r for r in validation["report"]["results"]}
    assert results[issue_id]["category"] != "pass"
    assert pgs["verdict"] == "passed", pgs["verdict_reason"]
