"""Evidence nothing in the sandbox can forge, end to end (scripted models over HTTP, real Docker
sandboxes of the DEDUPE example repository, real git, pytest and Hypothesis):

- the properties are the Tester's: whatever the Generator does to the property files (edit the
  file the feedback names, delete it, edit every one, replace the folder with a symlink), every
  check runs the Tester's own, the round records what it did, the verdict reason, the PR body
  and the inspector say so, and the feedback's rerun command still works;
- the repository's tests are the original tests: a patch that edits a related test file (or
  adds a conftest.py) is checked against the base commit's version and flagged, never
  ``passed``;
- the original code is the base commit pinned when the sandbox was ready: a Generator that
  commits its work still has all of it submitted and checked.

The Generator's first candidate is ``sorted(set(xs))`` for five elements or more: the issue
property (no element twice) passes it, the order property (the fresh probe's) fails it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.core.loop import RunResult
from agent.github.pr import evidence, refusal
from agent.inspect.html import write_trajectory
from agent.inspect.load import load
from agent.inspect.model import TrajectoryView as InspectedTrajectory
from tests.pgs.test_pgs_rounds import (
    FIX_AT_ONCE,
    ISSUE_ONLY,
    ORDER,
    by_turn,
    run_session,
    writing_properties,
)
from tests.support.example_repos import DEDUPE, PROPERTY_DIR
from tests.support.pgs_session import (
    SORTS_LONG_LISTS,
    Example,
    _example,
    asked,
    call,
    candidate,
    is_tester,
    pgs_run,
    submit,
)

pytestmark = pytest.mark.docker

ISSUE_FILE = DEDUPE.property_path("issue_sound")
ORDER_FILE = DEDUPE.property_path("regression_sound")
ORDER_ID = f"{ORDER_FILE}::test_order_of_first_occurrence"
#: What a Generator would write over a property file: the same test, always true.
ALWAYS_TRUE = (
    "import pytest\n\n"
    'pytestmark = pytest.mark.pgs_regression("distinct elements come out in order")\n\n\n'
    "def test_order_of_first_occurrence():\n"
    "    assert True  # FORGED\n"
)
FORGED_ISSUE = (
    "import pytest\n\n"
    'pytestmark = pytest.mark.pgs_issue("the result holds no element twice")\n\n\n'
    "def test_no_repeats():\n"
    "    assert True  # FORGED\n"
)
WRONG_FIRST = [candidate(DEDUPE, SORTS_LONG_LISTS, "sort the set"), submit("Fixed.")]
#: The Tester: the issue property first; its fresh probe adds the order property.
TESTER = writing_properties(DEDUPE, ISSUE_ONLY)
PROBE = writing_properties(DEDUPE, ORDER)


@pytest.fixture(scope="module")
def dedupe(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Example:
    return _example(DEDUPE, tmp_path_factory)  # the image is cached by content


def bash(command: str, thought: str = "") -> dict[str, Any]:
    return call("bash", thought, command=command)


def overwrite(path: str, text: str) -> str:
    """A shell line writing ``text`` to ``path`` (a heredoc: end it with a newline)."""
    return f"cat > {path} <<'PGS_EOF'\n{text}PGS_EOF\n"


def changes(round_record: dict[str, Any], key: str = "tampered") -> set[tuple[str, str]]:
    return {(c["path"], c["change"]) for c in round_record.get(key, [])}


def result_of(run: Any) -> RunResult:
    assert run.result is not None
    result: RunResult = run.result
    return result


# --------------------------------------------------------------------------- the properties


def test_the_named_property_file_overwritten_after_the_probe_still_fails_the_wrong_patch(
    dedupe: Example, tmp_path: Path
) -> None:
    """The issue's scenario: the feedback names the order property's file; the Generator
    writes an always-true test over it and submits the same code again."""
    generator = [
        *WRONG_FIRST,
        bash(overwrite(ORDER_FILE, ALWAYS_TRUE), "make the named test pass"),
        submit("Fixed."),
    ]
    run = run_session(dedupe, tmp_path, by_turn(generator, TESTER, probe=PROBE), {"rounds": 1})

    pgs = run.pgs
    assert pgs["verdict"] == "failed"
    first, second = pgs["rounds"]
    assert ORDER_FILE in first["feedback"]
    assert second["verdict"] == "failed"
    assert second["tampered"] == [{"path": ORDER_FILE, "change": "edited"}]
    assert f"first {ORDER_ID}" in pgs["verdict_reason"]
    assert (
        f"the Generator changed {ORDER_FILE} (edited); the check ran the Tester's version"
        in pgs["verdict_reason"]
    )
    assert set(pgs["property_sha256"]) == {ISSUE_FILE, ORDER_FILE}
    assert len(pgs["base_commit"]) == 40
    # --open-pr and --comment refuse it, and the PR body (with --force) says what happened.
    result = result_of(run)
    why = refusal(result, force=False)
    assert why is not None and "the PGS verdict is failed, not passed" in why
    assert refusal(result, force=True) is None
    body = "\n".join(evidence(result))
    assert "The Generator changed the Tester's property files" in body
    assert f"- `{ORDER_FILE}` (edited)" in body
    # The inspector's PGS panel names it too.
    traj = load(run.paths.traj)
    assert isinstance(traj, InspectedTrajectory)
    html = write_trajectory(traj, tmp_path / "page.html").path.read_text()
    assert "the Generator changed the Tester's property files" in html
    assert f"{ORDER_FILE} (edited)" in html


def rerun(request: dict[str, Any]) -> dict[str, Any]:
    """Runs the last feedback's rerun command (taken from the conversation)."""
    texts = [str(m.get("content")) for m in request["messages"]]
    commands = [m for t in texts for m in re.findall(r"Rerun it alone: (.+)", t)]
    return bash(commands[-1], "rerun the failing property")


