"""The soundness filter's public tests and its rule of failing everywhere, and the input
generator's shared hard inputs, at the plugin: real pytest and Hypothesis on the host's Python
through a local sandbox, and on the repositories' Python 3.9 (an older Hypothesis) in Docker.

With ``PGS_ORACLE`` the calls the issue's examples state (``pgs_states`` marks) are answered
with the stated results; an issue property that then fails on an input whose every call was so
answered contradicts the issue. One that also calls the code on other arguments is not judged.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.validate import (
    EVERYWHERE_AT_LEAST,
    drop_contradicting_examples,
    drop_failing_everywhere,
)
from agent.record.check import CheckReport, Contradiction, TestResult
from envs.local import LocalSandbox, LocalSandboxConfig
from tests.support.repos import make_repo

SETTINGS = CheckSettings(python=sys.executable, test_timeout=20, seed=5, max_examples=30)
PROPS = ".pgs/properties"

CODE = """\
def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def parse(text):
    return [p for p in text.split(",")]


class Box:
    def __init__(self, n):
        self.n = n

    @staticmethod
    def double(n):
        return n * 2
"""
EXAMPLES = """\
import pytest

from calc import Box, median, parse


@pytest.mark.pgs_issue("median([1, 2, 3, 4]) should return 2.5")
@pytest.mark.pgs_states(call="calc.median", args=[[1, 2, 3, 4]], returns=2.5)
def test_median():
    assert median([1, 2, 3, 4]) == 2.5


@pytest.mark.pgs_issue("parse('') should raise ValueError")
@pytest.mark.pgs_states(call="calc.parse", args=[""], raises="ValueError")
def test_parse():
    with pytest.raises(ValueError):
        parse("")


@pytest.mark.pgs_issue("Box.double(3) should return 7")
@pytest.mark.pgs_states(call="calc.Box.double", args=[3], returns=7)
def test_double():
    assert Box.double(3) == 7


@pytest.mark.pgs_issue("a name that resolves to nothing")
@pytest.mark.pgs_states(call="calc.nothing_here", args=[1], returns=1)
def test_unresolved():
    pass
"""
PROPERTIES = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import calc
from calc import Box, median, parse

EVEN = st.lists(st.integers(0, 9), min_size=2, max_size=6).filter(lambda v: len(v) % 2 == 0)


@pytest.mark.pgs_issue("the lower middle value")
@given(xs=EVEN)
@example(xs=[1, 2, 3, 4])
def test_contradicts(xs):
    s = sorted(xs)
    assert median(xs) == s[len(s) // 2 - 1], f"returned {median(xs)!r}"


@pytest.mark.pgs_issue("the mean of the two middle values")
@given(xs=EVEN)
@example(xs=[1, 2, 3, 4])
def test_agrees(xs):
    s, m = sorted(xs), len(xs) // 2
    assert calc.median(xs) == (s[m - 1] + s[m]) / 2


@pytest.mark.pgs_issue("order does not matter, and it is the mean")
@given(xs=EVEN)
@example(xs=[1, 2, 3, 4])
def test_undecided(xs):
    assert median(xs) == median(list(reversed(xs))) + 0.5


@pytest.mark.pgs_issue("parse always gives a list")
@given(text=st.text())
@example(text="")
def test_parse_never_raises(text):
    assert isinstance(parse(text), list)


@pytest.mark.pgs_issue("double is even")
@given(n=st.integers())
@example(n=3)
def test_double_is_even(n):
    assert Box.double(n) % 2 == 0
"""
EVERYWHERE = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calc import median


@pytest.mark.pgs_issue("a float, always")
@given(xs=st.lists(st.integers(), min_size=1))
def test_everywhere(xs):
    assert isinstance(median(xs), float)


@pytest.mark.pgs_issue("the mean of the two middle values")
@given(xs=st.lists(st.integers(0, 9), min_size=1, max_size=6))
def test_somewhere(xs):
    s, m = sorted(xs), len(xs) // 2
    assert median(xs) == (s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2)
