"""The honest verdict, the soundness rules that need no sandbox, and the loop's side of PGS
rounds (a step allowance per feedback round; a limit-ended diff is checked, never unchecked).

The loop tests use the real Agent with the in-process replay model and a LocalSandbox (a git
repository on the host): the Reviewer is the protocol seam the Agent talks to, so a small
recording Reviewer stands in for PGS there; PGS itself is tested end to end in test_pgs*.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core.loop import Agent, RunResult
from agent.core.loop_config import AgentConfig
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.models import ModelConfig, ReplayModel
from agent.pgs.validate import drop_contradictions, explicit_examples
from agent.pgs.verdict import judge
from agent.record.check import CheckReport, Coverage, TestResult
from agent.run.outputs import usage
from envs.local import LocalSandbox, LocalSandboxConfig
from tests.support.repos import make_repo

ISSUE_ID = ".pgs/properties/test_p.py::test_issue"
REG_ID = ".pgs/properties/test_p.py::test_regression"
REPO_ID = "tests/test_core.py::test_core"


def result(nodeid: str, kind: str, ok: bool = True) -> TestResult:
    category = "pass" if ok else ("property_violation" if kind != "repo" else "wrong_answer")
    return TestResult.model_validate(
        {
            "nodeid": nodeid,
            "kind": kind,
            "outcome": "passed" if ok else "failed",
            "category": category,
        }
    )


def report(*results: TestResult, cut: str | None = None) -> CheckReport:
    return CheckReport(results=list(results), cut=cut)


# --------------------------------------------------------------------------- the verdict


def test_passed_needs_an_issue_property_that_showed_the_bug() -> None:
    checked = report(
        result(ISSUE_ID, "issue"), result(REG_ID, "regression"), result(REPO_ID, "repo")
    )
    verdict, why = judge(checked, {ISSUE_ID})
    assert verdict == "passed"
    assert "1 issue property that failed on the original code" in why
    assert "1 regression property and 1 related repository test pass" in why


def test_related_tests_alone_are_tests_only_not_passed() -> None:
    verdict, why = judge(report(result(REPO_ID, "repo")), set())
    assert verdict == "tests-only" and "no issue property took part" in why
    # An issue property that never failed on the original (unfiltered) does not make it pass.
    verdict, _ = judge(report(result(ISSUE_ID, "issue"), result(REPO_ID, "repo")), set())
    assert verdict == "tests-only"


def test_nothing_ran_is_unchecked_and_any_failure_is_failed() -> None:
    assert judge(report(), set())[0] == "unchecked"
    verdict, why = judge(
        report(result(ISSUE_ID, "issue"), result(REPO_ID, "repo", ok=False)), {ISSUE_ID}
    )
    assert verdict == "failed" and REPO_ID in why
    errors = CheckReport(errors=["tests/test_x.py: ImportError: no module y"])
    assert judge(errors, set())[0] == "failed"


def test_a_budget_cut_is_said_in_the_reason() -> None:
    cut = "budget 60 s: 3 of 9 related test files not run"
    verdict, why = judge(report(result(ISSUE_ID, "issue"), cut=cut), {ISSUE_ID})
    assert verdict == "passed" and cut in why


def test_every_reason_says_how_much_ran_and_few_related_files_make_it_partial() -> None:
    def covered(run: int, found: int = 9, *results: TestResult) -> CheckReport:
        coverage = Coverage(properties=2, related_found=found, related_run=run)
        coverage.related_cut = found - run
        return CheckReport(results=[result(ISSUE_ID, "issue"), *results], coverage=coverage)

    # Half of the related files is enough; fewer is partial, ordered after passed.
    verdict, why = judge(covered(5), {ISSUE_ID})
    assert verdict == "passed"
    assert why.endswith(
        "; checked: 2 properties, 5 of 9 related test files ran (4 left out by the time budget)"
    )
    verdict, why = judge(covered(1), {ISSUE_ID})
    assert verdict == "partial"
    assert why.startswith("fewer than 50% of the related test files ran; 1 issue property")
    assert "1 of 9 related test files ran (8 left out by the time budget)" in why
    # Without an issue property it stays tests-only; with a failure, failed; both say how much.
    verdict, why = judge(covered(1, 9, result(REPO_ID, "repo")), set())
    assert verdict == "tests-only" and "1 of 9 related test files" in why
    verdict, why = judge(covered(1, 9, result(REPO_ID, "repo", ok=False)), {ISSUE_ID})
    assert verdict == "failed" and "1 of 9 related test files" in why
    # No related test file at all is not partial: there was nothing to cut.
    verdict, why = judge(covered(0, 0), {ISSUE_ID})
    assert verdict == "passed" and "no related test file found" in why


# --------------------------------------------------------------------------- contradictions

PROPERTIES = """
import pytest
from hypothesis import example, given, strategies as st
from listutils.core import dedupe


@pytest.mark.pgs_issue("the last element is kept")
@given(st.lists(st.integers()))
@example(xs=[1, 2, 1])
def test_issue(xs):
    assert dedupe(xs)[-1:] == xs[-1:] or not xs


