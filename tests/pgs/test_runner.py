"""Running pytest with the plugin (agent/pgs/runner.py): the report of every outcome and category,
the same report twice, time limits and a missing report, on the host and in Python 3.9."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.pgs.runner import CheckSettings, run_pytest
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import (
    SETTINGS,
    VALIDATED,
    without_durations,
    write_properties,
)
from tests.support.example_repos import DEDUPE


def test_settings_reject_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        CheckSettings.model_validate({"max_example": 5})


_MORE_OUTCOMES = """\
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture
def broken():
    raise RuntimeError("no database")


def test_needs_fixture(broken):
    pass


def test_repo_style():
    assert sorted([2, 1]) == [2, 1]


@pytest.mark.pgs_regression("answers within the deadline")
@settings(max_examples=2)
@given(st.just(0))
def test_slow(n):
    time.sleep(0.3)


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def test_setup_errors_deadlines_and_repository_assertions_on_the_hosts_python(
    small_repo: Path,
) -> None:
    from envs.local import LocalSandbox

    settings = CheckSettings(deadline_ms=100, python=sys.executable)
    with LocalSandbox(small_repo) as sandbox:
        sandbox.write_file("test_more.py", _MORE_OUTCOMES)
        report = run_pytest(sandbox, ["test_more.py"], settings=settings, timeout=60)
        left = sandbox.run("git status --porcelain --ignored --untracked-files=all").output
        assert left.strip() == "?? test_more.py"  # no .hypothesis/, no __pycache__/
    results = {r.nodeid.split("::")[1]: r for r in report.results}
    setup = results["test_needs_fixture"]
    assert (setup.outcome, setup.category) == ("error", "runtime_error")
    assert setup.exception == "RuntimeError: no database"
    repo = results["test_repo_style"]
    assert (repo.kind, repo.category, repo.example) == ("repo", "wrong_answer", None)
    assert repo.returned and repo.returned.startswith("assert [1, 2] == [2, 1]")
    slow = results["test_slow"]
    assert (slow.category, slow.example) == ("timeout", "test_slow(n=0)")
    assert slow.exception and slow.exception.startswith("DeadlineExceeded")
    assert (results["test_skipped"].outcome, results["test_skipped"].category) == (
        "skipped",
        "pass",
    )


def test_plugin_reports_each_category_on_python_3_9(dedupe: DockerSandbox) -> None:
    assert "Python 3.9" in dedupe.run("python3 -V").output
    targets = write_properties(dedupe, DEDUPE, "issue_generated", "issue_sound", "categories")
    # test_spins never ends (a busy loop): the per-test limit stops it, and the run goes on.
    spinning = SETTINGS.model_copy(update={"test_timeout": 10})
    report = run_pytest(dedupe, [*targets, "tests/test_core.py"], settings=spinning, timeout=300)
    results = report.by_id()
    shrunk = results[f"{targets[0]}::test_no_repeats_generated"]
    assert (shrunk.kind, shrunk.rule) == ("issue", "the result holds no element twice")
    assert (shrunk.category, shrunk.example, shrunk.explicit) == (
        "property_violation",
        "test_no_repeats_generated(xs=[0, 0])",
        False,
    )
    assert shrunk.returned is not None and shrunk.returned.startswith("assert 2 == 1")
    assert "where 2 = len([0, 0])" in shrunk.returned
    assert shrunk.output and "test_no_repeats_generated" in shrunk.output
    explicit = results[f"{targets[1]}::test_no_repeats"]
    assert (explicit.category, explicit.example, explicit.explicit) == (
        "wrong_answer",
        "test_no_repeats(xs=[1, 2, 1])",
        True,
    )
    crash = results[f"{targets[2]}::test_first_element"]
    assert (crash.category, crash.exception) == (
        "runtime_error",
        "IndexError: list index out of range",
    )
    assert crash.example == "test_first_element(xs=[])" and crash.returned is None
    assert crash.trace and len(crash.trace.splitlines()) <= 10
    assert "assert dedupe(xs)[0] == xs[0]" in crash.trace
    spin = results[f"{targets[2]}::test_spins"]
    assert (spin.outcome, spin.category, spin.example) == ("timeout", "timeout", "test_spins(n=0)")
    assert spin.exception == "PgsTimeLimit: the test ran longer than the time limit of 10 s"
    assert results[f"{targets[2]}::test_single"].category == "pass"
    repo_test = results["tests/test_core.py::test_dedupe_example"]
    assert (repo_test.kind, repo_test.category, repo_test.rule) == ("repo", "pass", None)
    assert report.errors == [] and report.exit_code == 1
    assert dedupe.diff() == ""  # nothing left behind in the repository (.hypothesis, caches)


def test_two_runs_give_the_same_report(dedupe: DockerSandbox) -> None:
    targets = write_properties(dedupe, DEDUPE, *VALIDATED)

    def run() -> str:
        data = run_pytest(dedupe, targets, settings=SETTINGS, timeout=60).model_dump()
        return json.dumps(without_durations(data), indent=1)

    first = run()
    assert first == run()
    assert "xs=[0, 0]" in first


def test_a_run_over_its_time_limit_or_without_a_report_says_so(dedupe: DockerSandbox) -> None:
    targets = write_properties(dedupe, DEDUPE, "categories")
    slow = SETTINGS.model_copy(update={"test_timeout": 60})
    report = run_pytest(dedupe, targets, settings=slow, timeout=5)
    (result,) = report.results
    assert (result.outcome, result.category, result.nodeid) == ("timeout", "timeout", targets[0])
    assert "time limit of 5 s" in (result.exception or "")
    broken = SETTINGS.model_copy(update={"python": "/no/such/python"})
    report = run_pytest(dedupe, targets, settings=broken, timeout=30)
    assert report.results == [] and report.exit_code == 127
    assert report.errors[0].startswith("pytest wrote no report (exit code 127)")
