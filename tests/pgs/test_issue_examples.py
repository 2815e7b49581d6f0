"""Self-Edit's example tests at repository level (``--feedback io`` / ``io-min``): the real CLI
on the bundled median example, a scripted model over HTTP for the Generator and the Tester's
extraction turn, a local sandbox, real pytest.

The extraction turn writes the issue's examples as concrete tests; validation on the original
code keeps the one that fails there (the issue's own ``median([1, 2, 3, 4])``) and drops the
one that passes. The Generator's first fix divides with ``//``: every repository test passes,
so without the examples io had nothing to feed back; with them, the failing example comes back
as Self-Edit's comment (input, expected output, what the code gave), and the right fix passes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main, make_example_repo
from agent.models.script_server import ScriptedServer
from agent.pgs.validate import keep_failing_examples, validate_properties
from agent.record.check import CheckReport, TestResult
from tests.pgs.test_prompts_from_config import EXAMPLE
from tests.support.textutil import run_argv

EXTRACTION = "You are a test engineer. You turn the examples an issue states"
PROPERTIES = ".pgs/properties"
KEPT = f"{PROPERTIES}/test_examples.py::test_the_issue_example"
PASSES = f"{PROPERTIES}/test_examples.py::test_an_odd_count"
STATED = "median([1, 2, 3, 4]) should return 2.5"

EXAMPLES = f"""\
import pytest

from stats import median


@pytest.mark.pgs_issue("{STATED}")
def test_the_issue_example():
    out = median([1, 2, 3, 4])
    assert out == 2.5, f"returned {{out!r}}, expected 2.5"


@pytest.mark.pgs_issue("median([3, 1, 2]) should return 2")
def test_an_odd_count():
    out = median([3, 1, 2])
    assert out == 2, f"returned {{out!r}}, expected 2"