@pytest.mark.pgs_regression("the output of [1, 2, 1] stays as it is")
@given(st.just([1, 2, 1]))
@example(xs=[1, 2, 1])
def test_regression(xs):
    assert dedupe(xs) == [1]


@pytest.mark.pgs_regression("no duplicates")
@given(st.lists(st.integers()))
@example(xs=[5])
def test_no_duplicates(xs):
    out = dedupe(xs)
    assert len(out) == len(set(out))
"""


def test_explicit_examples_are_read_from_the_source() -> None:
    found = explicit_examples({"test_p.py": PROPERTIES, "broken.py": "def (:"})
    assert found == {
        "test_issue": {"xs=[1, 2, 1]"},
        "test_regression": {"xs=[1, 2, 1]"},
        "test_no_duplicates": {"xs=[5]"},
    }


def test_a_regression_property_on_the_issues_own_case_is_dropped() -> None:
    third = ".pgs/properties/test_p.py::test_no_duplicates"
    original = report(
        result(ISSUE_ID, "issue", ok=False),
        result(REG_ID, "regression"),
        result(third, "regression"),
    )
    kept, dropped = drop_contradictions([ISSUE_ID, REG_ID, third], original, {"p": PROPERTIES})
    assert kept == [ISSUE_ID, third]
    assert [d["nodeid"] for d in dropped] == [REG_ID]
    assert "xs=[1, 2, 1]" in dropped[0]["reason"] and ISSUE_ID in dropped[0]["reason"]


# --------------------------------------------------------------------------- the loop's side


def test_usage_counts_every_tester_turn() -> None:
    traj = Trajectory(Path("unused.traj"), replay_config={})
    traj.info["model_stats"] = {"tokens_sent": 10, "tokens_received": 1, "instance_cost": 0.5}
    turn = {"info": {"model_stats": {"tokens_sent": 4, "tokens_received": 2, "instance_cost": 0.1}}}
    traj.extra["pgs"] = {"tester": turn, "tester_2": turn, "tester_turns": []}
    stats = usage(RunResult(exit_status="submitted", submission="", steps=1, trajectory=traj))
    assert stats["tokens_sent"] == 18 and abs(stats["tester_cost"] - 0.2) < 1e-9


class RecordingReviewer:
    """Feedback once, then accept; records final checks."""

    round_steps = 3
    round_time = 60.0

    def __init__(self) -> None:
        self.reviews: list[str] = []
        self.final: list[tuple[str, str]] = []

    def review(self, patch: str) -> str | None:
        self.reviews.append(patch)
        return "Round 1 of 1. Try again." if len(self.reviews) == 1 else None

    def final_check(self, patch: str, why: str) -> None:
        self.final.append((patch, why))


def bash(command: str) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


SUBMIT = {"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]}


def run_loop(
    tmp_path: Path, steps: list[dict[str, Any]], step_limit: int
) -> tuple[RunResult, Agent]:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    reviewer = RecordingReviewer()
    with LocalSandbox(repo, LocalSandboxConfig()) as box:
        model = ReplayModel(ModelConfig(name="replay"), script=steps)
        traj = Trajectory(tmp_path / "out" / "t.traj", replay_config={})
        agent = Agent(
            AgentConfig(step_limit=step_limit),
            model,
            box,
            Toolset.from_paths(None),
            traj,
            reviewer=reviewer,
        )
        result = agent.run("change x")
    agent.reviewer = reviewer
    return result, agent


def test_a_feedback_round_gets_its_own_step_allowance(tmp_path: Path) -> None:
    steps = [bash("echo 'x = 2' > a.py"), SUBMIT, bash("true"), bash("true"), SUBMIT]
    result, agent = run_loop(tmp_path, steps, step_limit=2)
    reviewer = agent.reviewer
    assert isinstance(reviewer, RecordingReviewer)
    # The limit was 2 steps; the feedback after step 2 gave 3 more, so the second submit counts.
    assert result.exit_status == "submitted" and result.steps == 5
    assert len(reviewer.reviews) == 2 and reviewer.final == []
    # The feedback reached the model as the next user message, after the submit's output.
    model = agent.model
    assert isinstance(model, ReplayModel)
    assert model.requests[2]["messages"][-1] == {
        "role": "user",
        "content": "Round 1 of 1. Try again.",
    }
    assert agent.step_limit == 5


def test_a_diff_left_by_a_limit_is_checked_not_submitted_unchecked(tmp_path: Path) -> None:
    steps = [bash("echo 'x = 3' > a.py"), bash("true"), bash("true")]
    result, agent = run_loop(tmp_path, steps, step_limit=2)
    reviewer = agent.reviewer
    assert isinstance(reviewer, RecordingReviewer)
    assert result.exit_status == "submitted (exit_step_limit)"
    assert len(reviewer.final) == 1
    patch, why = reviewer.final[0]
    assert "+x = 3" in patch and patch == result.submission and why == "exit_step_limit"