def test_a_deleted_property_file_is_restored_the_rerun_command_works_and_keep_properties_holds_the_testers_text(  # noqa: E501
    dedupe: Example, tmp_path: Path
) -> None:
    generator: list[Any] = [
        *WRONG_FIRST,
        bash(f"rm {ORDER_FILE}", "the named test is in the way"),
        submit("Fixed."),
        None,  # the rerun command, from the second feedback message (step 4)
        candidate(DEDUPE, DEDUPE.fixed, "keep the order"),
        bash(overwrite(ISSUE_FILE, FORGED_ISSUE), "and a simpler issue test"),
        submit("Fixed, keeping the order."),
    ]
    policy = by_turn(generator, TESTER, probe=PROBE)

    def with_rerun(request: dict[str, Any]) -> Any:
        return rerun(request) if not is_tester(request) and asked(request) == 4 else policy(request)

    run = run_session(dedupe, tmp_path, with_rerun, {"keep_properties": True})

    pgs = run.pgs
    _, second, third = pgs["rounds"]
    assert changes(second) == {(ORDER_FILE, "deleted")}
    assert second["verdict"] == "failed" and second["selection"]["result"]["nodeid"] == ORDER_ID
    assert (
        f"the check put them back and ran them as the Tester wrote them ({ORDER_FILE} (deleted))"
        in second["feedback"]
    )
    # The rerun command, run by the Generator after the check, ran the Tester's property.
    reran = [s for s in run.traj["trajectory"] if "pgs_pytest_plugin" in s["action"]]
    assert reran and "1 failed" in reran[0]["observation"]
    assert "FORGED" not in reran[0]["observation"]
    # The last candidate is right: passed by the Tester's issue property, the forgery named.
    assert changes(third) == {(ISSUE_FILE, "edited")}
    assert third["verdict"] == "passed" and pgs["verdict"] == "passed"
    assert f"{ISSUE_FILE} (edited); the check ran the Tester's version" in pgs["verdict_reason"]
    kept = run.paths.properties.read_text()
    assert "FORGED" not in kept and "def test_no_repeats(xs):" in kept
    assert "test_order_of_first_occurrence" in kept


def test_every_property_file_edited_before_a_step_limit_still_fails_the_final_check(
    dedupe: Example, tmp_path: Path
) -> None:
    forge_all = "".join(
        overwrite(p, ALWAYS_TRUE if p == ORDER_FILE else FORGED_ISSUE)
        for p in (ISSUE_FILE, ORDER_FILE)
    )
    generator = [*WRONG_FIRST, bash(forge_all + f"chmod 600 {ISSUE_FILE}", "forge both")]
    policy = by_turn(generator, TESTER, probe=PROBE)
    run = pgs_run(dedupe, tmp_path, policy, "--agent.step-limit", "2", "--pgs.round-steps", "1")

    pgs = run.pgs
    assert run.traj["info"]["exit_status"] == "submitted (exit_step_limit)"
    last = pgs["rounds"][-1]
    assert last["note"].startswith("the run ended (exit_step_limit)")
    assert changes(last) == {(ISSUE_FILE, "edited"), (ORDER_FILE, "edited")}
    assert last["verdict"] == "failed" and pgs["verdict"] == "failed"
    assert ORDER_ID in pgs["verdict_reason"] and "FORGED" not in str(last["report"])


def test_the_scratch_folder_replaced_by_a_symlink_is_put_back(
    dedupe: Example, tmp_path: Path
) -> None:
    fake = "/tmp/fake-pgs"
    swap = (
        f"mkdir -p {fake}/properties && "
        + overwrite(f"{fake}/{ORDER_FILE.split('/', 1)[1]}", ALWAYS_TRUE)
        + f"rm -rf .pgs && ln -s {fake} .pgs && ls -l .pgs/"
    )
    generator = [*WRONG_FIRST, bash(swap, "a folder of my own"), submit("Fixed.")]
    run = run_session(dedupe, tmp_path, by_turn(generator, TESTER, probe=PROBE), {"rounds": 1})

    pgs = run.pgs
    second = pgs["rounds"][1]
    assert changes(second) == {(".pgs", "replaced by a symlink")}
    assert second["verdict"] == "failed" and ORDER_ID in pgs["verdict_reason"]
    assert (
        ".pgs (replaced by a symlink); the check ran the Tester's version"
        in (pgs["verdict_reason"])
    )