"""
BUG = "    return ordered[len(ordered) // 2]\n"
FLOORED = (
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) // 2\n"
)
RIGHT = FLOORED.replace("]) // 2\n", "]) / 2\n")


def bash(command: str, thought: str) -> dict[str, Any]:
    return {"content": thought, "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def rewrite(old: str, new: str, thought: str) -> dict[str, Any]:
    script = (
        "import pathlib; p = pathlib.Path('stats.py'); "
        f"p.write_text(p.read_text().replace({old!r}, {new!r}))"
    )
    return bash(f"python3 -c {json.dumps(script)}", thought)


SUBMIT = {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}
GENERATOR = [
    rewrite(BUG, FLOORED, "The mean of the two middle values."),
    SUBMIT,
    rewrite("]) // 2\n", "]) / 2\n", "True division, not floor division."),
    SUBMIT,
]
TESTER = [
    bash(f"mkdir -p {PROPERTIES} && cat > {PROPERTIES}/test_examples.py <<'X'\n{EXAMPLES}X", "."),
    SUBMIT,
]


def policy(request: dict[str, Any]) -> Any:
    messages = request["messages"]
    steps = TESTER if str(messages[0]["content"]).startswith(EXTRACTION) else GENERATOR
    n = sum(m["role"] == "assistant" for m in messages)
    return steps[n] if n < len(steps) else None


def run(tmp: Path, *flags: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    repo = make_example_repo(tmp / "stats")
    check = {"python": sys.executable, "test_timeout": 20}
    with ScriptedServer(policy) as server:
        code = main(
            run_argv(
                repo,
                "--sandbox",
                "local",
                "--pgs.check",
                json.dumps(check),
                "--output-dir",
                str(tmp / "out"),
                *flags,
                url=server.url,
                issue=str(EXAMPLE / "issue.md"),
            )
        )
        requests = list(server.requests)
    assert code == 0
    traj: dict[str, Any] = json.loads(next((tmp / "out").rglob("*.traj")).read_text())
    return requests, traj


def extracted(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in requests if str(r["messages"][0]["content"]).startswith(EXTRACTION)]


@pytest.mark.parametrize("mode", ["io", "io-min"])
def test_io_feeds_back_the_failing_issue_example_of_a_patch_that_breaks_no_repository_test(
    tmp_path: Path, mode: str
) -> None:
    requests, traj = run(tmp_path, "--feedback", mode)
    pgs = traj["pgs"]
    assert pgs["mode"] == mode and pgs["ablation"]["rounds"] == 5
    # One Tester turn, the extraction turn: the issue in it, no property prompt.
    (first, *_) = extracted(requests)
    assert "median([1, 2, 3, 4])" in str(first["messages"][1]["content"])
    assert not any("property-based" in str(r["messages"][0]["content"]) for r in requests)
    assert [t["why"] for t in pgs["tester_turns"]] == ["examples"]
    # Validation on the original code: the example that fails there is kept, the other dropped.
    validation = pgs["validation"]
    assert validation["kept"] == [KEPT]
    assert "fails by its assertion on the original code" in validation["why_kept"][KEPT]
    dropped = {d["nodeid"]: d["reason"] for d in validation["dropped"]}
    assert dropped == {PASSES: "passes on the original code: does not capture the bug"}

    first_round, second_round = pgs["rounds"]
    # The floored fix breaks no repository test: the issue example is what fails.
    report = first_round["report"]["results"]
    repo_tests = [r for r in report if r["kind"] == "repo"]
    assert repo_tests and all(r["outcome"] == "passed" for r in repo_tests)
    assert first_round["selection"]["result"]["nodeid"] == KEPT
    assert first_round["selection"]["input"] == "median([1, 2, 3, 4])"  # the stated input
    message = first_round["feedback"]
    lines = message.splitlines()
    assert lines[0] == f"Round 1 of 5: the issue's example {KEPT} failed."
    assert lines[1] == f"Example (input and expected output, as the issue states them): {STATED}"
    assert "returned 2, expected 2.5" in message  # what the code gave, from pytest's output
    assert lines[-1] == "Rewrite the code so that this test passes."
    # The Generator got exactly that message, then fixed it: the example now passes.
    generator = [r for r in requests if r not in extracted(requests)]
    sent = [str(m.get("content")) for r in generator for m in r["messages"]]
    assert any(message in text for text in sent)
    assert "feedback" not in second_round and second_round["verdict"] == "passed"
    assert pgs["verdict"] == "passed"
    assert "1 issue property that failed on the original code pass" in pgs["verdict_reason"]


def test_without_the_issue_examples_io_has_nothing_to_feed_back(tmp_path: Path) -> None:
    """The behaviour before the extraction turn, still one flag away: the repository's tests
    alone pass the floored fix, so no feedback and a wrong patch."""
    requests, traj = run(tmp_path, "--feedback", "io", "--no-pgs.issue-examples")
    pgs = traj["pgs"]
    assert extracted(requests) == [] and pgs["tester_turns"] == []
    assert pgs["validation"]["note"] == "io: no Tester"
    (only,) = pgs["rounds"]
    assert "feedback" not in only and pgs["verdict"] == "tests-only"
    assert "// 2" in traj["info"]["submission"]


def test_only_the_examples_that_fail_on_the_original_code_are_kept() -> None:
    """The extraction's validation: the soundness filter's rules, then no example that holds
    on the original code (a regression-marked one passes there: it shows no bug)."""
    fails = TestResult(
        nodeid="e.py::test_a",
        kind="issue",
        outcome="failed",
        category="wrong_answer",
        rule="f(1) should return 2",
        returned="returned 1, expected 2",
    )
    passes = TestResult(nodeid="e.py::test_b", kind="issue", outcome="passed", category="pass")
    holds = TestResult(nodeid="e.py::test_c", kind="regression", outcome="passed", category="pass")
    report = CheckReport(results=[fails, passes, holds])
    kept, dropped = validate_properties(report, "f(1) returns 1, it should return 2")
    assert kept == ["e.py::test_a", "e.py::test_c"]
    kept, not_bugs = keep_failing_examples(kept, report)
    assert kept == ["e.py::test_a"]
    assert [d.nodeid for d in [*dropped, *not_bugs]] == ["e.py::test_b", "e.py::test_c"]
    assert "regression test that passes there" in not_bugs[0].reason