"""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Any]:
    repo = make_repo(tmp_path / "repo", {"calc.py": CODE})
    with LocalSandbox(repo, LocalSandboxConfig()) as sandbox:
        yield sandbox


def oracle_run(sandbox: Any, settings: CheckSettings = SETTINGS) -> CheckReport:
    sandbox.write_file(f"{PROPS}/examples/test_examples.py", EXAMPLES)
    sandbox.write_file(f"{PROPS}/test_props.py", PROPERTIES)
    return run_pytest(
        sandbox,
        [f"{PROPS}/examples/test_examples.py", f"{PROPS}/test_props.py"],
        settings=settings.model_copy(update={"oracle": True}),
        timeout=300,
    )


def check_oracle(report: CheckReport) -> None:
    results = report.by_id()
    outcomes = {n.rsplit("::", 1)[1]: r.outcome for n, r in results.items()}
    assert outcomes == {
        # Answered by the oracle, the stated examples hold.
        "test_median": "passed",
        "test_parse": "passed",
        "test_double": "passed",
        "test_unresolved": "passed",
        # A failure decided by the stated outputs alone: a contradiction.
        "test_contradicts": "failed",
        "test_parse_never_raises": "failed",
        "test_double_is_even": "failed",
        # Consistent with them, or calling the code on other arguments too: not judged.
        "test_agrees": "passed",
        "test_undecided": "passed",
    }
    found = results[f"{PROPS}/test_props.py::test_contradicts"].contradicts
    assert found is not None
    assert found.stated == "calc.median([1, 2, 3, 4]) returns 2.5"
    assert found.example_test == f"{PROPS}/examples/test_examples.py::test_median"
    assert found.input == "test_contradicts(xs=[1, 2, 3, 4])"
    assert found.failure.startswith("returned 2.5")
    raising = results[f"{PROPS}/test_props.py::test_parse_never_raises"].contradicts
    assert raising is not None and raising.stated == "calc.parse('') raises ValueError"
    assert "ValueError" in raising.failure
    method = results[f"{PROPS}/test_props.py::test_double_is_even"].contradicts
    assert method is not None and method.stated == "calc.Box.double(3) returns 7"
    assert report.oracle is not None
    assert report.oracle.installed == ["calc.median", "calc.parse", "calc.Box.double"]
    assert report.oracle.unresolved == ["calc.nothing_here"]


def test_the_issue_examples_answer_as_stated_and_a_property_failing_so_contradicts(
    local: Any,
) -> None:
    report = oracle_run(local)
    check_oracle(report)
    # Only the explicit examples run, and no pool pass: one input each.
    assert all(not r.pool for r in report.results)
    kept = [r.nodeid for r in report.results if r.kind == "issue" and "/examples/" not in r.nodeid]
    out, dropped = drop_contradicting_examples(kept, report)
    assert out == [f"{PROPS}/test_props.py::{n}" for n in ("test_agrees", "test_undecided")]
    reasons = {d.nodeid.rsplit("::", 1)[1]: d.reason for d in dropped}
    assert reasons["test_contradicts"] == (
        f"contradicts the issue's example {PROPS}/examples/test_examples.py::test_median: with "
        "calc.median([1, 2, 3, 4]) returns 2.5, as the issue states, it fails on "
        "test_contradicts(xs=[1, 2, 3, 4]): returned 2.5"
    )


def test_without_the_oracle_the_same_properties_run_on_the_original_code(local: Any) -> None:
    local.write_file(f"{PROPS}/test_props.py", PROPERTIES)
    report = run_pytest(local, [f"{PROPS}/test_props.py"], settings=SETTINGS, timeout=300)
    assert report.oracle is None and not any(r.contradicts for r in report.results)
    failed = {r.nodeid.rsplit("::", 1)[1] for r in report.results if r.failed}
    # On the original code the three median rules fail alike (it returns the upper middle):
    # the soundness filter's first rule keeps all three; only the issue's example tells the
    # contradicting one apart.
    assert {"test_agrees", "test_undecided", "test_contradicts"} <= failed


def test_the_pool_pass_counts_every_input_it_ran_and_how_many_failed(local: Any) -> None:
    local.write_file(f"{PROPS}/test_everywhere.py", EVERYWHERE)
    report = run_pytest(local, [f"{PROPS}/test_everywhere.py"], settings=SETTINGS, timeout=300)
    results = {r.nodeid.rsplit("::", 1)[1]: r for r in report.results}
    everywhere, somewhere = results["test_everywhere"], results["test_somewhere"]
    assert everywhere.pool_ran is not None and everywhere.pool_ran >= EVERYWHERE_AT_LEAST
    assert everywhere.pool_failed == everywhere.pool_ran
    assert somewhere.pool_ran and 0 < (somewhere.pool_failed or 0) < somewhere.pool_ran
    kept, dropped = drop_failing_everywhere(sorted(results_ids(report)), report)
    assert kept == [somewhere.nodeid] and [d.nodeid for d in dropped] == [everywhere.nodeid]
    assert dropped[0].reason.startswith(
        f"fails on every one of the {everywhere.pool_ran} inputs it ran on the original code, "
        f"while {somewhere.nodeid} holds on "
    )


def results_ids(report: CheckReport) -> list[str]:
    return [r.nodeid for r in report.results]


def result(nodeid: str, ran: int, failed: int, **fields: Any) -> TestResult:
    values: dict[str, Any] = {"kind": "issue", "outcome": "failed"}
    values.update(category="property_violation", pool_ran=ran, pool_failed=failed)
    values.update(fields)
    return TestResult(nodeid=nodeid, **values)


def test_failing_everywhere_drops_only_beside_a_rule_that_holds_somewhere() -> None:
    wide = result("p.py::wide", 40, 40)
    narrow = result("p.py::narrow", 40, 3)
    few = result("p.py::few", EVERYWHERE_AT_LEAST - 1, EVERYWHERE_AT_LEAST - 1)
    crash = result("p.py::crash", 40, 40, category="runtime_error")
    report = CheckReport(results=[wide, narrow, few, crash])
    ids = results_ids(report)
    kept, dropped = drop_failing_everywhere(ids, report)
    assert [d.nodeid for d in dropped] == ["p.py::wide"]
    assert kept == ["p.py::narrow", "p.py::few", "p.py::crash"]
    # Alone (or beside others failing everywhere too) it stays: the bug may be everywhere.
    alone = CheckReport(results=[wide, crash])
    assert drop_failing_everywhere(results_ids(alone), alone) == (results_ids(alone), [])
    # A probe's property is held to the rules kept before it.
    assert drop_failing_everywhere(["p.py::wide"], alone, [narrow])[0] == []
    # Why it is off by default: a property aimed at the bug's own inputs ("every negative x
    # raises", DID NOT RAISE on each) fails everywhere too, beside a broader rule that holds
    # somewhere, and is right; the rule drops it all the same.
    aimed = result("p.py::negatives_raise", 40, 40, returned="DID NOT RAISE ValueError")
    beside = CheckReport(results=[aimed, narrow])
    assert [d.nodeid for d in drop_failing_everywhere(results_ids(beside), beside)[1]] == [
        "p.py::negatives_raise"
    ]


def test_a_contradiction_recorded_by_the_plugin_reads_back_and_is_the_reason() -> None:
    found = Contradiction(
        stated="m.f(1) returns 2", example_test="e.py::test_f", input="test_p(x=1)", failure="x"
    )
    report = CheckReport(results=[result("p.py::a", 1, 1, contradicts=found)])
    again = CheckReport.model_validate_json(report.model_dump_json())
    assert again.results[0].contradicts == found
    assert drop_contradicting_examples(["p.py::a"], again)[1][0].reason == (
        "contradicts the issue's example e.py::test_f: with m.f(1) returns 2, as the issue "
        "states, it fails on test_p(x=1): x"
    )


def test_hard_draws_the_shared_values_beside_the_strategy_each_a_fresh_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.pgs import pgs_inputs

    values = [[1, 2, 3, 4], [], [-(2**70)]]
    monkeypatch.setattr(pgs_inputs, "HARD_INPUTS", {"f.xs": values})
    drawn: list[Any] = []

    @settings(max_examples=60, database=None, derandomize=True)
    @given(xs=pgs_inputs.hard("f.xs", st.lists(st.integers(0, 3))))
    def collect(xs: list[int]) -> None:
        drawn.append(list(xs))
        xs.append(99)  # the code under test changes its argument: the next draw is unharmed

    collect()
    assert all(v in drawn for v in values)
    assert any(v not in values for v in drawn)  # the property's own strategy draws too
    assert values == [[1, 2, 3, 4], [], [-(2**70)]]
    assert pgs_inputs.DRAWN and set(pgs_inputs.DRAWN) == {"f.xs"}
    # A name with no values is the strategy itself; with neither, an error naming the rest.
    own = st.integers()
    assert pgs_inputs.hard("other", own) is own
    with pytest.raises(KeyError, match=r"no hard inputs named 'other'; there are: \['f.xs'\]"):
        pgs_inputs.hard("other")


@pytest.mark.docker
def test_the_oracle_and_the_counts_work_on_python_3_9_too(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
    from envs.images import build_repo_image

    path = make_repo(tmp_path_factory.mktemp("oracle") / "oracle", {"calc.py": CODE})
    image = build_repo_image(path).tag
    settings = SETTINGS.model_copy(update={"python": "python3"})
    with DockerSandbox(DockerSandboxConfig(image=image)) as box:
        check_oracle(oracle_run(box, settings))
        box.write_file(f"{PROPS}/test_everywhere.py", EVERYWHERE)
        report = run_pytest(box, [f"{PROPS}/test_everywhere.py"], settings=settings, timeout=300)
        _, dropped = drop_failing_everywhere(results_ids(report), report)
        assert [d.nodeid.rsplit("::", 1)[1] for d in dropped] == ["test_everywhere"]