# --------------------------------------------------------------------------- the repository's tests

#: The wrong fix's output for the repository's example test, written into the test.
SORTED_EXPECTATION = "    assert dedupe([3, 1, 3, 2]) == [1, 2, 3]\n"


def edit_the_example_test() -> str:
    return f"sed -i 's/== \\[3, 1, 2\\]/== [1, 2, 3]/' {DEDUPE.related_test}"


def test_a_patch_that_edits_a_related_test_is_checked_against_the_original_test(
    dedupe: Example, tmp_path: Path
) -> None:
    """The wrong fix (sorted) plus the example test rewritten to expect sorted output: the
    base commit's test runs, and fails; then the right fix with the rewritten test still in
    the patch: tests-changed, never passed."""
    generator = [
        candidate(DEDUPE, DEDUPE.wrong, "sort the set"),
        bash(edit_the_example_test(), "the example expects the old order"),
        submit("Fixed."),
        *FIX_AT_ONCE,
    ]
    run = run_session(dedupe, tmp_path, by_turn(generator, TESTER), {"fresh_probes": 0})

    pgs = run.pgs
    first = pgs["rounds"][0]
    assert SORTED_EXPECTATION.strip() in first["patch"]
    assert first["verdict"] == "failed"
    assert changes(first, "tests_changed") == {(DEDUPE.related_test, "modified")}
    assert first["selection"]["result"]["nodeid"] == f"{DEDUPE.related_test}::test_dedupe_example"
    assert (
        "the check runs the repository's tests as they are at the base commit"
        in (first["feedback"])
    )
    # The right code, the test edit still in the patch: the original test passes, not passed.
    second = pgs["rounds"][1]
    assert SORTED_EXPECTATION.strip() in second["patch"]
    assert second["verdict"] == "tests-changed" and pgs["verdict"] == "tests-changed"
    assert pgs["verdict_reason"].startswith(
        f"the patch changes test files the check relies on: {DEDUPE.related_test} (modified); "
        "the check ran them as at the base commit, where 1 issue property"
    )
    result = result_of(run)
    why = refusal(result, force=False)
    assert why is not None and "the PGS verdict is tests-changed, not passed" in why
    body = "\n".join(evidence(result))
    assert f"- `{DEDUPE.related_test}` (modified)" in body
    traj = load(run.paths.traj)
    assert isinstance(traj, InspectedTrajectory)
    html = write_trajectory(traj, tmp_path / "page.html").path.read_text()
    assert f"as at the base commit: {DEDUPE.related_test} (modified)" in html
    assert 'class="badge tests-changed"' in html


#: A conftest.py that turns every failing test into a pass.
FORGING_CONFTEST = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
"""


def test_a_conftest_the_patch_adds_does_not_take_part_in_the_check(
    dedupe: Example, tmp_path: Path
) -> None:
    generator = [
        candidate(DEDUPE, DEDUPE.wrong, "sort the set"),
        bash(overwrite("conftest.py", FORGING_CONFTEST), "quiet the noisy tests"),
        submit("Fixed."),
    ]
    policy = by_turn(generator, writing_properties(DEDUPE, ISSUE_ONLY | ORDER))
    run = run_session(dedupe, tmp_path, policy, {"rounds": 0})

    pgs = run.pgs
    (only,) = pgs["rounds"]
    assert only["verdict"] == "failed" and pgs["verdict"] == "failed"
    assert "conftest.py" in only["patch"]
    assert changes(only, "tests_changed") == {("conftest.py", "added")}
    assert "the patch also changes conftest.py (added)" in pgs["verdict_reason"]


# --------------------------------------------------------------------------- the base commit


def test_work_the_generator_commits_is_submitted_and_checked_against_the_pinned_base(
    dedupe: Example, tmp_path: Path
) -> None:
    commit = (
        "git add -A && git -c user.name=g -c user.email=g@localhost commit -qm fix && "
        "git log --oneline | head -3"
    )
    generator = [
        candidate(DEDUPE, DEDUPE.fixed, "skip what was seen"),
        bash(commit, "commit the fix"),
        submit("Fixed."),
    ]
    policy = by_turn(generator, TESTER)
    run = run_session(dedupe, tmp_path, policy, {})

    pgs = run.pgs
    (only,) = pgs["rounds"]
    assert "+    for x in xs:" in only["patch"]
    assert only["verdict"] == "passed" and pgs["verdict"] == "passed"
    submitted = run.paths.patch.read_text()
    assert "+    for x in xs:" in submitted and "listutils/core.py" in submitted
    base = run.traj["info"]["sandbox_base_commit"]
    assert pgs["base_commit"] == base
    # The base is the user's commit, not the Generator's.
    head = subprocess.run(
        ["git", "-C", str(dedupe.path), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert base == head
    assert PROPERTY_DIR not in submitted
